"""`tileport tilegym book`: the results book of the delivered backend, made from sweep
reports the test draws through the real models (no GPU): per op and over all ops,
the geomeans of cutile-rs / cutile device time and per-call time agree with a direct
computation, with the bootstrap interval of `nodes.perf_validator.bootstrap` and the
worst call; the targets print PASS or FAIL; an op and seed given twice and a report
without device times are refused (exit 2); the sweep's oldest reports still load;
the sweep's device time of a call is the sum of the kernels inside its window,
median over the windows, from CUPTI's own record types; and where CUPTI cannot be
started the sweep's report says why instead of failing."""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodes.perf_validator.bootstrap import geomean_interval
from nodes.tilegym_backend.book import (
    DEVICE_LIMIT,
    add_book_arguments,
    book_command,
    build_book,
)
from nodes.tilegym_backend.sweep import (
    ORACLE,
    PORT,
    device_time_missing,
    device_times,
    markdown,
    summarise,
)
from schemas.tilegym_backend import (
    DeviceTime,
    SweepCall,
    SweepCallResult,
    SweepOutcome,
    SweepReport,
    TileGymBook,
)
from toolchain.cupti import KernelRecord, Window
from toolchain.env import REPO_ROOT

REPS = 9
NOISE = 0.02  # a sample's spread around its call's time


def _samples(rng: random.Random, centre_us: float) -> list[float]:
    return [round(centre_us * rng.uniform(1 - NOISE, 1 + NOISE), 3) for _ in range(REPS)]


def _device(samples: list[float]) -> DeviceTime:
    return DeviceTime(median_us=statistics.median(samples), samples_us=samples)


def _result(
    rng: random.Random,
    op: str,
    outcome: SweepOutcome,
    device_ratio: float,
    per_call_ratio: float,
) -> SweepCallResult:
    """A call with times drawn around a cutile time and cutile-rs at the given ratios."""
    call = SweepCall(
        op=op,
        shape=[rng.randint(1, 4096), rng.randint(1, 4096)],
        dtype=rng.choice(["float32", "float16", "bfloat16"]),
        seed=rng.randrange(1 << 31),
        offset=rng.choice([0, 1]),
    )
    if outcome in (SweepOutcome.REFUSED, SweepOutcome.ORACLE_REFUSED):
        return SweepCallResult(call=call, outcome=outcome, detail="RuntimeError: rc=-6")
    kernels_us, host_us = rng.uniform(2.0, 300.0), rng.uniform(30.0, 90.0)
    port_us = _samples(rng, host_us * per_call_ratio * rng.uniform(0.97, 1.03))
    cutile_us = _samples(rng, host_us)
    port_device = _samples(rng, kernels_us * device_ratio * rng.uniform(0.99, 1.01))
    cutile_device = _samples(rng, kernels_us)
    return SweepCallResult(
        call=call,
        outcome=outcome,
        port_us=statistics.median(port_us),
        cutile_us=statistics.median(cutile_us),
        port_us_samples=port_us,
        cutile_us_samples=cutile_us,
        port_device=_device(port_device),
        cutile_device=_device(cutile_device),
    )


def _report(seed: int, results: list[SweepCallResult], missing: str = "") -> SweepReport:
    ops = list(dict.fromkeys(result.call.op for result in results))
    summaries = [summarise(op, [r for r in results if r.call.op == op]) for op in ops]
    return SweepReport(
        date="2026-12-08",
        seed=seed,
        gpu="NVIDIA H100 80GB HBM3",
        driver="580.159.04",
        versions={"python": "3.12.3", "torch": "2.11.0", "cupti-python": "13.0.0"},
        device_time_missing=missing,
        command=f"tileport tilegym sweep {' '.join(ops)} --seed {seed}",
        calls=sum(s.calls for s in summaries),
        served=sum(s.served for s in summaries),
        refused=sum(s.refused for s in summaries),
        mismatches=sum(s.mismatches for s in summaries),
        ops=summaries,
        results=results,
    )


def _write(report: SweepReport, path: Path) -> Path:
    path.write_text(report.model_dump_json(indent=2))
    return path


def _draw(
    rng: random.Random, op: str, count: int, device_ratio: float, per_call_ratio: float
) -> list[SweepCallResult]:
    return [
        _result(rng, op, SweepOutcome.SERVED, device_ratio, per_call_ratio) for _ in range(count)
    ]


def _book(tmp_path: Path, *reports: SweepReport) -> tuple[int, str, str]:
    """`book_command` on the reports written into tmp_path: its exit code, the book's
    markdown (empty when none was written) and the book's folder."""
    parser = argparse.ArgumentParser()
    add_book_arguments(parser)
    tmp_path.mkdir(exist_ok=True)
    paths = [_write(r, tmp_path / f"sweep-{i}.json") for i, r in enumerate(reports)]
    out = tmp_path / "book"
    args = parser.parse_args([*map(str, paths), "--name", "book", "--out", str(out)])
    code = book_command(args)
    written = (out / "book.md").read_text() if (out / "book.md").is_file() else ""
    return code, written, str(out)


def _ratios(results: list[SweepCallResult], device: bool) -> list[float]:
    """cutile-rs / cutile of each served call's medians, computed from its samples."""
    ratios = []
    for result in results:
        if result.outcome is not SweepOutcome.SERVED:
            continue
        if device:
            assert result.port_device and result.cutile_device
            top, bottom = result.port_device.samples_us, result.cutile_device.samples_us
        else:
            top, bottom = result.port_us_samples, result.cutile_us_samples
        ratios.append(statistics.median(top) / statistics.median(bottom))
    return ratios


def test_the_geomeans_their_intervals_and_worst_calls_follow_the_calls(tmp_path: Path) -> None:
    rng = random.Random(20261208)
    relu = _draw(rng, "relu", 12, rng.uniform(0.98, 1.02), rng.uniform(0.8, 1.3))
    relu.append(_result(rng, "relu", SweepOutcome.MISMATCH, 1.0, 1.0))
    gelu = _draw(rng, "gelu", 8, rng.uniform(0.98, 1.02), rng.uniform(0.8, 1.3))
    gelu.append(_result(rng, "gelu", SweepOutcome.REFUSED, 1.0, 1.0))
    gelu.append(_result(rng, "gelu", SweepOutcome.ORACLE_REFUSED, 1.0, 1.0))
    relu_again = _draw(rng, "relu", 5, rng.uniform(0.98, 1.02), rng.uniform(0.8, 1.3))
    first, second = _report(7, relu + gelu), _report(8, relu_again)
    paths = [_write(first, tmp_path / "a.json"), _write(second, tmp_path / "b.json")]

    book = build_book(paths, "h100-book", "tileport tilegym book a.json b.json")

    by_op = {"relu": relu + relu_again, "gelu": gelu}
    assert [row.op for row in book.ops] == ["relu", "gelu"]
    for row in [*book.ops, book.overall]:
        results = by_op.get(row.op, relu + gelu + relu_again)
        served = [r for r in results if r.outcome is SweepOutcome.SERVED]
        assert row.timed == len(served)
        for found, device in ((row.device, True), (row.per_call, False)):
            assert found is not None
            ratios = _ratios(results, device)
            assert found.geomean == pytest.approx(statistics.geometric_mean(ratios), rel=1e-12)
            assert found.worst.ratio == pytest.approx(max(ratios), rel=1e-12)
            assert found.worst.call == served[ratios.index(max(ratios))].call
            pairs = [
                (r.port_device.samples_us, r.cutile_device.samples_us)
                if device and r.port_device and r.cutile_device
                else (r.port_us_samples, r.cutile_us_samples)
                for r in served
            ]
            interval = geomean_interval(pairs)
            assert found.interval == (interval.low, interval.high)
            assert found.interval[0] <= found.geomean <= found.interval[1]
            assert found.interval[1] / found.interval[0] < 1 + 4 * NOISE
    counts = [(r.calls, r.served, r.mismatches, r.refused) for r in [*book.ops, book.overall]]
    assert counts == [(18, 17, 1, 0), (9, 8, 0, 1), (27, 25, 1, 1)]
    assert [(s.path, s.seed, s.ops) for s in book.sweeps] == [
        (str(paths[0]), 7, ["relu", "gelu"]),
        (str(paths[1]), 8, ["relu"]),
    ]
    [machine] = book.machines
    assert machine.versions["torch"] == "2.11.0" and machine.sweeps == list(map(str, paths))
    assert TileGymBook.model_validate_json(book.model_dump_json()) == book


def test_the_targets_print_pass_and_fail(tmp_path: Path) -> None:
    rng = random.Random(5)
    fast = _draw(rng, "softmax", 10, 1.0, 0.9) + _draw(rng, "relu", 10, 1.0, 0.95)
    code, book_md, out = _book(tmp_path / "pass", _report(1, fast))
    assert code == 0
    targets = book_md.split("## Targets\n\n")[1].splitlines()
    assert [line.split(" ", 2)[1] for line in targets] == ["PASS", "PASS", "PASS"]
    assert targets[0].startswith(
        "- PASS every call the port ran bitwise equal to cutile's (0 mismatches): 20 of 20 "
        "bitwise equal, 0 mismatches; 0 refused (not run)"
    )
    assert f"its 95 % interval includes or is below {DEVICE_LIMIT:.2f}" in targets[1]
    assert "| all ops | 20 | 20 | 0 | 0 | 20 |" in book_md
    assert (Path(out) / "book.json").is_file()

    slow = _draw(rng, "softmax", 10, 1.0, 0.9) + _draw(rng, "relu", 10, 1.2, 1.3)
    slow.append(_result(rng, "relu", SweepOutcome.MISMATCH, 1.0, 1.0))
    code, book_md, _ = _book(tmp_path / "fail", _report(2, slow))
    assert code == 0  # a report: a missed target is printed, not an error
    targets = book_md.split("## Targets\n\n")[1].splitlines()
    assert [line.split(" ", 2)[1] for line in targets] == ["FAIL", "FAIL", "FAIL"]
    assert all(line.endswith("; ops missing it: relu") for line in targets)


def test_an_op_and_seed_given_twice_are_refused(tmp_path: Path) -> None:
    rng = random.Random(11)
    once = _report(3, _draw(rng, "relu", 3, 1.0, 1.0) + _draw(rng, "gelu", 3, 1.0, 1.0))
    again = _report(3, _draw(rng, "relu", 4, 1.0, 1.0))
    paths = [_write(once, tmp_path / "once.json"), _write(again, tmp_path / "again.json")]
    out = tmp_path / "out"
    command = [sys.executable, "-m", "app.cli", "tilegym", "book", *map(str, paths)]
    done = subprocess.run(
        [*command, "--name", "b", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"tileport tilegym book: {paths[1]}: relu with seed 3 is already given by {paths[0]}\n"
    )
    assert not out.exists()


def test_a_report_without_device_times_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(13)
    untimed = [
        r.model_copy(update={"port_device": None, "cutile_device": None})
        for r in _draw(rng, "relu", 3, 1.0, 1.0)
    ]
    why = "CUPTI could not be started: ModuleNotFoundError: No module named 'cupti'"
    code, book_md, _ = _book(tmp_path, _report(4, untimed, missing=why))
    assert (code, book_md) == (2, "")
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(
        f"sweep-0.json: no device times ({why}); sweep again on a GPU host where cupti-python "
        "imports"
    )


def _oldest_sweep() -> Path:
    """The first sweep report by its date (`tilegym-sweep-<date>...`), made before the
    sweep measured device time; the smallest file need not be it."""
    return min((REPO_ROOT / "bench/results").glob("tilegym-sweep-*.json"), key=lambda p: p.name)


def test_a_sweep_report_from_before_device_times_still_loads_and_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _oldest_sweep()
    report = SweepReport.model_validate_json(path.read_text())
    assert report.results and report.versions == {} and report.device_time_missing == ""
    assert all(r.port_device is None and not r.port_us_samples for r in report.results)
    parser = argparse.ArgumentParser()
    add_book_arguments(parser)
    args = parser.parse_args([str(path), "--name", "old", "--out", str(tmp_path)])
    assert book_command(args) == 2
    assert "made before the sweep measured device time" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_calls_device_time_sums_its_windows_kernels_and_takes_the_median() -> None:
    rng = random.Random(17)
    records: list[KernelRecord] = []
    windows: list[Window] = []
    expected: dict[str, list[float]] = {ORACLE: [], PORT: []}
    clock = 1_000_000
    for _ in range(5):
        for backend in (ORACLE, PORT):
            clock += 50_000  # the flush between windows: a kernel no window holds
            records.append(KernelRecord("flush", clock - 40_000, clock - 10_000))
            start, total = clock, 0
            for _ in range(rng.randint(1, 3)):
                clock += rng.randint(500, 2_000)
                duration = rng.randint(1_000, 90_000)
                records.append(KernelRecord(f"{backend} kernel", clock, clock + duration))
                clock += duration
                total += duration
            clock += 2_000
            windows.append(Window(backend, start, clock))
            expected[backend].append(total / 1e3)
    windows.append(Window(PORT, clock + 1_000, clock + 5_000))  # no kernel ran: left out
    found = device_times(records, windows)
    for backend, samples in expected.items():
        assert found[backend].samples_us == pytest.approx(samples)
        assert found[backend].median_us == pytest.approx(statistics.median(samples))
    call = SweepCall(op="relu", shape=[3, 5], dtype="float16", seed=1)
    result = SweepCallResult(
        call=call,
        outcome=SweepOutcome.SERVED,
        port_device=found[PORT],
        cutile_device=found[ORACLE],
    )
    summary = summarise("relu", [result])
    assert summary.port_device_us_median == round(found[PORT].median_us, 2)


# What the sweep's CUPTI check asks of torch: a synchronisation, here of nothing.
TORCH_WITHOUT_GPU = SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: None))


@pytest.mark.skipif(importlib.util.find_spec("cupti") is not None, reason="cupti imports here")
def test_without_cupti_the_sweep_says_why_it_has_no_device_times() -> None:
    why = device_time_missing(TORCH_WITHOUT_GPU)
    assert why == "CUPTI could not be started: ModuleNotFoundError: No module named 'cupti'"
    rng = random.Random(19)
    timed = _draw(rng, "relu", 3, 1.0, 1.0)
    untimed = [r.model_copy(update={"port_device": None, "cutile_device": None}) for r in timed]
    assert f"Device time not measured: {why}." in markdown(_report(6, untimed, missing=why))
    table = markdown(_report(6, timed))
    assert "Device time: CUPTI, the summed durations of the kernels one op call launched" in table
    summary = summarise("relu", timed)
    assert f"| {summary.port_device_us_median} | {summary.cutile_device_us_median} |" in table
