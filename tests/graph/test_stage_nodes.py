"""Stage injection: finding the real stage modules, and refusing results that break
the stage contract."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_script import ScriptedStages, StageCrash, Step, path_of, run_script

from graph.build import StageContractError, build_graph, draw_mermaid
from graph.routing import NEXT_CHOICES
from graph.stages import ROUTED_STAGES, StageNodes, StageNotImplemented
from schemas.pipeline import LlmSpend, Outcome, Stage, StageRecord
from schemas.reports import InvestigationReport, PerfReport
from schemas.state import PipelineState, StageResult


def _write_stage_package(root: Path, name: str, stages: tuple[Stage, ...]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for stage in stages:
        (package / f"{stage.value}.py").write_text(
            f"def run(state):\n    raise RuntimeError('{stage.value} called')\n"
        )


def test_from_modules_finds_run_in_each_stage_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_stage_package(tmp_path, "stage_pkg_complete", ROUTED_STAGES)
    monkeypatch.syspath_prepend(str(tmp_path))
    nodes = StageNodes.from_modules("stage_pkg_complete")
    with pytest.raises(RuntimeError, match="perf_validator called"):
        nodes.for_stage(Stage.PERF_VALIDATOR)(None)  # type: ignore[arg-type]


def test_from_modules_names_the_missing_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_stage_package(tmp_path, "stage_pkg_partial", ROUTED_STAGES[:3])
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(StageNotImplemented, match="host_builder has no module"):
        StageNodes.from_modules("stage_pkg_partial")


def test_from_modules_needs_a_run_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_stage_package(tmp_path, "stage_pkg_norun", ROUTED_STAGES)
    (tmp_path / "stage_pkg_norun" / "analyzer.py").write_text("RUN = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(StageNotImplemented, match="does not define run"):
        StageNodes.from_modules("stage_pkg_norun")


def test_graph_has_one_node_per_stage_plus_the_two_ends() -> None:
    graph = build_graph(ScriptedStages().nodes())
    names = set(graph.nodes)
    assert names == {s.value for s in Stage} | {o.value for o in Outcome}


def _swap(stages: ScriptedStages, stage: Stage, fn: object) -> StageNodes:
    fields = {s.value: stages.nodes().for_stage(s) for s in Stage}
    fields[stage.value] = fn  # type: ignore[assignment]
    return StageNodes(**fields)


def test_a_stage_returning_another_stages_report_is_refused(tmp_path: Path) -> None:
    def wrong(state: PipelineState) -> StageResult:
        meta = state.report_meta(Stage.PERF_VALIDATOR)
        return StageResult(InvestigationReport(**meta, verdict="ALIGNED"))

    nodes = _swap(ScriptedStages(), Stage.PERF_VALIDATOR, wrong)
    with pytest.raises(StageContractError, match="returned InvestigationReport, not PerfReport"):
        run_script(tmp_path, nodes=nodes)


def test_a_report_for_another_run_or_attempt_is_refused(tmp_path: Path) -> None:
    def stale(state: PipelineState) -> StageResult:
        fields = PerfReport.geomean_fields([])
        return StageResult(
            PerfReport(run_id="old", attempt=1, verdict="BLOCKED", summary="x", **fields)
        )

    nodes = _swap(ScriptedStages(), Stage.PERF_VALIDATOR, stale)
    with pytest.raises(StageContractError, match="expected run"):
        run_script(tmp_path, nodes=nodes)


def test_an_undeclared_extra_report_is_refused(tmp_path: Path) -> None:
    stages = ScriptedStages()
    happy_perf = stages.nodes().perf_validator

    def with_extra(state: PipelineState) -> StageResult:
        result = happy_perf(state)
        return StageResult(result.report, extra_reports=(result.report,))

    nodes = _swap(stages, Stage.PERF_VALIDATOR, with_extra)
    with pytest.raises(StageContractError, match="may not write PerfReport"):
        run_script(tmp_path, nodes=nodes)


def test_on_stage_sees_every_execution_in_order(tmp_path: Path) -> None:
    seen: list[StageRecord] = []
    summary, _ = run_script(
        tmp_path, {Stage.HOST_BUILDER: [Step("FAIL", "host")]}, on_stage=seen.append
    )
    assert seen == summary.stages
    assert [(r.stage.value, r.attempt) for r in seen][3:5] == [
        ("host_builder", 1),
        ("host_builder", 2),
    ]
    assert seen[3].verdict_class == "host"
    assert all(r.report_path and r.report_path.startswith("reports/") for r in seen)
    assert path_of(summary)[-1] == "final_gate"


def test_llm_costs_add_up_over_stages(tmp_path: Path) -> None:
    stages = ScriptedStages()
    happy_writer = stages.nodes().kernel_writer

    def costly(state: PipelineState) -> StageResult:
        result = happy_writer(state)
        return StageResult(result.report, llm_tokens=1200, llm_cost_usd=0.25, llm_model="m")

    summary, _ = run_script(
        tmp_path,
        nodes=_swap(stages, Stage.KERNEL_WRITER, costly),
    )
    assert (summary.llm_tokens, summary.llm_cost_usd) == (1200, 0.25)
    # One entry per stage execution that used the LLM: the llm_usage table's rows.
    assert summary.llm_usage == [
        LlmSpend(stage=Stage.KERNEL_WRITER, attempt=1, model="m", total_tokens=1200, cost_usd=0.25)
    ]


def test_a_crashing_stage_propagates_without_a_summary(tmp_path: Path) -> None:
    with pytest.raises(StageCrash):
        run_script(tmp_path, {Stage.ANALYZER: [Step("PASS", crash=True)]})
    assert not (tmp_path / "run" / "reports" / "summary.json").exists()


def test_graph_edges_are_exactly_the_routing_choices() -> None:
    drawn = build_graph(ScriptedStages().nodes()).compile().get_graph()
    conditional = {(e.source, e.target) for e in drawn.edges if e.conditional}
    expected = {
        (stage.value, target.value) for stage, targets in NEXT_CHOICES.items() for target in targets
    }
    assert conditional == expected
    fixed = {(e.source, e.target) for e in drawn.edges if not e.conditional}
    assert fixed == {
        ("__start__", "preflight"),
        ("complete", "final_gate"),
        ("stop", "final_gate"),
        ("final_gate", "__end__"),
    }


def test_mermaid_drawing_names_every_node() -> None:
    text = draw_mermaid()
    for name in [*(s.value for s in Stage), "complete", "stop"]:
        assert f"{name}({name})" in text
