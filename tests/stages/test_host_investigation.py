"""Stage F on the host side (`investigate_host_overhead`, `tileport investigate`):
from copies of two recorded H200 runs (fixtures/gpu_runs) whose host figures and
driver-call traces are edited here to exercise each rule. The edited numbers are
test inputs; the evidence is checked against figures computed here from the JSON."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from nodes.host_builder.binding import bind_operator, facts_beyond_kernel, launch_hints
from nodes.host_builder.launched_code import LaunchedCodeError, compile_as_launched, load_run_port
from nodes.host_builder.rust_entry import parse_kernel_source
from nodes.perf_investigator import (
    HostInputError,
    device_time_note,
    driver_call_name,
    driver_traces,
    investigate_folder,
    investigate_host_overhead,
)
from schemas.gpu import GpuRunReport
from schemas.port_spec import load_port_spec
from schemas.reports import CauseSide, InvestigationReport
from schemas.verdicts import InvestigationVerdict
from tileir.sass import compare_cubins
from toolchain.env import REPO_ROOT, find_toolchain, toolchain_env
from toolchain.jit_cubins import CUBINS_DIR, keep_compiles, kept_port_cubins, port_cubins
from toolchain.rust_export import RustExporter
from toolchain.tools import cuobjdump_sass

RESULTS = Path(__file__).parent / "fixtures" / "gpu_runs"
SOFTMAX = "h200-2026-11-29-softmax"
VECTOR_ADD = "h200-2026-11-29-vector_add"

REFERENCE_TRACE = (
    "driver calls of one warm ct.launch call: 4: cuStreamGetCtx, cuCtxGetDevice_v2, "
    "cuCtxGetCurrent, cuLaunchKernelEx"
)
THREE_POINTER_CHECKS = (
    "driver calls of one warm port call: 5: cuPointerGetAttributes, cuPointerGetAttributes, "
    "cuPointerGetAttributes, cuCtxGetCurrent, cuLaunchKernel"
)
LIST_PORT_TRACE = (
    "driver calls of one warm port call: 6: cuPointerGetAttributes, cuCtxGetCurrent, "
    "cuStreamIsCapturing, cuMemcpyHtoDAsync_v2, cuCtxGetCurrent, cuLaunchKernel"
)
LIST_REFUSED = (
    "port_graph_replay_us: RuntimeError: no capture mode worked: global: TileportLaunchError: "
    "LAUNCH (-9): cutile_softmax: `xs`: a list's table cannot be written while the stream is "
    "captured into a CUDA graph; relaxed: the same"
)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def copy_run(tmp_path: Path, name: str = SOFTMAX) -> Path:
    folder = tmp_path / "runs" / name
    shutil.copytree(RESULTS / name, folder)
    return folder


def edit_host(folder: Path, **fields: Any) -> dict[str, Any]:
    """Set fields of the run's first host_overhead row; returns that row."""
    path = folder / "gpu_run.json"
    run = read_json(path)
    run["host_overhead"][0].update(fields)
    write_json(path, run)
    row: dict[str, Any] = run["host_overhead"][0]
    return row


def load_run(folder: Path) -> GpuRunReport:
    return GpuRunReport.model_validate_json((folder / "gpu_run.json").read_text("utf-8"))


def causes(report: InvestigationReport) -> dict[str, str]:
    return {cause.category: cause.evidence for cause in report.causes}


def us(value: float) -> str:
    return f"{value:.2f} µs"


# --- the rules -----------------------------------------------------------------------


def test_the_recorded_run_names_the_python_wrapper(tmp_path: Path) -> None:
    """As recorded (no driver-call trace): wrapper 28.17 µs, bare cffi 13.00 µs,
    ct.launch 22.45 µs; the bare call beats ct.launch, so Python is the whole gap."""
    folder = copy_run(tmp_path)
    row = read_json(folder / "gpu_run.json")["host_overhead"][0]
    wrapper, cffi, launch = row["port_wrapper_us"], row["port_cffi_us"], row["reference_launch_us"]
    assert wrapper > launch > cffi
    report = investigate_host_overhead(load_run(folder))
    assert report.verdict is InvestigationVerdict.FIXABLE
    assert list(causes(report)) == ["python wrapper"]
    [cause] = report.causes
    assert cause.side is CauseSide.HOST and cause.fix
    assert f"{us(wrapper)}, the bare cffi call with prepared arguments {us(cffi)}" in (
        cause.evidence
    )
    assert f"{us(wrapper - cffi)} per call is Python" in cause.evidence
    assert f"more than the whole {us(wrapper - launch)}" in cause.evidence
    assert f"(+{us(wrapper - launch)}) on {row['config_id']}" in report.summary
    assert any("no driver-call trace" in note for note in report.notes)
    assert any("CUDA graph replay was not measured" in note for note in report.notes)
    assert "timed apart" not in cause.evidence  # the recorded run predates the parts
    edit_host(folder, port_key_us=9.5, port_c_call_us=11.25)
    [split] = investigate_host_overhead(load_run(folder)).causes
    assert split.evidence.endswith(
        "; timed apart, the repeated-call key takes 9.50 µs and the C function alone "
        f"11.25 µs (the bare cffi call's other {us(cffi - 11.25)} is torch's current-stream "
        "lookup)"
    )
    assert not any("interleaved rounds" in note for note in report.notes)
    rounds = {"port_wrapper_us": [30.0, 21.0, 29.0, 28.0], "reference_launch_us": [22.0] * 4}
    edit_host(folder, rounds_us=rounds)
    assert (
        f"{row['config_id']} ({row['calls']} calls): the wrapper's calls took less time than "
        "ct.launch's in 1 of 4 interleaved rounds"
    ) in investigate_host_overhead(load_run(folder)).notes


def test_three_extra_pointer_checks_and_a_launcher_residual(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    edit_host(
        folder,
        port_wrapper_us=16.40,
        port_cffi_us=13.25,
        reference_launch_us=11.00,
        notes=[THREE_POINTER_CHECKS, REFERENCE_TRACE],
    )
    report = investigate_host_overhead(load_run(folder))
    assert report.verdict is InvestigationVerdict.FIXABLE
    found = causes(report)
    assert list(found) == ["python wrapper", "launcher driver calls", "launcher residual"]
    assert "3.15 µs per call is Python" in found["python wrapper"]
    assert "58% of the wrapper's 5.40 µs over ct.launch's 11.00 µs" in found["python wrapper"]
    calls = found["launcher driver calls"]
    assert "one warm port call makes 5 driver calls, one ct.launch call 4" in calls
    # cuLaunchKernelEx is the same launch as cuLaunchKernel: only the checks are extra.
    assert "the port's extra: 3 × cuPointerGetAttributes;" in calls
    assert "ct.launch's own: 1 × cuStreamGetCtx, 1 × cuCtxGetDevice" in calls
    assert "bare cffi 13.25 µs vs ct.launch 11.00 µs" in calls
    fix = next(c.fix for c in report.causes if c.category == "launcher driver calls")
    assert "(3 per call)" in fix and "once per call" in fix
    residual = found["launcher residual"]
    assert "2.25 µs per call in the launcher" in residual
    assert "the 3 extra driver call(s) above are part of it" in residual
    assert "the launcher's Rust-side cost per call (descriptor checks" in residual
    assert "(+5.40 µs)" in report.summary
    assert "launcher driver calls 5 vs 4" in report.summary


def test_extra_driver_calls_are_no_cause_when_the_bare_call_keeps_up(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    edit_host(
        folder,
        port_wrapper_us=14.00,
        port_cffi_us=10.50,
        reference_launch_us=11.00,
        notes=[THREE_POINTER_CHECKS, REFERENCE_TRACE],
    )
    report = investigate_host_overhead(load_run(folder))
    assert list(causes(report)) == ["python wrapper"]
    assert any(
        "3 × cuPointerGetAttributes" in note and "not a cause of the gap here" in note
        for note in report.notes
    )


def test_a_doubled_context_read_is_named(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    port = (
        "driver calls of one warm port call: 5: cuPointerGetAttributes, cuPointerGetAttributes, "
        "cuCtxGetCurrent, cuCtxGetCurrent, cuLaunchKernel"
    )
    edit_host(
        folder,
        port_wrapper_us=13.63,
        port_cffi_us=12.41,
        reference_launch_us=11.04,
        notes=[port, REFERENCE_TRACE],
    )
    report = investigate_host_overhead(load_run(folder))
    calls = causes(report)["launcher driver calls"]
    assert "2 × cuPointerGetAttributes, 1 × cuCtxGetCurrent" in calls
    fix = next(c.fix for c in report.causes if c.category == "launcher driver calls")
    assert "reads the current context twice per call, ct.launch once" in fix


def test_a_list_table_written_each_call(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    edit_host(
        folder,
        port_wrapper_us=30.00,
        port_cffi_us=20.00,
        reference_launch_us=18.00,
        port_graph_replay_us=None,
        notes=[LIST_REFUSED, LIST_PORT_TRACE, REFERENCE_TRACE],
    )
    report = investigate_host_overhead(load_run(folder))
    found = causes(report)
    assert "list table" in found
    table = found["list table"]
    assert "(1 × cuMemcpyHtoDAsync, after cuStreamIsCapturing), which ct.launch does not" in table
    assert "graph capture is refused" in table
    graph = next(n for n in report.notes if "graph replay was not measured" in n)
    assert graph.endswith("while the stream is captured into a CUDA graph")


def test_a_wrapper_no_slower_than_ct_launch_is_aligned(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    edit_host(
        folder,
        port_wrapper_us=10.90,
        port_cffi_us=10.00,
        reference_launch_us=11.00,
        port_graph_replay_us=3.60,
        reference_graph_replay_us=3.50,
        notes=[THREE_POINTER_CHECKS, REFERENCE_TRACE],
    )
    report = investigate_host_overhead(load_run(folder))
    assert report.verdict is InvestigationVerdict.ALIGNED
    assert report.causes == []
    assert any("wrapper 10.90 µs vs ct.launch 11.00 µs" in note for note in report.notes)
    parity = next(note for note in report.notes if "graph replay" in note)
    assert "at parity (port 3.60 µs vs ct.launch's graph 3.50 µs per replay" in parity
    assert "recommended path for launch-bound use" in parity


def test_graph_replay_off_parity_is_only_a_note(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    edit_host(folder, port_graph_replay_us=5.00, reference_graph_replay_us=3.50)
    report = investigate_host_overhead(load_run(folder))
    note = next(note for note in report.notes if "graph replay" in note)
    assert "not at parity (port 5.00 µs vs ct.launch's graph 3.50 µs per replay, +43%)" in note
    assert all("graph" not in cause.category for cause in report.causes)


def test_nothing_measured_is_blocked(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    path = folder / "gpu_run.json"
    run = read_json(path)
    run["host_overhead"] = []
    write_json(path, run)
    report = investigate_host_overhead(load_run(folder))
    assert report.verdict is InvestigationVerdict.BLOCKED
    assert "not measured" in report.summary and not report.causes

    edit_path = copy_run(tmp_path / "other")
    edit_host(edit_path, reference_launch_us=None)
    assert investigate_host_overhead(load_run(edit_path)).verdict is InvestigationVerdict.BLOCKED


def test_a_gap_nothing_splits_is_blocked(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    edit_host(folder, port_cffi_us=None, notes=[])
    report = investigate_host_overhead(load_run(folder))
    assert report.verdict is InvestigationVerdict.BLOCKED
    assert "nothing splits the gap" in report.summary


def test_driver_call_names_compare_across_suffixes() -> None:
    assert driver_call_name("cuCtxGetDevice_v2") == "cuCtxGetDevice"
    assert driver_call_name("cuLaunchKernelEx") == "cuLaunchKernel"
    assert driver_call_name("cuMemcpyHtoDAsync_v2") == "cuMemcpyHtoDAsync"
    port, reference = driver_traces(["something else", THREE_POINTER_CHECKS])
    assert reference is None and port is not None
    assert port.total == 5 and port.calls["cuPointerGetAttributes"] == 3


# --- the report's identity ---------------------------------------------------------------


def test_run_id_and_attempt_come_from_perf_json(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    perf = read_json(folder / "perf.json")
    report = investigate_folder(folder)
    assert (report.run_id, report.attempt) == (perf["run_id"], perf["attempt"])
    (folder / "perf.json").unlink()
    assert investigate_folder(folder).run_id == "softmax"


# --- the command line --------------------------------------------------------------------


def test_cli_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = [copy_run(tmp_path, SOFTMAX), copy_run(tmp_path, VECTOR_ADD)]
    assert main(["investigate", *map(str, folders)]) == 0
    printed = capsys.readouterr().out
    assert f"{folders[0]}: FIXABLE: " in printed and f"{folders[1]}: FIXABLE: " in printed
    assert "  - host python wrapper: " in printed and "    fix: " in printed
    assert not any((folder / "investigation.json").exists() for folder in folders)

    assert main(["investigate", *map(str, folders), "--write"]) == 0
    printed = capsys.readouterr().out
    for folder in folders:
        path = folder / "investigation.json"
        assert f"wrote {path}" in printed
        written = InvestigationReport.model_validate_json(path.read_text("utf-8"))
        assert written == investigate_folder(folder)
        row = read_json(folder / "gpu_run.json")["host_overhead"][0]
        assert us(row["port_wrapper_us"] - row["port_cffi_us"]) in written.causes[0].evidence


def test_cli_refuses_a_folder_without_a_valid_gpu_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = copy_run(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["investigate", str(good), str(empty), "--write"]) == 2
    assert f"{empty}: no gpu_run.json" in capsys.readouterr().err
    assert not (good / "investigation.json").exists()

    (empty / "gpu_run.json").write_text('{"operator": "x"}', encoding="utf-8")
    assert main(["investigate", str(empty)]) == 2
    assert "not a valid GpuRunReport" in capsys.readouterr().err
    with pytest.raises(HostInputError, match="not a valid GpuRunReport"):
        investigate_folder(empty)


def test_device_time_is_placed_against_the_band_of_identical_code(tmp_path: Path) -> None:
    folder = copy_run(tmp_path)
    run = load_run(folder)
    ratios = [row.ratio for row in run.perf]
    note = device_time_note(run)
    assert f"over {len(ratios)} configuration(s)" in note
    assert "every ratio inside the 0.99-1.01 band" in note
    assert "A/A control" not in note  # the recorded run predates the control
    data = read_json(folder / "gpu_run.json")
    data["perf"][0]["port"]["median_us"] = data["perf"][0]["reference"]["median_us"] * 1.02
    data["perf"][0]["control"] = dict(
        data["perf"][0]["reference"], median_us=data["perf"][0]["reference"]["median_us"] * 0.998
    )
    write_json(folder / "gpu_run.json", data)
    note = device_time_note(load_run(folder))
    assert "a ratio outside the 0.99-1.01 band" in note
    assert "A/A control (reference/reference) 0.9980 (0.9980 to 0.9980)" in note
    assert note in investigate_host_overhead(load_run(folder)).notes


# --- the device side: which code the reference ran -----------------------------------------

PROVEN = "_softmax_kernel_Kt1_A2f32_1v4l0_2t1_3i16_p16_I1024"


def _outside_band_run(tmp_path: Path, launched: list[str]) -> Path:
    """The softmax run with its first configuration 5 % off and outside its A/A band, its
    reference launched under `launched` (CUPTI's kernel names)."""
    folder = copy_run(tmp_path)
    run = read_json(folder / "gpu_run.json")
    first = run["perf"][0]
    first["port"]["median_us"] = first["reference"]["median_us"] * 1.05
    first["port"]["min_us"] = min(first["port"]["min_us"], first["port"]["median_us"])
    first["port"]["samples_us"] = []
    first["ratio_interval"] = [1.04, 1.06]
    first["aa_band"] = [0.99, 1.01]
    first["reference"]["kernels"] = launched
    write_json(folder / "gpu_run.json", run)
    return folder


def _exports(tmp_path: Path, config_id: str, symbol: str) -> Path:
    runs = tmp_path / "conversions"
    reference = runs / "softmax" / "generated" / "reference"
    reference.mkdir(parents=True)
    (reference / f"v0__{config_id}.mlir").write_text(
        f"cuda_tile.module @kernels {{\n  entry @{symbol}(%a: !cuda_tile.tile<ptr<f32>>) {{\n",
        encoding="utf-8",
    )
    (reference / f"v0__{config_id}.loc.mlir").write_text("entry @elsewhere(", encoding="utf-8")
    return runs


def test_a_reference_run_as_another_specialisation_is_a_device_cause(tmp_path: Path) -> None:
    launched = PROVEN.replace("1v4l0", "1v8l0")
    folder = _outside_band_run(tmp_path, [launched])
    config = read_json(folder / "gpu_run.json")["perf"][0]["config_id"]
    report = investigate_folder(folder, _exports(tmp_path, config, PROVEN))
    (cause,) = [c for c in report.causes if c.side is CauseSide.DEVICE]
    assert cause.category == "reference specialisation"
    assert config in cause.evidence and "`1v8l0` where the export has `1v4l0`" in cause.evidence
    assert investigate_folder(folder).causes == report.causes[:-1]  # without --runs: none


def test_a_reference_run_as_proven_clears_the_reference(tmp_path: Path) -> None:
    folder = _outside_band_run(tmp_path, [PROVEN])
    config = read_json(folder / "gpu_run.json")["perf"][0]["config_id"]
    report = investigate_folder(folder, _exports(tmp_path, config, PROVEN))
    assert not [c for c in report.causes if c.side is CauseSide.DEVICE]
    assert any(
        f"{config} (port/ref 1.0500): the cuTile Python kernel ran as the export" in n
        for n in report.notes
    )
    unnamed = _outside_band_run(tmp_path / "again", [])
    notes = investigate_folder(unnamed, tmp_path / "conversions").notes
    assert any("kept no kernel names" in n for n in notes)


# --- the device side: how the kernels were launched ----------------------------------------

LAUNCH = {"grid_x": 512, "block_x": 128, "registers_per_thread": 32, "shared_memory_executed": 0}


def _launched(tmp_path: Path, port: dict[str, int], reference: dict[str, int]) -> Path:
    folder = _outside_band_run(tmp_path, [PROVEN])
    run = read_json(folder / "gpu_run.json")
    run["perf"][0]["port"]["launch"] = [port]
    run["perf"][0]["reference"]["launch"] = [reference]
    write_json(folder / "gpu_run.json", run)
    return folder


def test_a_launch_attribute_that_differs_is_a_device_cause(tmp_path: Path) -> None:
    carved = {**LAUNCH, "shared_memory_executed": 233472}
    folder = _launched(tmp_path, carved, LAUNCH)
    config = read_json(folder / "gpu_run.json")["perf"][0]["config_id"]
    (cause,) = [c for c in investigate_folder(folder).causes if c.side is CauseSide.DEVICE]
    assert cause.category == "launch attributes"
    assert cause.evidence == (
        f"{config} (port/ref 1.0500): shared_memory_executed 233472 against the reference's 0"
    )


def test_the_same_launch_attributes_clear_the_launch(tmp_path: Path) -> None:
    folder = _launched(tmp_path, LAUNCH, dict(LAUNCH))
    report = investigate_folder(folder)
    assert not [c for c in report.causes if c.side is CauseSide.DEVICE]
    assert any("were launched as the reference's" in note for note in report.notes)
    unrecorded = _outside_band_run(tmp_path / "again", [PROVEN])
    assert any("no launch attributes" in n for n in investigate_folder(unrecorded).notes)


# --- the device side: where the code sits ---------------------------------------------------


def _relocated(
    tmp_path: Path,
    reference: tuple[float, list[float]] | None,
    port: tuple[float, list[float]] | None,
) -> Path:
    """The 5 %-off run (port/ref interval 1.04-1.06) with its placement controls: the
    reference's code in a second module and the port's, each at (ratio to the
    reference, interval)."""
    folder = _outside_band_run(tmp_path, [PROVEN])
    run = read_json(folder / "gpu_run.json")
    first = run["perf"][0]
    base = first["reference"]
    for label, found in (("relocated", reference), ("port_relocated", port)):
        if found is None:
            continue
        ratio, interval = found
        first[label] = dict(base, median_us=base["median_us"] * ratio, samples_us=[])
        first[label]["min_us"] = min(base["min_us"], first[label]["median_us"])
        first[f"{label}_interval"] = interval
    write_json(folder / "gpu_run.json", run)
    return folder


def _placement_cause(folder: Path) -> str:
    (cause,) = [c for c in investigate_folder(folder).causes if c.side is CauseSide.DEVICE]
    assert cause.category == "module placement"
    return cause.evidence


def test_the_reference_moved_out_of_the_band_names_module_placement(tmp_path: Path) -> None:
    folder = _relocated(tmp_path, (1.04, [1.035, 1.045]), None)
    config = read_json(folder / "gpu_run.json")["perf"][0]["config_id"]
    evidence = _placement_cause(folder)
    assert evidence.startswith(
        f"{config} (port/ref 1.0500): the reference's code in a second module gives "
        "relocated/ref 1.0400 (1.0350 to 1.0450) (outside the A/A band), the A/A band "
        "(0.9900 to 1.0100)"
    )


def test_the_port_apart_from_its_own_copy_names_module_placement(tmp_path: Path) -> None:
    """The port's code in a second module at parity while the port is 5 % off: the gap
    follows the port's module, whatever the reference's copy does."""
    evidence = _placement_cause(
        _relocated(tmp_path, (1.0, [0.995, 1.005]), (1.001, [0.996, 1.006]))
    )
    assert "relocated/ref 1.0000 (0.9950 to 1.0050); the port's code in a second module" in (
        evidence
    )
    assert "port_relocated/ref 1.0010 (0.9960 to 1.0060) (apart from the port)" in evidence


def test_copies_that_move_nothing_clear_placement(tmp_path: Path) -> None:
    """A reference copy whose interval reaches the band, a port copy whose interval meets
    the port's: nothing this protocol resolves moved; a run before the placement
    controls says it could not check."""
    folder = _relocated(tmp_path, (1.012, [1.005, 1.02]), (1.045, [1.03, 1.041]))
    report = investigate_folder(folder)
    assert not [c for c in report.causes if c.side is CauseSide.DEVICE]
    assert any(n.endswith("moving the code does not move the time") for n in report.notes)
    before = _outside_band_run(tmp_path / "again", [PROVEN])
    assert any("no placement control" in n for n in investigate_folder(before).notes)


def _across_modules(tmp_path: Path, reference_code: list[float], port_code: list[float]) -> Path:
    """The 5 %-off run timed across modules: per module, the reference's code (its
    modules, then the control's) and the port's, each module's samples around its own
    ratio to the reference's median (tight: 9 samples within ±0.1 %)."""
    folder = _outside_band_run(tmp_path, [PROVEN])
    run = read_json(folder / "gpu_run.json")
    first = run["perf"][0]
    base = first["reference"]["median_us"]

    def column(ratios: list[float]) -> dict[str, object]:
        samples = [base * r * (1 + k / 10_000) for r in ratios for k in range(-4, 5)]
        placements = [module for module in range(len(ratios)) for _ in range(9)]
        return dict(
            first["reference"],
            median_us=statistics.median(samples),
            min_us=min(samples),
            samples=len(samples),
            samples_us=samples,
            sample_placements=placements,
            median_interval_us=None,
        )

    half = len(reference_code) // 2
    first["reference"] = column(reference_code[:half])
    first["control"] = column(reference_code[half:])
    first["port"] = column(port_code)
    first["ratio_interval"] = [1.04, 1.06]
    first["aa_band"] = [0.99, 1.01]
    write_json(folder / "gpu_run.json", run)
    return folder


def test_the_same_code_spread_over_modules_names_module_placement(tmp_path: Path) -> None:
    """Timed across modules: the reference's own code runs from 0.96 to 1.08 of itself
    module by module, each module tight, so a port 5 % off lies within what moving the
    code does."""
    folder = _across_modules(tmp_path, [0.96, 1.0, 1.04, 1.08], [1.0, 1.1])
    evidence = _placement_cause(folder)
    assert "the reference's code from 4 modules runs at" in evidence
    assert "the port's from 2 at" in evidence and "(within its modules' noise)" not in evidence


def test_modules_within_their_noise_or_short_of_the_gap_clear_placement(tmp_path: Path) -> None:
    """The same code's modules spanning only 0.99-1.01 do not reach a port 5 % off; the
    modules of a run with one noisy module each are no evidence either."""
    narrow = _across_modules(tmp_path, [0.99, 1.0, 1.0, 1.01], [1.05, 1.05])
    report = investigate_folder(narrow)
    assert not [c for c in report.causes if c.side is CauseSide.DEVICE]
    assert any(n.endswith("does not account for the gap") for n in report.notes)
    noisy = _across_modules(tmp_path / "noisy", [0.9, 1.1], [1.05, 1.05])
    run = read_json(noisy / "gpu_run.json")
    for side in ("reference", "control"):  # one module per side, its samples far apart
        column = run["perf"][0][side]
        column["samples_us"] = sorted(column["samples_us"])
        spread = [v * (0.8 + 0.05 * k) for k, v in enumerate(column["samples_us"])]
        column.update(
            samples_us=spread,
            median_us=statistics.median(spread),
            min_us=min(spread),
        )
    write_json(noisy / "gpu_run.json", run)
    notes = investigate_folder(noisy).notes
    assert any("(within its modules' noise)" in n for n in notes)


def _traced(folder: Path, port: str, reference: str) -> Path:
    edit_host(
        folder,
        notes=[
            f"driver calls of one warm port call: {len(port.split(', '))}: {port}",
            f"driver calls of one warm ct.launch call: {len(reference.split(', '))}: {reference}",
        ],
    )
    return folder


def test_a_list_copied_in_the_reference_call_alone_is_a_device_cause(tmp_path: Path) -> None:
    """ct.launch copies its list in the timed call (after the flush, before its kernel);
    the port's warm call copies nothing: a slower port reads its table cold."""
    copying = "cuStreamIsCapturing, cuMemcpyHtoDAsync_v2, cuLaunchKernelEx"
    folder = _traced(
        _outside_band_run(tmp_path, [PROVEN]), "cuStreamIsCapturing, cuLaunchKernel", copying
    )
    config = read_json(folder / "gpu_run.json")["perf"][0]["config_id"]
    found = [c for c in investigate_folder(folder).causes if c.side is CauseSide.DEVICE]
    listed = [c for c in found if c.category == "list written in the reference's call"]
    assert len(listed) == 1
    assert listed[0].evidence.startswith(
        f"{config} (port/ref 1.0500): one warm ct.launch call copies its list to the device "
        "(cuMemcpyHtoDAsync, before its kernel"
    )
    both = _traced(
        _outside_band_run(tmp_path / "both", [PROVEN]),
        "cuMemcpyHtoDAsync_v2, cuLaunchKernel",
        copying,
    )
    assert not [
        c
        for c in investigate_folder(both).causes
        if c.category == "list written in the reference's call"
    ]


# --- the device side: the cubins both JITs compiled on the GPU host -----------------------

CUBINS = REPO_ROOT / (
    "tests/service/fixtures/h200_completion/service/artifacts/runs/"
    "38479f136dcc4cf691b49ed10af185f0/generated/generated"
)
REFERENCE_SYMBOL = "softmax_kernel_Kt1_A2f32_1v4l0_2t1_p16_A2f32_1v4l0_2t1_p16_I1024"


def _kept(tmp_path: Path, port_cubin: Path) -> Path:
    """An outside-band run that kept the ragged f32 softmax reference in cuTile Python's
    own cache format and `port_cubin` as the port's compile."""
    from cutile_cache._cache import cache_store

    folder = _outside_band_run(tmp_path, [REFERENCE_SYMBOL])
    run = read_json(folder / "gpu_run.json")
    run["perf"][0]["port"]["kernels"] = ["softmax_kernel_entry"]
    write_json(folder / "gpu_run.json", run)
    kept = folder / CUBINS_DIR
    (kept / "port").mkdir(parents=True)
    (kept / "reference").mkdir()
    blob = (CUBINS / "row__ragged_f32" / "reference.sm_90.cubin").read_bytes()
    cache_store(str(kept / "reference"), "k" * 64, blob, {"kernel_names": [REFERENCE_SYMBOL]})
    shutil.copyfile(port_cubin, kept / "port" / "0b6f.cubin")
    return folder


def test_the_same_machine_code_on_the_gpu_host_clears_the_compile(tmp_path: Path) -> None:
    folder = _kept(tmp_path, CUBINS / "row__ragged_f32" / "generated.sm_90.cubin")
    report = investigate_folder(folder)
    assert not [c for c in report.causes if c.side is CauseSide.DEVICE]
    assert any(
        "cubins both JITs compiled on the GPU host have identical SASS" in n
        and "beyond it, the kernel's code is byte-identical" in n
        for n in report.notes
    )


def test_other_machine_code_on_the_gpu_host_is_a_device_cause(tmp_path: Path) -> None:
    folder = _kept(tmp_path, CUBINS / "row__pow2_f16" / "generated.sm_90.cubin")
    (cause,) = [c for c in investigate_folder(folder).causes if c.side is CauseSide.DEVICE]
    assert cause.category == "runtime cubins" and "SASS line(s)" in cause.evidence
    unkept = _kept(tmp_path / "again", CUBINS / "row__pow2_f16" / "generated.sm_90.cubin")
    (unkept / CUBINS_DIR / "port" / "0b6f.cubin").unlink()
    notes = investigate_folder(unkept).notes
    assert any("kept no cubin of the port's kernel" in n for n in notes)


def test_a_recorded_compile_keeps_the_cubin_tileiras_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUTILE_TILEIRAS_PATH", str(find_toolchain().tool("tileiras")))
    monkeypatch.delenv("CUDA_TILE_CACHE_DIR", raising=False)
    folder = keep_compiles(tmp_path)
    recorder = os.environ["CUTILE_TILEIRAS_PATH"]
    assert os.environ["CUDA_TILE_CACHE_DIR"] == str(folder / "reference")
    bytecode = CUBINS / "row__ragged_f32.sm_90.bytecode"
    out = tmp_path / "scratch" / "3f.cubin"
    out.parent.mkdir()
    # as cutile-rs runs it (cutile-compiler's run_tileiras)
    command = [recorder, "--gpu-name", "sm_90", "--opt-level", "3", "-o", str(out), str(bytecode)]
    subprocess.run(command, check=True, env=toolchain_env())
    (kept,) = kept_port_cubins(tmp_path)
    assert kept.read_bytes() == out.read_bytes()
    assert [p.name for p in (folder / "port").glob("*.bc")] == []  # cutile-rs names it .bc
    named = tmp_path / "scratch" / "3f.bc"
    shutil.copyfile(bytecode, named)
    subprocess.run([*command[:-1], str(named)], check=True, env=toolchain_env())
    assert (folder / "port" / "3f.bc").read_bytes() == bytecode.read_bytes()
    assert port_cubins({kept: cuobjdump_sass(kept)}) == {"softmax_kernel_entry": [kept]}
    failing = [recorder, "--gpu-name", "sm_90", "-o", str(tmp_path / "x.cubin"), "missing.bc"]
    assert subprocess.run(failing, env=toolchain_env(), capture_output=True).returncode != 0


# --- the device side: the launcher's own specialisation ------------------------------------

SOFTMAX_RUN = CUBINS.parent.parent  # a service run directory of the softmax corpus port


def test_the_launcher_assumes_what_each_argument_divides_by() -> None:
    spec = load_port_spec(SOFTMAX_RUN / "input" / "softmax.port.yaml")
    binding = bind_operator(
        spec,
        SOFTMAX_RUN / "input" / "softmax.port.yaml",
        parse_kernel_source(SOFTMAX_RUN / "generated" / "kernel.rs"),
        "kernel",
    )
    configs = {c.name: spec.resolve(c, p) for c, p in spec.all_configs()}
    ragged = configs["ragged_f32"]  # M 37, N 1000: rows of 1000 f32 divide by 8
    assert launch_hints(binding.variant_for(ragged), ragged) == {
        "x": 16,
        "x_shape_1": 8,
        "x_stride_0": 8,
        "y": 16,
        "y_shape_1": 8,
        "y_stride_0": 8,
    }
    odd = configs["ragged_f16"]  # M 129, N 781: nothing but the fresh allocations
    assert launch_hints(binding.variant_for(odd), odd) == {"x": 16, "y": 16}
    # What the kernel states of them: the reference's facts (none on a 1000-wide row).
    assert facts_beyond_kernel(binding, ragged) == {
        "x_shape_1": (8, 1),
        "x_stride_0": (8, 4),
        "y_shape_1": (8, 1),
        "y_stride_0": (8, 4),
    }
    assert facts_beyond_kernel(binding, odd) == {}


def test_a_port_compiled_as_launched_is_not_the_proven_one_on_ragged_rows(
    tmp_path: Path,
) -> None:
    port = load_run_port(SOFTMAX_RUN)
    proven = CUBINS / "row__ragged_f32" / "reference.sm_90.cubin"
    with RustExporter() as exporter:
        ragged = compile_as_launched(
            port, port.configuration("ragged_f32"), "sm_90", tmp_path, exporter
        )
        square = compile_as_launched(
            port, port.configuration("pow2_f16"), "sm_90", tmp_path, exporter
        )
    assert ragged.hints["x_shape_1"] == 8
    assert not compare_cubins(proven, ragged.cubin, "sm_90").identical
    pow2 = CUBINS / "row__pow2_f16" / "reference.sm_90.cubin"
    assert compare_cubins(pow2, square.cubin, "sm_90").identical  # nothing beyond its facts
    with pytest.raises(LaunchedCodeError, match="no configuration 'nope'"):
        port.configuration("nope")


def test_a_kept_cubin_the_launcher_compiled_names_its_specialisation(tmp_path: Path) -> None:
    port = load_run_port(SOFTMAX_RUN)
    with RustExporter() as exporter:
        launched = compile_as_launched(
            port, port.configuration("ragged_f32"), "sm_90", tmp_path / "rebuilt", exporter
        )
    folder = _kept(tmp_path, launched.cubin)
    run = read_json(folder / "gpu_run.json")
    run["perf"][0]["config_id"] = "ragged_f32"
    write_json(folder / "gpu_run.json", run)
    runs = tmp_path / "conversions"
    shutil.copytree(SOFTMAX_RUN, runs / "softmax")
    report = investigate_folder(folder, runs)
    (cause,) = [c for c in report.causes if c.category == "launcher specialisation"]
    assert cause.evidence.startswith("ragged_f32 (port/ref 1.0500): cutile-rs's launcher")
    assert "x_shape_1 8" in cause.evidence and "G17" in cause.fix
    # Without the conversion's run directory the gap is still named, less precisely.
    (plain,) = [c for c in investigate_folder(folder).causes if c.side is CauseSide.DEVICE]
    assert plain.category == "runtime cubins"


@pytest.mark.slow
def test_the_launched_code_table_counts_ragged_rows(tmp_path: Path) -> None:
    table = tmp_path / "launched.tsv"
    command = [sys.executable, str(REPO_ROOT / "bench" / "launched_code.py")]
    done = subprocess.run(
        [*command, str(SOFTMAX_RUN), "--out", str(table)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        check=True,
    )
    rows = {r.split("\t")[1]: r.split("\t") for r in table.read_text().splitlines()[1:]}
    assert rows["ragged_f32"][3] == "other" and "x_shape_1 8>1" in rows["ragged_f32"][2]
    assert rows["ragged_f16"][2:4] == ["", "proven"]  # nothing beyond its facts
    assert "configurations (1 of 1 kernels) run other code than proven" in done.stdout
