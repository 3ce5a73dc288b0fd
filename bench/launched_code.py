"""Which configurations of converted ports run other code than the kernel writer proved.

    python bench/launched_code.py RUN_DIR... --out TSV [--target sm_90]

For every configuration of every run directory (a conversion that reached the GPU
boundary), the facts cutile-rs's launcher will assume beyond what the proven
kernel states (`binding.facts_beyond_kernel`, docs/UPSTREAM_GAPS.md G17); where
there are some, the entry is assembled both ways on this host, as proven and as
launched (`host_builder.launched_code`), and their SASS compared. Writes one TSV
row per configuration and prints the totals; no GPU needed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from nodes.host_builder.binding import BindingError, facts_beyond_kernel
from nodes.host_builder.launched_code import LaunchedCodeError, compile_as_launched, load_run_port
from nodes.host_builder.rust_entry import RustSourceError
from tileir.sass import compare_cubins
from toolchain.rust_export import RustExporter
from toolchain.tools import ToolError

COLUMNS = ("kernel", "config", "facts_beyond", "launched_code", "proven_sass", "launched_sass")


def rows_of(run_dir: Path, target: str, work: Path) -> list[tuple[str, ...]]:
    port = load_run_port(run_dir)
    rows: list[tuple[str, ...]] = []
    with RustExporter() as exporter:
        for resolved in port.configurations():
            try:
                beyond = facts_beyond_kernel(port.binding, resolved)
            except BindingError as exc:
                rows.append((run_dir.name, resolved.name, "-", f"unbound: {exc}", "-", "-"))
                continue
            if not beyond:
                rows.append((run_dir.name, resolved.name, "", "proven", "-", "-"))
                continue
            proven, launched = (
                compile_as_launched(port, resolved, target, work, exporter, as_launched=kind)
                for kind in (False, True)
            )
            found = compare_cubins(proven.cubin, launched.cubin, target)
            rows.append(
                (
                    run_dir.name,
                    resolved.name,
                    ", ".join(f"{name} {hint}>{own}" for name, (hint, own) in beyond.items()),
                    "proven" if found.identical else "other",
                    str(found.reference_instructions),
                    str(found.generated_instructions),
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, required=True, metavar="TSV")
    parser.add_argument("--target", default="sm_90")
    args = parser.parse_args(argv)
    rows: list[tuple[str, ...]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tileport-launched-") as work:
        for run_dir in args.runs:
            try:
                found = rows_of(run_dir, args.target, Path(work) / run_dir.name)
            except (LaunchedCodeError, BindingError, RustSourceError, ToolError) as exc:
                print(f"{run_dir.name}: skipped: {exc}", file=sys.stderr)
                continue
            other = sum(row[3] == "other" for row in found)
            print(f"{run_dir.name}: {other} of {len(found)} configuration(s) run other code")
            rows += found
    args.out.write_text(
        "\n".join("\t".join(row) for row in [COLUMNS, *rows]) + "\n", encoding="utf-8"
    )
    other = sum(row[3] == "other" for row in rows)
    kernels = len({row[0] for row in rows if row[3] == "other"})
    print(
        f"{other} of {len(rows)} configurations ({kernels} of {len({row[0] for row in rows})} "
        f"kernels) run other code than proven; {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
