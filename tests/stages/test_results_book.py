"""The results book (`tileport results-book`): built from copies of two recorded
H200 runs (fixtures/gpu_runs, kept apart from bench/results so that new runs
there do not move these figures) and from synthetic runs edited to miss the
targets; the figures are checked against values computed here straight from
the JSON."""

from __future__ import annotations

import json
import math
import random
import shutil
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.cli import main
from nodes.perf_validator.bootstrap import ratio_interval
from nodes.perf_validator.results_book import (
    BookInputError,
    book_markdown,
    book_svg,
    build_book,
    library_crates,
    write_book,
)
from schemas.results_book import ResultsBook

RESULTS = Path(__file__).parent / "fixtures" / "gpu_runs"
COMMITTED = ["h200-2026-11-29-softmax", "h200-2026-11-29-vector_add"]
SVG = "{http://www.w3.org/2000/svg}"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values))


def raw_ratios(folder: Path) -> list[float]:
    perf = read_json(folder / "gpu_run.json")["perf"]
    return [row["port"]["median_us"] / row["reference"]["median_us"] for row in perf]


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    """Copies of the recorded runs, so a test may edit them."""
    copies = []
    for name in COMMITTED:
        copy = tmp_path / "runs" / name
        shutil.copytree(RESULTS / name, copy)
        copies.append(copy)
    return copies


def slow_failing_run(source: Path, into: Path, *, keep_correctness: bool = True) -> Path:
    """`source` as another operator whose port is 10% slower on every configuration
    and whose first case failed (the C call refused)."""
    folder = into / "synthetic-slow"
    shutil.copytree(source, folder)
    run = read_json(folder / "gpu_run.json")
    run["operator"] = "slow_kernel"
    run["correctness_verdict"] = "FAIL"
    run["cases"][0]["port_status"] = -3
    for row in run["perf"]:
        row["port"]["median_us"] *= 1.10
    write_json(folder / "gpu_run.json", run)
    correctness = folder / "correctness.json"
    if keep_correctness:
        report = read_json(correctness)
        report["verdict"] = "FAIL"
        report["summary"] = "one case failed"
        report["cases"][0]["passed"] = False
        write_json(correctness, report)
    else:
        correctness.unlink()
    return folder


def target(book: ResultsBook, target_id: str) -> tuple[bool, list[str]]:
    found = next(t for t in book.targets if t.id == target_id)
    return found.passed, found.missing


# --- the committed runs ----------------------------------------------------------------


def test_aggregates_match_the_json(runs: list[Path]) -> None:
    book = build_book(runs, "h200")
    all_ratios = [ratio for folder in runs for ratio in raw_ratios(folder)]
    assert book.overall.kernels == 2
    assert book.overall.configurations_timed == len(all_ratios) == 5
    assert book.overall.geomean_ratio == pytest.approx(geomean(all_ratios), rel=1e-12)
    assert f"= {geomean(all_ratios):.4f} over 5 configurations" in book.overall.geomean_line
    for folder, kernel in zip(runs, book.kernels, strict=True):
        run = read_json(folder / "gpu_run.json")
        checked = read_json(folder / "correctness.json")["cases"]
        ratios = raw_ratios(folder)
        assert kernel.name == run["operator"]
        assert kernel.run == folder.name
        assert kernel.correctness_verdict == "ALL_PASS" and kernel.correct
        assert len(kernel.cases) == len(run["cases"])
        assert kernel.seeds == sorted({case["seed"] for case in run["cases"]})
        configs = {case["config_id"] for case in run["cases"]}
        assert kernel.configurations_checked == kernel.configurations_correct == len(configs)
        assert kernel.worst_max_abs_error == max(c["max_abs_error"] for c in checked)
        assert kernel.worst_max_rel_error == max(c["max_rel_error"] for c in checked)
        assert kernel.geomean_ratio == pytest.approx(geomean(ratios), rel=1e-12)
        assert (kernel.min_ratio, kernel.max_ratio) == (min(ratios), max(ratios))
        # The timing columns are the run's own, unchanged.
        for timing, row in zip(kernel.timings, run["perf"], strict=True):
            assert timing.port.model_dump(exclude_unset=True) == row["port"]
            assert timing.reference.model_dump(exclude_unset=True) == row["reference"]
            assert timing.torch is not None
            assert timing.torch.model_dump(exclude_unset=True) == row["torch"]
        assert [h.model_dump(exclude_unset=True) for h in kernel.host_overhead] == run[
            "host_overhead"
        ]
    assert book.overall.correct_fraction == 1.0


def test_the_a_a_control_is_the_noise_line(runs: list[Path]) -> None:
    """Runs without a control say so; with one (the reference timed again), the
    book reports control/reference per kernel and overall, with its spread."""
    assert build_book(runs, "h200").overall.control_geomean_ratio is None
    assert "No A/A control" in book_markdown(build_book(runs, "h200"))
    factors = [1.002, 0.997, 1.0, 1.004, 0.999]
    perf_rows = [(folder, index) for folder in runs for index in range(len(raw_ratios(folder)))]
    for (folder, index), factor in zip(perf_rows, factors, strict=True):
        run = read_json(folder / "gpu_run.json")
        row = run["perf"][index]
        row["control"] = dict(row["reference"], median_us=row["reference"]["median_us"] * factor)
        write_json(folder / "gpu_run.json", run)
    book = build_book(runs, "h200")
    assert book.overall.control_geomean_ratio == pytest.approx(geomean(factors), rel=1e-9)
    assert book.overall.control_spread == pytest.approx((0.997, 1.004), rel=1e-9)
    assert book.kernels[0].control_geomean_ratio == pytest.approx(
        geomean(factors[: len(book.kernels[0].timings)]), rel=1e-9
    )
    assert "A/A control (the reference timed twice" in book_markdown(book)


def test_the_book_says_how_many_modules_each_kernel_was_timed_from(runs: list[Path]) -> None:
    """Runs from before modules per side count one; a run whose port samples name their
    module is listed with its count."""
    assert f"{len(runs)} kernel(s) from 1 module(s) per side." in book_markdown(
        build_book(runs, "h200")
    )
    run = read_json(runs[0] / "gpu_run.json")
    for row in run["perf"]:
        port = row["port"]
        port.update(
            samples=3,
            samples_us=[port["min_us"], port["median_us"], port["median_us"]],
            sample_placements=[0, 1, 2],
            median_interval_us=None,
        )
    write_json(runs[0] / "gpu_run.json", run)
    book = build_book(runs, "h200")
    line = f"1 kernel(s) from 3 module(s) per side ({book.kernels[0].name})"
    assert line in book_markdown(book)


def test_machine_is_recorded_once(runs: list[Path]) -> None:
    book = build_book(runs, "h200")
    env = read_json(runs[0] / "gpu_run.json")["environment"]
    [machine] = book.machines
    assert (machine.gpu, machine.driver) == (env["gpu"], env["driver"])
    assert machine.compute_capability == env["compute_capability"]
    assert (machine.l2_bytes, machine.num_sms) == (env["l2_bytes"], env["num_sms"])
    assert machine.versions == env["versions"] and machine.clocks == env["clocks"]
    assert machine.kernels == ["softmax", "vector_add"]


def test_a_second_driver_is_a_second_machine(runs: list[Path]) -> None:
    path = runs[1] / "gpu_run.json"
    run = read_json(path)
    run["environment"]["driver"] = "999.1"
    run["environment"]["versions"]["torch"] = "0.0.1"
    write_json(path, run)
    book = build_book(runs, "h200")
    assert [(m.driver, m.kernels) for m in book.machines] == [
        ("580.159.04", ["softmax"]),
        ("999.1", ["vector_add"]),
    ]


def test_targets_on_the_committed_runs(runs: list[Path]) -> None:
    book = build_book(runs, "h200")
    assert target(book, "a") == (True, [])
    assert target(book, "b")[0] is True
    assert target(book, "c") == (True, [])
    assert target(book, "d") == (True, [])
    # Host overhead, from the JSON: the wrapper costs more per call than ct.launch.
    slower = [
        read_json(folder / "gpu_run.json")["operator"]
        for folder in runs
        if any(
            h["port_wrapper_us"] > h["reference_launch_us"]
            for h in read_json(folder / "gpu_run.json")["host_overhead"]
        )
    ]
    assert target(book, "e") == (not slower, slower)
    assert not book.all_targets_met


# --- targets that fail --------------------------------------------------------------------


def test_a_slow_failing_run_misses_the_targets(runs: list[Path], tmp_path: Path) -> None:
    synthetic = slow_failing_run(runs[0], tmp_path / "runs")
    book = build_book([*runs, synthetic], "mixed")
    slow = book.kernels[2]
    first_config = read_json(synthetic / "gpu_run.json")["cases"][0]["config_id"]
    assert slow.failed_configurations == [first_config]
    assert not slow.correct
    assert slow.geomean_ratio == pytest.approx(geomean(raw_ratios(synthetic)))
    assert slow.geomean_ratio is not None and slow.geomean_ratio > 1.05

    all_ratios = [ratio for folder in [*runs, synthetic] for ratio in raw_ratios(folder)]
    assert book.overall.geomean_ratio == pytest.approx(geomean(all_ratios))
    checked = book.overall.configurations_checked
    assert book.overall.configurations_correct == checked - 1
    assert book.overall.correct_fraction == pytest.approx((checked - 1) / checked)

    assert target(book, "a") == (False, ["slow_kernel"])
    passed, missing = target(book, "b")
    assert not passed and "slow_kernel" in missing
    assert target(book, "c") == (False, ["slow_kernel"])
    assert target(book, "d") == (False, ["slow_kernel"])


def test_without_correctness_json_a_fail_verdict_proves_no_case(
    runs: list[Path], tmp_path: Path
) -> None:
    synthetic = slow_failing_run(runs[0], tmp_path / "runs", keep_correctness=False)
    book = build_book([*runs, synthetic], "mixed")
    slow = book.kernels[2]
    assert slow.case_source == "gpu_run.json"
    assert slow.configurations_correct == 0 and slow.worst_max_abs_error is None
    assert slow.failed_configurations


def test_a_refused_call_fails_its_case_whatever_correctness_json_says(runs: list[Path]) -> None:
    path = runs[1] / "gpu_run.json"
    run = read_json(path)
    run["cases"][-1]["port_status"] = -2
    write_json(path, run)
    kernel = build_book(runs, "h200").kernels[1]
    assert kernel.failed_configurations == [run["cases"][-1]["config_id"]]


def test_sass_band_applies_only_to_named_kernels(runs: list[Path], tmp_path: Path) -> None:
    synthetic = slow_failing_run(runs[0], tmp_path / "runs")
    book = build_book([*runs, synthetic], "mixed", sass_identical={"softmax", "vector_add"})
    assert book.sass_identical_kernels == ["softmax", "vector_add"]
    assert target(book, "d") == (True, [])


def test_a_wrapper_no_slower_than_ct_launch_meets_e(runs: list[Path]) -> None:
    for folder in runs:
        path = folder / "gpu_run.json"
        run = read_json(path)
        for row in run["host_overhead"]:
            row["port_wrapper_us"] = row["reference_launch_us"]
        write_json(path, run)
    assert target(build_book(runs, "h200"), "e") == (True, [])


# --- the files ----------------------------------------------------------------------------


def test_svg_is_well_formed_with_one_bar_per_kernel(runs: list[Path], tmp_path: Path) -> None:
    synthetic = slow_failing_run(runs[0], tmp_path / "runs")
    book = build_book([*runs, synthetic], "mixed")
    root = ET.fromstring(book_svg(book))
    assert root.tag == f"{SVG}svg"
    bars = [rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "bar"]
    assert len(bars) == len(book.kernels) == 3
    lines = [line for line in root.iter(f"{SVG}line") if line.get("class") == "reference"]
    assert sum(1 for line in lines if line.get("stroke-dasharray")) == 2
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert {"softmax", "vector_add", "slow_kernel", "1.00", "0.95", "1.05"} <= set(texts)
    for kernel in book.kernels:
        assert f"{kernel.geomean_ratio:.4f}" in texts
    assert any("NVIDIA H200" in (text or "") for text in texts)


def test_markdown_has_one_row_per_kernel_and_the_targets(runs: list[Path]) -> None:
    book = build_book(runs, "h200")
    text = book_markdown(book)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for kernel in book.kernels:
        assert sum(1 for row in rows if row.startswith(f"| {kernel.name} |")) == 1
    assert "](h200.svg)" in text
    assert f"Overall: {book.overall.geomean_line}" in text
    assert "| (e) wrapper µs per call no worse than ct.launch's | FAIL | softmax, vector_add |" in (
        text
    )
    assert "28.2 vs 22.5" in text and "- / 3.5" in text


def test_write_book_round_trips(runs: list[Path], tmp_path: Path) -> None:
    book = build_book(runs, "h200")
    paths = write_book(book, tmp_path / "out")
    assert [path.name for path in paths] == ["h200.json", "h200.svg", "h200.md"]
    assert ResultsBook.model_validate_json(paths[0].read_text(encoding="utf-8")) == book
    assert paths[2].read_text(encoding="utf-8") == book_markdown(book)


def test_a_tampered_geomean_does_not_load(runs: list[Path]) -> None:
    data = build_book(runs, "h200").model_dump()
    data["overall"]["geomean_ratio"] = 0.5
    with pytest.raises(ValidationError, match="overall geomean"):
        ResultsBook.model_validate(data)


# --- bad input and the command line ---------------------------------------------------------


def test_bad_input_names_the_folder(runs: list[Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BookInputError, match=r"empty: no gpu_run\.json"):
        build_book([runs[0], empty], "h200")
    (empty / "gpu_run.json").write_text('{"operator": "x"}', encoding="utf-8")
    with pytest.raises(BookInputError, match="not a valid GpuRunReport"):
        build_book([empty], "h200")
    with pytest.raises(BookInputError, match="already given by"):
        build_book([runs[0], runs[0]], "h200")
    with pytest.raises(BookInputError, match="book name"):
        build_book(runs, "../h200")


def test_cli_writes_the_book(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "book"
    argv = ["results-book", *map(str, runs), "--name", "h200", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    for suffix in ("json", "svg", "md"):
        assert (out / f"h200.{suffix}").is_file()
        assert f"wrote {out / f'h200.{suffix}'}" in printed
    assert "overall: geomean port/baseline = " in printed


def test_cli_refuses_a_folder_without_gpu_run_json(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (runs[1] / "gpu_run.json").unlink()
    out = tmp_path / "book"
    argv = ["results-book", *map(str, runs), "--name", "h200", "--out", str(out)]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert str(runs[1]) in error and "no gpu_run.json" in error
    assert not out.exists()


# --- target (e) and stage F's host-side investigation --------------------------------------


def test_missing_e_shows_each_kernels_investigation(
    runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    book = build_book(runs, "h200")
    assert all(kernel.investigation is None for kernel in book.kernels)
    text = book_markdown(book)
    assert "### Target (e): host-side investigations" in text
    assert (
        "- softmax (wrapper vs ct.launch µs per call: 28.2 vs 22.5): not investigated "
        f"(`tileport investigate {runs[0].name} --write`)"
    ) in text
    assert "0/2 kernels missing it have a host-side investigation" in (
        next(t for t in book.targets if t.id == "e").detail
    )

    assert main(["investigate", str(runs[0]), "--write"]) == 0
    capsys.readouterr()
    book = build_book(runs, "h200")
    written = read_json(runs[0] / "investigation.json")
    softmax = book.kernels[0]
    assert softmax.investigation is not None
    assert softmax.investigation.model_dump(mode="json") == written
    assert [cause["category"] for cause in written["causes"]] == ["python wrapper"]
    text = book_markdown(book)
    assert (
        "- softmax (wrapper vs ct.launch µs per call: 28.2 vs 22.5): FIXABLE: python wrapper\n"
        in (text)
    )
    assert "- vector_add (wrapper vs ct.launch µs per call: 58.5 vs 20.2): not investigated" in text
    assert "Causes over the 2 kernels: python wrapper in 1." in text
    assert "1/2 kernels missing it have a host-side investigation" in (
        next(t for t in book.targets if t.id == "e").detail
    )
    assert ResultsBook.model_validate_json(book.model_dump_json()) == book


def test_missing_e_says_in_how_many_interleaved_rounds_the_wrapper_was_faster(
    runs: list[Path],
) -> None:
    path = runs[0] / "gpu_run.json"
    run = read_json(path)
    run["host_overhead"][0]["rounds_us"] = {
        "port_wrapper_us": [28.0, 29.0, 20.0],
        "reference_launch_us": [22.0, 22.5, 23.0],
    }
    write_json(path, run)
    detail = next(t for t in build_book(runs, "h200").targets if t.id == "e").detail
    assert detail.endswith("; the wrapper faster in softmax: 1/3 rounds")


def test_no_investigation_section_when_e_is_met(runs: list[Path]) -> None:
    for folder in runs:
        path = folder / "gpu_run.json"
        run = read_json(path)
        for row in run["host_overhead"]:
            row["port_wrapper_us"] = row["reference_launch_us"]
        write_json(path, run)
    assert "host-side investigations" not in book_markdown(build_book(runs, "h200"))


def test_a_stale_investigation_is_refused(
    runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["investigate", *map(str, runs), "--write"]) == 0
    capsys.readouterr()
    path = runs[1] / "gpu_run.json"
    run = read_json(path)
    run["host_overhead"][0]["port_wrapper_us"] += 5.0
    write_json(path, run)
    with pytest.raises(BookInputError, match=r"investigation\.json: does not match"):
        build_book(runs, "h200")
    (runs[1] / "investigation.json").write_text('{"verdict": "FIXABLE"}', encoding="utf-8")
    with pytest.raises(BookInputError, match="not a valid InvestigationReport"):
        build_book(runs, "h200")


def test_the_book_names_the_library_crates(runs: list[Path], tmp_path: Path) -> None:
    lock = tmp_path / "Cargo.lock"
    lock.write_text(
        'version = 4\n\n[[package]]\nname = "cutile"\nversion = "0.5.0"\n\n'
        '[[package]]\nname = "serde"\nversion = "1.0.0"\n\n'
        '[[package]]\nname = "cuda-core"\nversion = "0.5.0"\n'
    )
    assert library_crates(lock) == {"cutile": "0.5.0", "cuda-core": "0.5.0"}
    assert library_crates(tmp_path / "absent.lock") == {}
    book = build_book(runs, "h200")
    assert book.crates.get("cutile") == "0.5.0"  # the repository's own Cargo.lock
    assert "- kernel library crates: " in book_markdown(book)


def _column(samples: list[float], launches: float = 1.0) -> dict[str, Any]:
    return {
        "median_us": statistics.median(samples),
        "min_us": min(samples),
        "launches_per_call": launches,
        "samples": len(samples),
        "samples_us": samples,
    }


def test_intervals_and_a_configuration_outside_its_a_a_band(runs: list[Path]) -> None:
    """A run that kept its samples gets a geomean interval; its first configuration,
    port 0.95 of the reference against an A/A band near 1, is listed for stage F
    although its kernel's geomean is within every limit."""
    folder = runs[0]
    (folder / "investigation.json").unlink(missing_ok=True)  # made from other figures
    run = read_json(folder / "gpu_run.json")
    rng = random.Random(0)
    for index, row in enumerate(run["perf"]):
        centre = row["reference"]["median_us"]
        draw = [centre * rng.lognormvariate(0, 0.002) for _ in range(301)]
        port = [value * (0.95 if index == 0 else 1.0) for value in draw[:300]]
        reference, control = draw[1:], draw[::-1][:300]
        row["port"], row["reference"] = _column(port), _column(reference)
        row["control"] = _column(control)
        aa_band = ratio_interval(control, reference)
        row["aa_band"] = [aa_band.low, aa_band.high]
        row["rounds"] = 300
    write_json(folder / "gpu_run.json", run)
    book = build_book(runs, "h200")
    kernel = next(k for k in book.kernels if k.run == folder.name)
    first = run["perf"][0]["config_id"]
    assert kernel.stage_f_configurations == [first]
    assert kernel.geomean_interval is not None
    low, high = kernel.geomean_interval
    assert kernel.geomean_ratio is not None and low < kernel.geomean_ratio < high
    assert book.overall.geomean_interval is None  # the other run kept no samples
    markdown = book_markdown(book)
    assert "### Outside their A/A band (stage F)" in markdown
    assert f"- {kernel.name} / {first}: port/ref 0.95" in markdown
    untouched = next(k for k in book.kernels if k.run != folder.name)
    assert untouched.stage_f_configurations == [] and untouched.geomean_interval is None


def test_parity_needs_the_geomean_interval_inside_its_band(runs: list[Path]) -> None:
    """(f) holds when every run kept its samples and the overall geomean's interval lies
    inside 0.995-1.005; (b) then reads the interval's low end: a port 0.05 % slower,
    its interval above 1.00, is at parity and still misses (b)."""
    rng = random.Random(1)
    for folder in runs:
        (folder / "investigation.json").unlink(missing_ok=True)
        run = read_json(folder / "gpu_run.json")
        for row in run["perf"]:
            centre = row["reference"]["median_us"]
            reference = [centre * rng.lognormvariate(0, 0.002) for _ in range(300)]
            port = [value * 1.0005 for value in reference[::-1]]
            row["port"], row["reference"], row["control"] = (
                _column(port),
                _column(reference),
                _column(reference[::-1]),
            )
            row["aa_band"] = [0.99, 1.01]
            row["rounds"] = 300
        write_json(folder / "gpu_run.json", run)
    book = build_book(runs, "h200")
    interval = book.overall.geomean_interval
    assert interval is not None and 1.0 < interval[0] < interval[1] < 1.005
    assert target(book, "f") == (True, [])
    assert not target(book, "b")[0]
    skewed = runs[0]
    run = read_json(skewed / "gpu_run.json")
    for row in run["perf"]:
        row["port"] = _column([v * 1.05 for v in row["reference"]["samples_us"]])
    write_json(skewed / "gpu_run.json", run)
    assert not target(build_book(runs, "h200"), "f")[0]


def test_the_book_counts_configurations_pinned_to_the_sampling_target(runs: list[Path]) -> None:
    """A configuration counts when every compared figure's interval is within ±0.5 % of
    it; one wider column, or none kept, leaves it out; cap stops are counted apart."""
    assert "Precision: 0 of 5 configurations" in book_markdown(build_book(runs, "h200"))
    for folder in runs:
        run = read_json(folder / "gpu_run.json")
        for row in run["perf"]:
            for label in ("port", "reference"):
                median = row[label]["median_us"]
                row[label]["median_interval_us"] = [median * 0.996, median * 1.004]
        write_json(folder / "gpu_run.json", run)
    text = book_markdown(build_book(runs, "h200"))
    assert "Precision: 5 of 5 configurations" in text and "stopped 0 first" in text
    run = read_json(runs[0] / "gpu_run.json")
    median = run["perf"][0]["port"]["median_us"]
    run["perf"][0]["port"]["median_interval_us"] = [median * 0.99, median * 1.006]
    run["perf"][0]["cap_hit"] = True
    write_json(runs[0] / "gpu_run.json", run)
    text = book_markdown(build_book(runs, "h200"))
    assert "Precision: 4 of 5 configurations" in text and "stopped 1 first" in text
