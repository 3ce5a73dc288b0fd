"""Time the IR engine on the fixture IRs: parse, canonicalise, diff.

    python -m tileir.bench [--repeat 20] [--fixtures DIR] [--mutations DIR] [--json]

Per fixture: median wall time of parsing the text, canonicalising the parsed
module, the full op-by-op analysis against a second parse of it (alignment,
equivalences, classification: what a non-exact diff runs) and the whole
`diff_texts` of the fixture against itself (parse twice, canonicalise, the
exact fast path). Then the whole mutation suite end to end, every case a real
two-sided diff. Figures go to docs/IR_DIFF.md with the machine they ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tileir.canonical import canonicalize
from tileir.diff import analyse_entries, diff_texts
from tileir.ir import Module
from tileir.mlir import iter_ops, parse_module
from tileir.side import Side

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = REPO_ROOT / "tests" / "tileir" / "fixtures"
DEFAULT_MUTATIONS = REPO_ROOT / "tests" / "tileir" / "mutations"
_BASE = re.compile(r"^// BASE: (\S+)$", re.M)


@dataclass(frozen=True)
class FixtureTiming:
    name: str
    lines: int
    ops: int
    parse_ms: float
    canonical_ms: float
    align_ms: float
    end_to_end_ms: float


def median_ms(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def time_fixture(path: Path, repeat: int) -> FixtureTiming:
    text = path.read_text()
    module = parse_module(text)
    other = parse_module(text)
    return FixtureTiming(
        name=path.name,
        lines=len(text.splitlines()),
        ops=sum(1 for _ in iter_ops(module)),
        parse_ms=median_ms(lambda: parse_module(text), repeat),
        canonical_ms=median_ms(lambda: canonicalize(module), repeat),
        align_ms=median_ms(lambda: _analyse(module, other), repeat),
        end_to_end_ms=median_ms(lambda: diff_texts(text, text), repeat),
    )


def _analyse(ref: Module, gen: Module) -> None:
    """The full op-by-op analysis, which diff_texts skips for exact pairs."""
    for index, (ref_entry, gen_entry) in enumerate(zip(ref.entries, gen.entries, strict=True)):
        analyse_entries(Side("ref", ref_entry, index), Side("gen", gen_entry, index))


def time_mutations(folder: Path, repeat: int) -> tuple[int, float]:
    """(cases, median ms to diff them all end to end)."""
    cases = []
    for path in sorted(folder.glob("*.mlir")):
        text = path.read_text()
        base = _BASE.search(text)
        if base is not None:
            cases.append(((path.parent / base.group(1)).read_text(), text))
    elapsed = median_ms(lambda: [diff_texts(ref, gen) for ref, gen in cases], repeat)
    return len(cases), elapsed


def machine() -> dict[str, str]:
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "system": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def render(timings: list[FixtureTiming], mutations: tuple[int, float], repeat: int) -> str:
    host = machine()
    lines = [
        f"machine: {host['cpu']}, {host['cores']} cores, {host['system']}, Python {host['python']}",
        f"median of {repeat} runs, milliseconds",
        "",
        f"{'fixture':<30}{'lines':>7}{'ops':>7}{'parse':>9}{'canon':>9}{'align':>9}{'total':>9}",
    ]
    for t in timings:
        lines.append(
            f"{t.name:<30}{t.lines:>7}{t.ops:>7}{t.parse_ms:>9.2f}{t.canonical_ms:>9.2f}"
            f"{t.align_ms:>9.2f}{t.end_to_end_ms:>9.2f}"
        )
    total_ops = sum(t.ops for t in timings)
    total_ms = sum(t.end_to_end_ms for t in timings)
    lines.append(f"{'all fixtures':<30}{'':>7}{total_ops:>7}{'':>27}{total_ms:>9.2f}")
    count, elapsed = mutations
    lines += ["", f"mutation suite: {count} cases diffed end to end in {elapsed:.1f} ms"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tileir.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--mutations", type=Path, default=DEFAULT_MUTATIONS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    paths = sorted(args.fixtures.glob("*.mlir"))
    if not paths:
        print(f"no .mlir files in {args.fixtures}", file=sys.stderr)
        return 2
    timings = [time_fixture(path, args.repeat) for path in paths]
    mutations = time_mutations(args.mutations, args.repeat)
    if args.json:
        payload = {
            "machine": machine(),
            "repeat": args.repeat,
            "fixtures": [asdict(t) for t in timings],
            "mutations": {"cases": mutations[0], "ms": mutations[1]},
        }
        print(json.dumps(payload, indent=2))
    else:
        print(render(timings, mutations, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
