"""The final gate checks what the reports say, not only that they exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_script import Step, correctness_report, final_state, perf_report, run_script
from pydantic import ValidationError

from nodes.final_gate import run_final_gate
from schemas.kernel_writer import REPORT_FILE as PORT_REPORT_FILE
from schemas.kernel_writer import REQUIRED_TARGETS, ConfigCheck, PortReport, TargetCheck
from schemas.pipeline import Outcome, Stage
from schemas.reports import (
    GateCheck,
    GateReport,
    HostBuildReport,
    PerfReport,
    load_report,
    save_report,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState
from schemas.verdicts import CorrectnessVerdict, GateVerdict, PerfVerdict


def _gate(state: PipelineState) -> GateReport:
    report = run_final_gate(state).report
    assert isinstance(report, GateReport)
    return report


def _failed(report: GateReport) -> dict[str, str]:
    return {check.name: check.detail for check in report.failures()}


def test_everything_right_passes(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    report = _gate(state)
    assert report.verdict is GateVerdict.PASS, _failed(report)
    assert report.headline["perf_verdict"] == "DONE"
    assert report.headline["correctness"] == "ALL_PASS"
    names = {check.name for check in report.checks}
    assert {"correctness ALL_PASS on a GPU", "performance DONE", "run completed"} <= names


def test_gate_report_and_summary_are_written(tmp_path: Path) -> None:
    summary, _ = run_script(tmp_path)
    layout_reports = tmp_path / "run" / "reports"
    gate = GateReport.model_validate_json((layout_reports / "gate.json").read_text())
    assert gate.verdict is GateVerdict.PASS
    written = json.loads((layout_reports / "summary.json").read_text())
    assert written["gate_verdict"] == summary.gate_verdict == "PASS"
    assert written["headline"]["geomean_line"].startswith("geomean port/baseline = 1.0000")


@pytest.mark.parametrize(
    "file_name", ["preflight.json", "analysis.json", "host_build.json", "correctness.json"]
)
def test_missing_report_fails(tmp_path: Path, file_name: str) -> None:
    state = final_state(tmp_path)
    (state.layout().reports_dir / file_name).unlink()
    failed = _failed(_gate(state))
    assert failed[f"report {file_name}"].endswith("missing")


def test_missing_perf_report_fails_performance(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    (state.layout().reports_dir / "perf.json").unlink()
    failed = _failed(_gate(state))
    assert "report perf.json" in failed
    assert failed["performance DONE"] == "no valid perf report"


def test_unparseable_report_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    (state.layout().reports_dir / "kernel_writer.json").write_text("{not json")
    failed = _failed(_gate(state))
    assert "Invalid JSON" in failed["report kernel_writer.json"]
    assert failed["kernel_writer COMPILED"] == "no valid report"


def test_report_with_unknown_verdict_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    path = state.layout().reports_dir / "correctness.json"
    data = json.loads(path.read_text())
    data["verdict"] = "MOSTLY_PASS"
    path.write_text(json.dumps(data))
    failed = _failed(_gate(state))
    assert "verdict" in failed["report correctness.json"]
    assert "correctness ALL_PASS on a GPU" in failed


def test_report_whose_numbers_contradict_its_verdict_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    path = state.layout().reports_dir / "perf.json"
    data = json.loads(path.read_text())
    for row in data["rows"]:
        row["port_us"] = row["baseline_us"] * 1.3
    path.write_text(json.dumps(data))
    failed = _failed(_gate(state))
    assert "does not match the rows" in failed["report perf.json"]


def test_report_from_another_run_does_not_count(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    stale = state.model_copy(update={"run_id": "an-earlier-run"})
    save_report(perf_report(stale, PerfVerdict.DONE, 1.0), state.layout())
    failed = _failed(_gate(state))
    assert "belongs to run an-earlier-run" in failed["report perf.json"]


def test_report_from_an_earlier_attempt_does_not_count(tmp_path: Path) -> None:
    script = {Stage.HOST_BUILDER: [Step("FAIL", "host"), Step("ALL_PASS")]}
    state = final_state(tmp_path, script)
    earlier = state.model_copy(update={"attempts": {**state.attempts, Stage.HOST_BUILDER: 0}})
    save_report(correctness_report(earlier, CorrectnessVerdict.ALL_PASS), state.layout())
    failed = _failed(_gate(state))
    assert "attempt 1, the latest is 2" in failed["report correctness.json"]


def test_disk_verdict_that_disagrees_with_the_run_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    lying = state.model_copy(update={"verdicts": {**state.verdicts, Stage.PERF_VALIDATOR: "X"}})
    failed = _failed(_gate(lying))
    assert "the run recorded X" in failed["report perf.json"]


def test_missing_artifact_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    state.layout().kernel_rs.unlink()
    failed = _failed(_gate(state))
    assert "generated/kernel.rs" in failed["report kernel_writer.json"]


@pytest.mark.parametrize("verdict", [CorrectnessVerdict.FAIL, CorrectnessVerdict.BLOCKED])
def test_failing_correctness_with_perf_done_fails_through_the_graph(
    tmp_path: Path, verdict: CorrectnessVerdict
) -> None:
    # A host builder that (wrongly) says ALL_PASS next to a failing correctness run.
    script = {Stage.HOST_BUILDER: [Step("ALL_PASS", correctness=verdict.value)]}
    summary, _ = run_script(tmp_path, script)
    assert [r.verdict for r in summary.stages if r.stage is Stage.PERF_VALIDATOR] == ["DONE"]
    assert summary.gate_verdict == "FAIL"
    gate = load_report(GateReport, RunLayout(tmp_path / "run"))
    failed = _failed(gate)
    assert failed["performance DONE"] == "correctness did not pass first (its DONE is not counted)"
    assert failed["correctness ALL_PASS on a GPU"].startswith(verdict.value)


def test_correctness_replaced_by_a_failure_after_the_run_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    save_report(correctness_report(state_at_d(state), CorrectnessVerdict.FAIL), state.layout())
    failed = _failed(_gate(state))
    assert "correctness ALL_PASS on a GPU" in failed
    assert "not counted" in failed["performance DONE"]


def state_at_d(state: PipelineState) -> PipelineState:
    """The state as the host builder saw it when it ran its latest attempt."""
    attempts = {**state.attempts, Stage.HOST_BUILDER: state.attempts[Stage.HOST_BUILDER] - 1}
    return state.model_copy(update={"attempts": attempts})


def test_host_build_failure_with_passing_correctness_fails(tmp_path: Path) -> None:
    script = {Stage.HOST_BUILDER: [Step("FAIL", "kernel", correctness="ALL_PASS")]}
    state = final_state(tmp_path, script)
    failed = _failed(_gate(state))
    assert failed["correctness ALL_PASS on a GPU"] == (
        "correctness passed but the host build says FAIL"
    )


def test_correctness_against_an_older_kernel_fails(tmp_path: Path) -> None:
    # A kernel written after the latest correctness run has not been verified.
    state = final_state(tmp_path)
    records = list(state.records)
    kernel = next(r for r in records if r.stage is Stage.KERNEL_WRITER)
    host_index = max(i for i, r in enumerate(records) if r.stage is Stage.HOST_BUILDER)
    records.insert(host_index + 1, kernel)
    failed = _failed(_gate(state.model_copy(update={"records": records})))
    assert failed["correctness ALL_PASS on a GPU"] == (
        "it ran against an earlier kernel than the latest one"
    )
    assert "not counted" in failed["performance DONE"]


def test_perf_measured_before_the_latest_build_fails(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    records = list(state.records)
    host = next(r for r in records if r.stage is Stage.HOST_BUILDER)
    records.insert(len(records) - 1, host)
    failed = _failed(_gate(state.model_copy(update={"records": records})))
    assert failed == {"performance DONE": "measured before the latest host build"}


def test_stopped_run_fails_and_names_where(tmp_path: Path) -> None:
    state = final_state(tmp_path, {Stage.ANALYZER: [Step("BLOCKED")]})
    report = _gate(state)
    failed = _failed(report)
    assert report.verdict is GateVerdict.FAIL
    assert failed["run completed"] == "the routed run ended in stop after analyzer said BLOCKED"
    assert report.summary.startswith(
        f"{len(failed)} of {len(report.checks)} checks not met: run completed (the routed run "
        "ended in stop after analyzer said BLOCKED); "
    )
    assert failed["kernel_writer COMPILED"] == "did not run"
    assert report.headline["stopped_after"] == "analyzer: BLOCKED"


def test_gpu_boundary_awaits_a_gpu_and_does_not_pass(tmp_path: Path) -> None:
    state = final_state(tmp_path, {Stage.HOST_BUILDER: [Step("BLOCKED", "env")]})
    report = _gate(state)
    assert report.verdict is GateVerdict.AWAITING_GPU
    assert report.reached_gpu_boundary
    assert report.summary.startswith("awaiting a GPU: every check that needs no GPU passed")
    host = load_report(HostBuildReport, state.layout())
    assert host.host_part_passed()
    # The GPU's checks are pending, not failed: the headline does not count them as failures.
    assert "gate_failures" not in report.headline and "stopped_after" not in report.headline
    assert report.headline["gpu_checks_pending"] == len(_failed(report)) > 0


def test_host_failure_is_not_the_gpu_boundary(tmp_path: Path) -> None:
    script = {Stage.HOST_BUILDER: [Step("BLOCKED", "host"), Step("BLOCKED", "host")]}
    report = _gate(final_state(tmp_path, script))
    assert not report.reached_gpu_boundary


def test_perf_investigate_fails_with_its_geomean(tmp_path: Path) -> None:
    state = final_state(tmp_path, {Stage.PERF_VALIDATOR: [Step("INVESTIGATE")]})
    failed = _failed(_gate(state))
    assert failed["performance DONE"].startswith("INVESTIGATE: geomean port/baseline = 1.2000")


def test_gate_report_cannot_pass_with_a_failed_check() -> None:
    with pytest.raises(ValidationError, match="every check passes"):
        GateReport(
            run_id="r",
            attempt=1,
            verdict=GateVerdict.PASS,
            outcome=Outcome.COMPLETE,
            checks=[GateCheck(name="correctness", passed=False)],
        )


def test_gate_report_cannot_pass_a_stopped_run() -> None:
    with pytest.raises(ValidationError, match="stopped run"):
        GateReport(
            run_id="r",
            attempt=1,
            verdict=GateVerdict.PASS,
            outcome=Outcome.STOP,
            checks=[GateCheck(name="x", passed=True)],
        )


def _equivalent_port(state: PipelineState) -> None:
    """The run's port_report.json says the port is `equivalent` on one configuration."""
    checks = [
        ConfigCheck(
            config=config,
            variant="v",
            entry="k",
            generic_args=[],
            exact=False,
            ir_level="equivalent",
            targets=[TargetCheck(target=t, sass_identical=same) for t in REQUIRED_TARGETS],
        )
        for config, same in (("c0", True), ("c1", False))
    ]
    port = PortReport(
        kernel="k",
        spec="k.port.yaml",
        verdict="COMPILED",
        summary="1 equivalent",
        kernel_rs="kernel.rs",
        checks=checks,
        rustc_check=True,
    )
    generated = state.layout().generated_dir
    (generated / PORT_REPORT_FILE).write_text(port.model_dump_json())


def _with_bands(state: PipelineState, band: tuple[float, float]) -> None:
    layout = state.layout()
    perf = load_report(PerfReport, layout)
    rows = [row.model_copy(update={"aa_band": band}) for row in perf.rows]
    verdict = PerfReport.verdict_for(rows)
    save_report(perf.model_copy(update={"rows": rows, "verdict": verdict}), layout)


def test_an_equivalent_port_passes_only_inside_its_aa_band(tmp_path: Path) -> None:
    state = final_state(tmp_path)
    _equivalent_port(state)
    name = "equivalent port inside its A/A band on every configuration"
    assert _failed(_gate(state))[name].startswith("no A/A band for")
    _with_bands(state, (0.99, 1.01))
    report = _gate(state)
    assert report.verdict is GateVerdict.PASS, _failed(report)
    assert name in {check.name for check in report.checks}
    # The port measured 1.2x the reference, outside what identical code measures.
    slower = final_state(tmp_path / "slower", {Stage.PERF_VALIDATOR: [Step("INVESTIGATE")]})
    _equivalent_port(slower)
    _with_bands(slower, (0.99, 1.01))
    assert _failed(_gate(slower))[name] == "outside: ['c0', 'c1', 'c2']"
