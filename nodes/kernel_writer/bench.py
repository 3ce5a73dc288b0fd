"""Port every kernel of a corpus and print one table row per kernel: verdict,
configurations checked, exact / SASS-identical counts and the time of each
phase (reference export, lift, verification, rustc check, total).

    python -m nodes.kernel_writer.bench examples/kernels [--out DIR] [--only NAME ...]

The figures in docs/KERNEL_WRITER.md come from this command.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
from pathlib import Path

from nodes.kernel_writer.stage import port_kernel
from schemas.kernel_writer import LEVEL_ORDER, PortReport
from schemas.verdicts import KernelWriterVerdict

HEADER = (
    "| kernel | verdict | level | configs | exact | SASS-identical (sm_90, sm_100) | generics | "
    "reference export s | lift s | verify s | rustc s | total s |\n"
    "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"
)


def level(report: PortReport) -> str:
    return report.level or "-"


def row(name: str, report: PortReport) -> str:
    checks = report.checks
    exact = sum(c.exact for c in checks)
    sass = sum(c.sass_identical for c in checks)
    generics = ", ".join(g.name for g in report.generics if g.kind != "fact")
    facts = sum(g.kind == "fact" for g in report.generics)
    if facts:
        generics += f" (+{facts} fact)" if generics else f"{facts} fact"
    if report.literal_entries:
        generics += f"; {len(report.literal_entries)} literal entry"
    t = report.timings
    verdict = report.verdict.value
    if report.blocked:
        verdict += f": {report.blocked[0].op}"
    return (
        f"| {name} | {verdict} | {level(report)} | {len(checks)} | {exact} | {sass} | "
        f"{generics or '-'} | "
        f"{t.reference_export_s:.1f} | {t.lift_s:.2f} | {t.verify_s:.1f} | {t.rustc_s:.1f} | "
        f"{t.total_s:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="directory of <name>.port.yaml specs")
    parser.add_argument("--out", type=Path, help="keep each port under DIR/<name>")
    parser.add_argument("--only", action="append", default=[], help="port only these kernels")
    args = parser.parse_args(argv)
    specs = sorted(args.corpus.glob("*.port.yaml"))
    if args.only:
        specs = [s for s in specs if s.name.removesuffix(".port.yaml") in args.only]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}")
    print(HEADER)
    reports = []
    crashed = 0
    with tempfile.TemporaryDirectory(prefix="tileport-bench-") as tmp:
        root = args.out or Path(tmp)
        for spec in specs:
            name = spec.name.removesuffix(".port.yaml")
            try:
                reports.append(port_kernel(spec, root / name))
            except Exception as err:  # a bug in the stage: report it, port the rest
                print(f"| {name} | CRASH: {type(err).__name__}: {err} |", flush=True)
                crashed += 1
                continue
            print(row(name, reports[-1]), flush=True)
    print()
    print(summary(reports) + (f"; {crashed} CRASHED" if crashed else ""))
    return 1 if crashed else 0


def summary(reports: list[PortReport]) -> str:
    """COMPILED count by level, the other verdicts, and the median time per kernel."""
    compiled = [r for r in reports if r.verdict is KernelWriterVerdict.COMPILED]
    by_level = {name: sum(level(r) == name for r in compiled) for name in LEVEL_ORDER[:3]}
    others: dict[str, int] = {}
    for report in reports:
        if report.verdict is not KernelWriterVerdict.COMPILED:
            others[report.verdict.value] = others.get(report.verdict.value, 0) + 1
    times = [r.timings.total_s for r in reports]
    rest = ", ".join(f"{count} {verdict}" for verdict, count in sorted(others.items()))
    return (
        f"{len(compiled)}/{len(reports)} COMPILED ({by_level['exact']} exact, "
        f"{by_level['sass-identical']} sass-identical, {by_level['equivalent']} equivalent)"
        f"{'; ' + rest if rest else ''}; "
        f"median {statistics.median(times) if times else 0.0:.1f} s per kernel, "
        f"total {sum(times):.0f} s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
