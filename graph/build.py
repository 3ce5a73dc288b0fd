"""The LangGraph wiring: one node per stage, conditional edges from routing.py,
`complete` and `stop` as the two ends of the routed part, then the final gate once.

    START -> preflight -> analyzer -> kernel_writer -> host_builder -> perf_validator
                 (conditional edges as routing.py decides)
    ... -> complete | stop -> final_gate -> END
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.routing import CAPS, NEXT_CHOICES, next_target
from graph.stages import ROUTED_STAGES, StageFn, StageNodes
from schemas.pipeline import LlmSpend, Outcome, Stage, StageRecord
from schemas.reports import EXTRA_REPORTS, PRIMARY_REPORT, save_report
from schemas.state import PipelineState, StageResult

OnStage = Callable[[StageRecord], None]
StateUpdate = dict[str, Any]


class GraphNode(Protocol):
    """A LangGraph node over the pipeline state (LangGraph passes it as `state`)."""

    def __call__(self, state: PipelineState) -> StateUpdate: ...


PipelineGraph = CompiledStateGraph[PipelineState, None, PipelineState, PipelineState]


class StageContractError(RuntimeError):
    """A stage returned something its contract forbids (wrong report type, run or attempt)."""


def build_graph(nodes: StageNodes, on_stage: OnStage | None = None) -> StateGraph[PipelineState]:
    graph: StateGraph[PipelineState] = StateGraph(PipelineState)
    for stage in Stage:
        graph.add_node(stage.value, stage_node(stage, nodes.for_stage(stage), on_stage))
    graph.add_node(Outcome.COMPLETE.value, _end_routing(Outcome.COMPLETE))
    graph.add_node(Outcome.STOP.value, _end_routing(Outcome.STOP))

    graph.add_edge(START, Stage.PREFLIGHT.value)
    for stage in ROUTED_STAGES:
        destinations = [target.value for target in NEXT_CHOICES[stage]]
        graph.add_conditional_edges(stage.value, _router(stage), destinations)
    graph.add_edge(Outcome.COMPLETE.value, Stage.FINAL_GATE.value)
    graph.add_edge(Outcome.STOP.value, Stage.FINAL_GATE.value)
    graph.add_edge(Stage.FINAL_GATE.value, END)
    return graph


def compile_pipeline(
    nodes: StageNodes,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    on_stage: OnStage | None = None,
) -> PipelineGraph:
    return build_graph(nodes, on_stage).compile(checkpointer=checkpointer)


def draw_mermaid() -> str:
    """The wiring as a Mermaid flowchart (`python -m graph.build`); the stages are
    placeholders, only the structure is drawn."""

    def placeholder(state: PipelineState) -> StageResult:
        raise NotImplementedError("drawing only")

    nodes = StageNodes(**{stage.value: placeholder for stage in Stage})
    return build_graph(nodes).compile().get_graph().draw_mermaid()


def _router(stage: Stage) -> Callable[[PipelineState], str]:
    def route(state: PipelineState) -> str:
        return next_target(stage, state).value

    return route


def _end_routing(outcome: Outcome) -> GraphNode:
    def end(state: PipelineState) -> StateUpdate:
        return {"outcome": outcome.value}

    return end


def stage_node(stage: Stage, fn: StageFn, on_stage: OnStage | None) -> GraphNode:
    """Wrap a stage callable: check its result, write its reports, record the execution.

    Re-running the node for the same attempt (a resumed run) writes the same
    files again, so a stage that is interrupted half-way is simply redone.
    """

    def node(state: PipelineState) -> StateUpdate:
        # The previous stage's execution is told now, not when it ended: the step
        # this one starts from is checkpointed, so a worker killed in between
        # never reports an execution the resumed run then repeats.
        report_last_stage(state, on_stage)
        attempt = state.next_attempt(stage)
        if stage in CAPS and attempt > CAPS[stage]:
            raise StageContractError(f"{stage.value} would exceed its cap of {CAPS[stage]}")
        started_at = datetime.now(UTC)
        result = fn(state)
        _check_result(stage, state, attempt, result)
        layout = state.layout()
        paths = [save_report(r, layout) for r in (result.report, *result.extra_reports)]
        record = StageRecord(
            stage=stage,
            attempt=attempt,
            verdict=str(result.report.verdict),
            verdict_class=result.report.routing_class(),
            started_at=started_at,
            finished_at=datetime.now(UTC),
            report_path=layout.relative(paths[0]),
            summary=result.report.summary,
        )
        return _apply(state, record, [layout.relative(p) for p in paths], result)

    return node


def report_last_stage(state: PipelineState, on_stage: OnStage | None) -> None:
    """Tell `on_stage` the latest execution in `state` (the run's last, once it has
    ended); a receiver that keeps them takes a second telling as the same one."""
    if on_stage is not None and state.records:
        on_stage(state.records[-1])


def _check_result(stage: Stage, state: PipelineState, attempt: int, result: StageResult) -> None:
    expected = PRIMARY_REPORT[stage]
    if type(result.report) is not expected:
        raise StageContractError(
            f"{stage.value} returned {type(result.report).__name__}, not {expected.__name__}"
        )
    allowed_extra = EXTRA_REPORTS.get(stage, ())
    for extra in result.extra_reports:
        if type(extra) not in allowed_extra:
            raise StageContractError(f"{stage.value} may not write {type(extra).__name__}")
    for report in (result.report, *result.extra_reports):
        if report.run_id != state.run_id or report.attempt != attempt:
            raise StageContractError(
                f"{stage.value} wrote {report.FILE_NAME} for run {report.run_id} attempt "
                f"{report.attempt}, expected run {state.run_id} attempt {attempt}"
            )


def _apply(
    state: PipelineState, record: StageRecord, report_paths: list[str], result: StageResult
) -> StateUpdate:
    stage = record.stage
    classes = dict(state.verdict_classes)
    classes.pop(stage, None)
    if record.verdict_class is not None:
        classes[stage] = record.verdict_class
    updated = state.model_copy(
        update={
            "attempts": {**state.attempts, stage: record.attempt},
            "verdicts": {**state.verdicts, stage: record.verdict},
            "verdict_classes": classes,
            "reports": {**state.reports, stage: report_paths},
            "records": [*state.records, record],
            "llm_tokens": state.llm_tokens + result.llm_tokens,
            "llm_cost_usd": state.llm_cost_usd + result.llm_cost_usd,
        }
    )
    if result.llm_tokens or result.llm_cost_usd:
        spend = LlmSpend(
            stage=stage,
            attempt=record.attempt,
            model=result.llm_model,
            total_tokens=result.llm_tokens,
            cost_usd=result.llm_cost_usd,
        )
        updated.llm_usage = [*state.llm_usage, spend]
    changed = {"attempts", "verdicts", "verdict_classes", "reports", "records"}
    changed |= {"llm_tokens", "llm_cost_usd", "llm_usage"}
    # Plain JSON values only, so that every checkpointer can store the state.
    return updated.model_dump(mode="json", include=changed)


if __name__ == "__main__":
    print(draw_mermaid())
