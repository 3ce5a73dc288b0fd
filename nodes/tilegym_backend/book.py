"""The results book of the delivered backend (`tileport tilegym book`): one or more
sweep reports (`tileport tilegym sweep`) read together, per op and over them all,
and checked against the targets.

The book times the served calls (the port's outputs bitwise equal to the cutile
backend's) that carry both backends' times. For each, two ratios cutile-rs /
cutile of the call's medians: device time (CUPTI, the kernels the op call
launched) and per-call time (CUDA events around the `tilegym.ops` call). Per op
and over all ops, the geomean of each ratio over those calls, its 95 % bootstrap
interval (`nodes.perf_validator.bootstrap.geomean_interval`: each call's samples
resampled, the calls kept, so it says how well the measurements pin down the
geomean of these calls, not how other draws would come out) and the call with the
largest ratio.

Targets: every call the port ran bitwise equal (0 mismatches); the device-time
geomean's interval includes or is below 1.01 (cutile-rs's kernels not shown more
than 1 % slower than cutile's); the per-call geomean at most 1.00 (the cutile-rs
backend costs no more per call than cutile's).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodes.perf_validator.bootstrap import geomean_interval
from nodes.tilegym_backend.sweep import summarise
from schemas.model_file import ModelFileError, read_model
from schemas.run_layout import RunPathError, safe_name, write_text_atomic
from schemas.tilegym_backend import (
    BookCall,
    BookMachine,
    BookOpRow,
    BookRatio,
    BookSweep,
    BookTarget,
    SweepCall,
    SweepCallResult,
    SweepOutcome,
    SweepReport,
    TileGymBook,
)

DEVICE_LIMIT = 1.01
PER_CALL_LIMIT = 1.00
OVERALL = "all ops"
USAGE_ERROR = 2


class BookInputError(ValueError):
    """A sweep report (or book name) the book cannot use; the message says which and why."""


@dataclass(frozen=True)
class _Sweep:
    path: Path
    report: SweepReport


def read_sweeps(paths: list[Path]) -> list[_Sweep]:
    """The reports, each with device times, no op and seed given twice."""
    sweeps = [_Sweep(path, _read_timed(path)) for path in paths]
    given: dict[tuple[str, int], Path] = {}
    for sweep in sweeps:
        for summary in sweep.report.ops:
            key = (summary.op, sweep.report.seed)
            if key in given:
                raise BookInputError(
                    f"{sweep.path}: {summary.op} with seed {sweep.report.seed} is already "
                    f"given by {given[key]}"
                )
            given[key] = sweep.path
    return sweeps


def _read_timed(path: Path) -> SweepReport:
    try:
        report = read_model(path, SweepReport)
    except ModelFileError as error:
        raise BookInputError(str(error)) from error
    if not any(r.port_device and r.cutile_device for r in report.results):
        raise BookInputError(
            f"{path}: no device times ({_why_untimed(report)}); sweep again on a GPU host "
            "where cupti-python imports"
        )
    return report


def _why_untimed(report: SweepReport) -> str:
    if report.device_time_missing:
        return report.device_time_missing
    if not any(r.outcome in (SweepOutcome.SERVED, SweepOutcome.MISMATCH) for r in report.results):
        return "no call ran on both backends"
    return "made before the sweep measured device time"


def build_book(paths: list[Path], name: str, command: str) -> TileGymBook:
    try:
        safe_name(name)
    except RunPathError as error:
        raise BookInputError(f"book name: {error}") from error
    if not paths:
        raise BookInputError("no sweep reports given")
    sweeps = read_sweeps(paths)
    results = [result for sweep in sweeps for result in sweep.report.results]
    ops = list(dict.fromkeys(summary.op for sweep in sweeps for summary in sweep.report.ops))
    rows = [op_row(op, [r for r in results if r.call.op == op]) for op in ops]
    overall = op_row(OVERALL, results)
    return TileGymBook(
        name=name,
        command=command,
        sweeps=[
            BookSweep(
                path=str(sweep.path),
                date=sweep.report.date,
                seed=sweep.report.seed,
                ops=[summary.op for summary in sweep.report.ops],
                command=sweep.report.command,
            )
            for sweep in sweeps
        ],
        machines=_machines(sweeps),
        ops=rows,
        overall=overall,
        targets=check_targets(rows, overall),
    )


def _machines(sweeps: list[_Sweep]) -> list[BookMachine]:
    """One per distinct GPU, driver and package versions, with the reports made on it."""
    found: dict[tuple[str, str, tuple[tuple[str, str], ...]], BookMachine] = {}
    for sweep in sweeps:
        report = sweep.report
        key = (report.gpu, report.driver, tuple(sorted(report.versions.items())))
        machine = found.get(key) or BookMachine(
            gpu=report.gpu, driver=report.driver, versions=report.versions, sweeps=[]
        )
        found[key] = machine.model_copy(update={"sweeps": [*machine.sweeps, str(sweep.path)]})
    return list(found.values())


# --- the ratios ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Measured:
    """One call's medians and samples, cutile-rs then cutile."""

    port_us: float
    cutile_us: float
    port_samples: list[float]
    cutile_samples: list[float]


def _timed(result: SweepCallResult) -> bool:
    return (
        result.outcome is SweepOutcome.SERVED
        and result.port_device is not None
        and result.cutile_device is not None
        and result.port_us is not None
        and result.cutile_us is not None
    )


def _device(result: SweepCallResult) -> _Measured:
    assert result.port_device is not None and result.cutile_device is not None
    return _Measured(
        result.port_device.median_us,
        result.cutile_device.median_us,
        result.port_device.samples_us,
        result.cutile_device.samples_us,
    )


def _per_call(result: SweepCallResult) -> _Measured:
    assert result.port_us is not None and result.cutile_us is not None
    return _Measured(
        result.port_us, result.cutile_us, result.port_us_samples, result.cutile_us_samples
    )


def ratio(
    results: list[SweepCallResult], measure: Callable[[SweepCallResult], _Measured]
) -> BookRatio | None:
    """The geomean over `results` of cutile-rs / cutile, its bootstrap interval (None
    when a call kept no samples) and the call with the largest ratio."""
    if not results:
        return None
    measured = [(result.call, measure(result)) for result in results]
    ratios = [m.port_us / m.cutile_us for _, m in measured]
    worst = max(range(len(ratios)), key=ratios.__getitem__)
    call, most = measured[worst]
    samples = [(m.port_samples, m.cutile_samples) for _, m in measured]
    interval = None
    if all(port and cutile for port, cutile in samples):
        found = geomean_interval(samples)
        interval = (found.low, found.high)
    return BookRatio(
        geomean=statistics.geometric_mean(ratios),
        interval=interval,
        worst=BookCall(
            call=call, ratio=ratios[worst], port_us=most.port_us, cutile_us=most.cutile_us
        ),
    )


def op_row(op: str, results: list[SweepCallResult]) -> BookOpRow:
    counts = summarise(op, results)
    timed = [result for result in results if _timed(result)]
    return BookOpRow(
        op=op,
        calls=counts.calls,
        served=counts.served,
        mismatches=counts.mismatches,
        refused=counts.refused,
        timed=len(timed),
        device=ratio(timed, _device),
        per_call=ratio(timed, _per_call),
    )


# --- the targets ---------------------------------------------------------------------------


def check_targets(rows: list[BookOpRow], overall: BookOpRow) -> list[BookTarget]:
    return [
        _target_bitwise(rows, overall),
        _target_device(rows, overall),
        _target_per_call(rows, overall),
    ]


def _target_bitwise(rows: list[BookOpRow], overall: BookOpRow) -> BookTarget:
    ran = overall.served + overall.mismatches
    return BookTarget(
        description="every call the port ran bitwise equal to cutile's (0 mismatches)",
        passed=overall.mismatches == 0,
        missing=[row.op for row in rows if row.mismatches],
        detail=f"{overall.served} of {ran} bitwise equal, {overall.mismatches} mismatches; "
        f"{overall.refused} refused (not run)",
    )


def _reaches(found: BookRatio) -> float:
    """How low the ratio is shown to be: its interval's low end, or the geomean itself."""
    return found.interval[0] if found.interval is not None else found.geomean


def _untimed(rows: list[BookOpRow]) -> str:
    untimed = [row.op for row in rows if row.timed == 0]
    return f"; no served call timed: {', '.join(untimed)}" if untimed else ""


def _target_device(rows: list[BookOpRow], overall: BookOpRow) -> BookTarget:
    found = overall.device
    return BookTarget(
        description="device-time geomean cutile-rs / cutile: its 95 % interval includes or "
        f"is below {DEVICE_LIMIT:.2f}",
        passed=found is not None and _reaches(found) <= DEVICE_LIMIT,
        missing=[row.op for row in rows if row.device and _reaches(row.device) > DEVICE_LIMIT],
        detail=f"{ratio_text(found)} over {overall.timed} calls{_untimed(rows)}",
    )


def _target_per_call(rows: list[BookOpRow], overall: BookOpRow) -> BookTarget:
    found = overall.per_call
    return BookTarget(
        description="per-call geomean cutile-rs / cutile through tilegym.ops at most "
        f"{PER_CALL_LIMIT:.2f}",
        passed=found is not None and found.geomean <= PER_CALL_LIMIT,
        missing=[r.op for r in rows if r.per_call and r.per_call.geomean > PER_CALL_LIMIT],
        detail=f"{ratio_text(found)} over {overall.timed} calls{_untimed(rows)}",
    )


# --- the book's files ------------------------------------------------------------------------


def ratio_text(found: BookRatio | None) -> str:
    """A geomean as the book prints it: the figure, then its interval."""
    if found is None:
        return "not measured"
    if found.interval is None:
        return f"{found.geomean:.4f}"
    return f"{found.geomean:.4f} ({found.interval[0]:.4f} to {found.interval[1]:.4f})"


def call_text(call: SweepCall) -> str:
    """A drawn call in a few words: shape, dtype, unaligned start, other arguments."""
    words = ["x".join(map(str, call.shape)), call.dtype]
    if call.offset:
        words.append(f"offset {call.offset}")
    words += [f"{name}={value}" for name, value in call.arguments.items() if value != "tensor"]
    return " ".join(words)


def _worst_text(found: BookRatio | None) -> str:
    if found is None:
        return "-"
    worst = found.worst
    return (
        f"{worst.ratio:.4f}: {call_text(worst.call)} "
        f"({worst.port_us:.2f} / {worst.cutile_us:.2f} us)"
    )


def _row_line(row: BookOpRow) -> str:
    return (
        f"| {row.op} | {row.calls} | {row.served} | {row.mismatches} | {row.refused} "
        f"| {row.timed} | {ratio_text(row.device)} | {_worst_text(row.device)} "
        f"| {ratio_text(row.per_call)} | {_worst_text(row.per_call)} |"
    )


def target_line(target: BookTarget) -> str:
    missing = f"; ops missing it: {', '.join(target.missing)}" if target.missing else ""
    result = "PASS" if target.passed else "FAIL"
    return f"{result} {target.description}: {target.detail}{missing}"


def book_markdown(book: TileGymBook) -> str:
    lines = [
        f"# {book.name}: TileGym's cutile-rs backend against cutile through `tilegym.ops`",
        "",
    ]
    for machine in book.machines:
        versions = "".join(f", {name} {version}" for name, version in machine.versions.items())
        lines.append(
            f"Machine: {machine.gpu}, driver {machine.driver}{versions} "
            f"({', '.join(machine.sweeps)})."
        )
    lines += ["", "Sweeps:", ""]
    lines += [
        f"- `{sweep.path}`: {sweep.date}, seed {sweep.seed}, {', '.join(sweep.ops)}: "
        f"`{sweep.command}`"
        for sweep in book.sweeps
    ]
    lines += [
        "",
        f"Book: `{book.command}`",
        "",
        "Each served call timed on both backends gives two ratios cutile-rs / cutile of "
        "its medians over the sweep's --reps: device time (CUPTI, the summed durations of "
        "the kernels one op call launched) and per-call time (CUDA events around the "
        "`tilegym.ops` call). Per op and over all ops: their geomean over the timed calls, "
        "with its 95 % bootstrap interval (each call's samples resampled), and the call "
        "with the largest ratio (cutile-rs / cutile us).",
        "",
        "| op | calls | served | mismatches | refused | timed | device geomean | worst device "
        "call | per-call geomean | worst per-call call |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row_line(row) for row in [*book.ops, book.overall]]
    lines += ["", "## Targets", ""]
    lines += [f"- {target_line(target)}" for target in book.targets]
    return "\n".join(lines) + "\n"


def write_book(book: TileGymBook, out: Path) -> list[Path]:
    """`<name>.json` and `<name>.md` in `out`."""
    written = [out / f"{book.name}.json", out / f"{book.name}.md"]
    write_text_atomic(written[0], book.model_dump_json(indent=2) + "\n")
    write_text_atomic(written[1], book_markdown(book))
    return written


# --- the command ---------------------------------------------------------------------------


def add_book_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sweeps", nargs="+", type=Path, metavar="SWEEP", help="a tilegym-sweep-*.json report"
    )
    parser.add_argument("--name", required=True, help="the book's file name, without extension")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="where to write it")


def book_command(args: argparse.Namespace) -> int:
    sweeps = [str(path) for path in args.sweeps]
    command = shlex.join(
        ["tileport", "tilegym", "book", *sweeps, "--name", args.name, "--out", str(args.out)]
    )
    try:
        book = build_book(args.sweeps, args.name, command)
        written = write_book(book, args.out)
    except BookInputError as error:
        print(f"tileport tilegym book: {error}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as error:
        print(f"tileport tilegym book: cannot write to {args.out}: {error}", file=sys.stderr)
        return USAGE_ERROR
    for path in written:
        print(f"wrote {path}")
    for target in book.targets:
        print(target_line(target))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m nodes.tilegym_backend.book", description=__doc__
    )
    add_book_arguments(parser)
    return book_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
