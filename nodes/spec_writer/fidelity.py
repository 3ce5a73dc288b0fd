"""Does a generated spec compile exactly what the recorded launches compiled?

For each variant of a spec, its representative configuration is exported from
the unmodified library (the facts the spec implies, `toolchain.reference_export`)
and so is the recorded entry symbol of the same name, demangled by cuTile
(`cuda.tile.compilation.demangle_kernel_name`): the recorded launches compiled
exactly that signature. Both come out of one sandboxed export; their Tile IR
bytecode must be byte-identical and the spec's symbol must be one that was
recorded.

    python -m nodes.spec_writer.fidelity SPEC_DIR --signatures signatures.jsonl

With `--launches LAUNCHES.jsonl --source-root DIR` it checks every recorded
signature instead: each is exported from the unmodified tree as demangled, and
each launch record's own specialisation (its facts and hints, as a spec would
derive them) is exported beside it; every record that compiled a recorded
symbol must give that symbol and the same bytes.

    python -m nodes.spec_writer.fidelity --launches launches.jsonl \
        --source-root tilegym/src --signatures signatures.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from nodes.spec_writer.writer import KernelSpec, group_by_kernel
from schemas.launch_capture import LaunchRecord, read_launch_records
from schemas.port_spec import Hints, load_port_spec, spec_relative
from schemas.reference_export import Specialisation
from toolchain.reference_export import (
    ReferenceExportError,
    export_reference,
    library_module,
    specialisations,
)
from toolchain.source_tree import SourceTree


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


@dataclass
class SignatureFidelity:
    """The whole-signature check of one kernel."""

    kernel: str
    signatures: int
    exported: int
    records: int
    identical: int
    problems: list[str]
    notes: list[str] = field(default_factory=list)


def check_launches(
    records: list[LaunchRecord],
    source_root: Path,
    signatures: dict[str, str],
    modules: dict[str, str] | None = None,
) -> list[SignatureFidelity]:
    """Per kernel: every recorded signature (symbol -> hints; `modules` names each one's
    module, by its last component) exported as demangled, and every record's own
    specialisation exported and compared with the signature it names."""
    modules = modules or {}
    tree = SourceTree(source_root)
    results = []
    for launches in group_by_kernel(records):
        kernel = KernelSpec(tree, launches, signatures)
        own: dict[str, Specialisation] = {}
        disagree: list[str] = []
        for record in launches.records:
            symbol = kernel.symbol_of(record)
            if symbol not in signatures or symbol in own:
                continue
            if record.hints is not None and record.hints != signatures[symbol]:
                # An autotuned kernel: another run compiled the same signature with other
                # hints, so the two recordings describe different entries.
                disagree.append(
                    f"{symbol}: recorded with hints {record.hints}, signed with "
                    f"{signatures[symbol]}; not compared"
                )
                continue
            own[symbol] = kernel.launch_specialisation(record, f"r{len(own)}")
        stem = kernel.module.rpartition(".")[2]
        theirs = [
            Specialisation(
                variant=f"s{i}",
                params={},
                hints=Hints(**hints) if (hints := kernel.host_hints(signatures[symbol])) else None,
                demangle=symbol,
            )
            for i, symbol in enumerate(
                sorted(
                    s
                    for s in signatures
                    if modules.get(s, stem) == stem and s.startswith(f"{kernel.kernel}_K")
                )
            )
        ]
        result = _compare(kernel, own, theirs)
        result.notes += disagree
        results.append(result)
    return results


def _compare(
    kernel: KernelSpec, own: dict[str, Specialisation], theirs: list[Specialisation]
) -> SignatureFidelity:
    source = kernel.tree.module(kernel.module).path
    problems: list[str] = []
    exported = identical = 0
    with tempfile.TemporaryDirectory(prefix="tileport-fidelity-") as work:
        out = Path(work)
        by_symbol: dict[str, bytes] = {}
        for spec in theirs:  # one at a time: one that fails must not hide the others
            try:
                export_reference(
                    source,
                    kernel.kernel,
                    [spec],
                    out / spec.variant,
                    cubin_targets=(),
                    source_root=kernel.tree.root,
                    module=kernel.module,
                )
            except ReferenceExportError as exc:
                problems.append(f"{spec.demangle}: {exc.error.one_line()}")
                continue
            exported += 1
            assert spec.demangle is not None
            by_symbol[spec.demangle] = (
                out / spec.variant / f"{spec.variant}.bytecode"
            ).read_bytes()
        if own:
            try:
                record = export_reference(
                    source,
                    kernel.kernel,
                    list(own.values()),
                    out / "records",
                    cubin_targets=(),
                    source_root=kernel.tree.root,
                    module=kernel.module,
                )
            except ReferenceExportError as exc:
                problems.append(f"the records' own specialisations: {exc.error.one_line()}")
                record = None
            for variant in record.variants if record else []:
                wanted = next(sym for sym, spec in own.items() if spec.variant == variant.variant)
                mine = (out / "records" / variant.bytecode).read_bytes()
                if variant.symbol != wanted:
                    problems.append(f"a record derives {variant.symbol}, it compiled {wanted}")
                elif by_symbol.get(wanted) != mine:
                    problems.append(f"{wanted}: the bytes differ from the demangled export")
                else:
                    identical += 1
    return SignatureFidelity(kernel.kernel, len(theirs), exported, len(own), identical, problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodes.spec_writer.fidelity")
    parser.add_argument("specs", type=Path, nargs="?", help="a folder of generated specs")
    parser.add_argument("--signatures", type=Path, required=True)
    parser.add_argument(
        "--launches", type=Path, action="append", help="check every recorded signature (repeat)"
    )
    parser.add_argument("--source-root", type=Path, help="with --launches")
    args = parser.parse_args(argv)
    if args.launches is not None:
        if args.source_root is None:
            parser.error("--launches needs --source-root")
        return _all_signatures(args.launches, args.source_root, args.signatures)
    if args.specs is None:
        parser.error("give SPEC_DIR, or --launches and --source-root")
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


def _all_signatures(launches: list[Path], source_root: Path, signatures: Path) -> int:
    start = time.perf_counter()
    entries = [json.loads(line) for line in signatures.read_text().splitlines() if line.strip()]
    results = check_launches(
        [record for path in launches for record in read_launch_records(path)],
        source_root,
        {e["symbol"]: e.get("hints", "") for e in entries},
        {e["symbol"]: e["module"] for e in entries if "module" in e},
    )
    for r in results:
        print(
            f"{r.kernel}: {r.exported}/{r.signatures} signatures exported, "
            f"{r.identical}/{r.records} records byte-identical"
        )
        for problem in r.problems:
            print(f"    {problem}")
        for note in r.notes:
            print(f"    note: {note}")
    totals = [
        sum(getattr(r, f) for r in results)
        for f in ("signatures", "exported", "records", "identical")
    ]
    print(
        f"{totals[1]}/{totals[0]} recorded signatures exported from the unmodified tree; "
        f"{totals[3]}/{totals[2]} distinct launch specialisations byte-identical to the "
        f"signature they compiled ({time.perf_counter() - start:.0f} s)"
    )
    return 0 if totals[1] == totals[0] and totals[3] == totals[2] else 1


if __name__ == "__main__":
    sys.exit(main())
