"""Does a generated spec compile exactly what the recorded launches compiled?

For each variant of a spec, its representative configuration is exported from
the unmodified library (the facts the spec implies, `toolchain.reference_export`)
and so is the recorded entry symbol of the same name, demangled by cuTile
(`cuda.tile.compilation.demangle_kernel_name`): the recorded launches compiled
exactly that signature. Both come out of one sandboxed export; their Tile IR
bytecode must be byte-identical and the spec's symbol must be one that was
recorded.

    python -m nodes.spec_writer.fidelity SPEC_DIR --signatures signatures.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from schemas.port_spec import load_port_spec, spec_relative
from schemas.reference_export import Specialisation
from toolchain.reference_export import (
    ReferenceExportError,
    export_reference,
    library_module,
    specialisations,
)


@dataclass(frozen=True)
class VariantFidelity:
    spec: str
    variant: str
    symbol: str
    recorded: bool
    identical: bool | None  # None: no recorded symbol to compare with
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.recorded and bool(self.identical)


def read_symbols(path: Path) -> set[str]:
    return {
        json.loads(line)["symbol"]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }


def check_spec(spec_path: Path, recorded: set[str]) -> list[VariantFidelity]:
    """One result per variant of the spec."""
    spec = load_port_spec(spec_path)
    own = specialisations(spec)
    with tempfile.TemporaryDirectory(prefix="tileport-fidelity-") as work:
        out = Path(work)
        try:
            first = export_reference(
                spec_relative(spec_path, spec.source),
                spec.kernel,
                own,
                out / "spec",
                cubin_targets=(),
                entry_symbol=spec.entry_symbol,
                **library_module(spec_path, spec),
            )
        except ReferenceExportError as exc:
            return [
                VariantFidelity(spec.name, s.variant, "", False, None, exc.error.one_line())
                for s in own
            ]
        symbols = {v.variant: v.symbol for v in first.variants}
        demangled = [
            Specialisation(
                variant=f"{s.variant}_recorded", params=s.params, hints=s.hints, demangle=sym
            )
            for s in own
            if (sym := symbols[s.variant]) in recorded
        ]
        if demangled:
            export_reference(
                spec_relative(spec_path, spec.source),
                spec.kernel,
                demangled,
                out / "recorded",
                cubin_targets=(),
                **library_module(spec_path, spec),
            )
        results = []
        for s in own:
            symbol = symbols[s.variant]
            identical = None
            if symbol in recorded:
                mine = (out / "spec" / f"{s.variant}.bytecode").read_bytes()
                theirs = (out / "recorded" / f"{s.variant}_recorded.bytecode").read_bytes()
                identical = mine == theirs
            results.append(
                VariantFidelity(spec.name, s.variant, symbol, symbol in recorded, identical)
            )
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodes.spec_writer.fidelity")
    parser.add_argument("specs", type=Path, help="a folder of generated specs")
    parser.add_argument("--signatures", type=Path, required=True)
    args = parser.parse_args(argv)
    recorded = read_symbols(args.signatures)
    start = time.perf_counter()
    results = [
        r for path in sorted(args.specs.glob("*.port.yaml")) for r in check_spec(path, recorded)
    ]
    for r in results:
        state = "identical" if r.ok else ("not recorded" if not r.recorded else "DIFFERENT")
        print(f"{r.spec} [{r.variant}]: {state} {r.symbol} {r.problem}".rstrip())
    good = sum(r.ok for r in results)
    print(
        f"{good}/{len(results)} variants byte-identical to their recorded signature "
        f"({time.perf_counter() - start:.0f} s)"
    )
    return 0 if good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
