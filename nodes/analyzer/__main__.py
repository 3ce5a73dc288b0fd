"""Run stage A alone on port specs (no graph, no GPU):

    python -m nodes.analyzer examples/kernels/*.port.yaml --out runs/analysis

Each spec gets its own run directory `<out>/<operator>` holding reference/,
reports/analysis.json and logs/. Prints one line per spec; exit 1 when any
spec does not PASS.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from nodes.analyzer.stage import analyse
from schemas.pipeline import RunOptions
from schemas.port_spec import operator_name
from schemas.reports import save_report
from schemas.run_layout import RunLayout
from schemas.state import PipelineState
from schemas.verdicts import AnalyzerVerdict


def analyse_spec(spec: Path, out: Path) -> tuple[str, float]:
    layout = RunLayout((out / operator_name(spec)).resolve())
    layout.prepare_fresh()
    state = PipelineState(
        run_id=uuid.uuid4().hex,
        operator=operator_name(spec),
        spec_path=str(spec.resolve()),
        run_dir=str(layout.root),
        options=RunOptions(no_gpu=True),
        started_at=datetime.now(UTC),
    )
    start = time.perf_counter()
    report = analyse(state)
    elapsed = time.perf_counter() - start
    save_report(report, layout)
    return f"{report.verdict}: {report.summary}", elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodes.analyzer", description=__doc__)
    parser.add_argument("specs", nargs="+", type=Path, help="port spec files")
    parser.add_argument("--out", type=Path, default=Path("runs/analysis"))
    args = parser.parse_args(argv)
    failed = 0
    total = 0.0
    for spec in args.specs:
        line, elapsed = analyse_spec(spec, args.out)
        total += elapsed
        failed += not line.startswith(AnalyzerVerdict.PASS.value + ":")
        print(f"{operator_name(spec)} ({elapsed:.2f} s) {line}")
    print(f"{len(args.specs) - failed}/{len(args.specs)} PASS in {total:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
