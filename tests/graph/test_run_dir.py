"""The run directory's fixed layout, and re-running on a directory used before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_script import Step, path_of, run_script

from schemas.pipeline import Stage
from schemas.port_spec import operator_name
from schemas.reports import GateReport, PerfReport, ReportMissing, load_report
from schemas.run_layout import RUN_SUBDIRS, RunLayout, RunPathError


def test_run_creates_the_fixed_layout(tmp_path: Path) -> None:
    run_script(tmp_path)
    run = tmp_path / "run"
    assert sorted(p.name for p in run.iterdir()) == sorted(RUN_SUBDIRS)
    reports = sorted(p.name for p in (run / "reports").iterdir())
    assert reports == sorted(
        [
            "analysis.json",
            "correctness.json",
            "gate.json",
            "history",
            "host_build.json",
            "kernel_writer.json",
            "perf.json",
            "preflight.json",
            "summary.json",
        ]
    )


def test_rerun_after_a_pass_does_not_count_stale_reports(tmp_path: Path) -> None:
    first, _ = run_script(tmp_path)
    assert first.gate_verdict == "PASS"
    second, _ = run_script(tmp_path, {Stage.PREFLIGHT: [Step("BLOCKED")]})
    assert path_of(second) == ["preflight", "final_gate"]
    assert second.gate_verdict == "FAIL"
    layout = RunLayout(tmp_path / "run")
    with pytest.raises(ReportMissing):
        load_report(PerfReport, layout)
    assert not layout.kernel_rs.exists()
    summary = json.loads(layout.summary_path.read_text())
    assert [s["stage"] for s in summary["stages"]] == ["preflight", "final_gate"]


def test_rerun_after_a_failure_passes(tmp_path: Path) -> None:
    first, _ = run_script(tmp_path, {Stage.HOST_BUILDER: [Step("BLOCKED", "env")]})
    assert first.gate_verdict == "AWAITING_GPU"
    second, _ = run_script(tmp_path)
    assert second.gate_verdict == "PASS"
    gate = load_report(GateReport, RunLayout(tmp_path / "run"))
    assert not gate.failures()


def test_fresh_run_keeps_files_outside_the_stage_directories(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "generated").mkdir(parents=True)
    (run / "generated" / "leftover.rs").write_text("stale")
    (run / "reports").mkdir()
    (run / "reports" / "host_build.json").write_text('{"verdict": "ALL_PASS"}')
    (run / "notes.txt").write_text("mine")
    summary, _ = run_script(tmp_path, {Stage.ANALYZER: [Step("BLOCKED")]})
    assert summary.gate_verdict == "FAIL"
    assert not (run / "generated" / "leftover.rs").exists()
    assert not (run / "reports" / "host_build.json").exists()
    assert (run / "notes.txt").read_text() == "mine"


def test_each_execution_keeps_its_own_report_in_history(tmp_path: Path) -> None:
    run_script(tmp_path, {Stage.HOST_BUILDER: [Step("FAIL", "host"), Step("ALL_PASS")]})
    history = tmp_path / "run" / "reports" / "history"
    first = json.loads((history / "host_build.1.json").read_text())
    second = json.loads((history / "host_build.2.json").read_text())
    assert (first["verdict"], second["verdict"]) == ("FAIL", "ALL_PASS")
    latest = json.loads((tmp_path / "run" / "reports" / "host_build.json").read_text())
    assert latest == second


def test_layout_paths_stay_inside_the_run(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "run")
    assert layout.relative(layout.generated_ir("main")) == "generated/main.mlir"
    assert layout.resolve("host/ffi.rs") == tmp_path / "run" / "host" / "ffi.rs"
    for bad in ("../x", "/etc/passwd", "", "./x", "a\\b"):
        with pytest.raises(RunPathError):
            layout.resolve(bad)
    with pytest.raises(RunPathError):
        layout.relative(tmp_path / "elsewhere.txt")
    with pytest.raises(RunPathError):
        layout.reference_ir("../../escape")


def test_prepare_fresh_replaces_a_file_squatting_a_stage_directory(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "logs").write_text("not a directory")
    RunLayout(root).prepare_fresh()
    assert (root / "logs").is_dir()


@pytest.mark.parametrize(
    ("name", "operator"),
    [
        ("softmax.port.yaml", "softmax"),
        ("layer_norm.port.yml", "layer_norm"),
        ("rms.yaml", "rms"),
        ("swiglu", "swiglu"),
    ],
)
def test_operator_name_from_spec_file(name: str, operator: str) -> None:
    assert operator_name(Path("examples/kernels") / name) == operator
