"""Run the pipeline graph on one port spec into one run directory.

With a checkpointer and a thread id, a run that was interrupted (a crash, a
killed worker) resumes where it stopped: stages whose step was checkpointed
are not executed again, the interrupted one is redone from scratch. Any other
call starts a fresh run, which first empties the run directory's stage folders.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Durability

from graph.build import PipelineGraph, compile_pipeline, report_last_stage
from graph.stages import StageNodes
from schemas.pipeline import Outcome, RunOptions, RunSummary, Stage, StageRecord
from schemas.port_spec import operator_name
from schemas.reports import GateReport, ReportError, load_report
from schemas.run_layout import RunLayout, write_text_atomic
from schemas.state import PipelineState


class ResumeMismatch(ValueError):
    """The checkpointed run to resume was for another spec or run directory."""


def run_pipeline(
    spec_path: Path,
    run_dir: Path,
    *,
    options: RunOptions,
    nodes: StageNodes | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    thread_id: str | None = None,
    on_stage: Callable[[StageRecord], None] | None = None,
) -> RunSummary:
    """Run (or resume) one conversion and write reports/summary.json."""
    spec_path = spec_path.resolve()
    layout = RunLayout(run_dir.resolve())
    graph = compile_pipeline(
        nodes or StageNodes.from_modules(), checkpointer=checkpointer, on_stage=on_stage
    )
    config: RunnableConfig = {"configurable": {"thread_id": thread_id or uuid.uuid4().hex}}
    # Checkpoint each step before the next starts, so a crash loses at most one stage.
    durability: Durability | None = "sync" if checkpointer is not None else None
    pending = _pending_state(graph, config) if checkpointer is not None else None
    if pending is not None:
        start = resume_from(graph, config, pending, spec_path, layout)
        layout.ensure()
        result = graph.invoke(None, start, durability=durability)
    else:
        layout.prepare_fresh()
        initial = _initial_state(spec_path, layout, options)
        result = graph.invoke(as_graph_input(initial), config, durability=durability)
    final = PipelineState.model_validate(result)
    report_last_stage(final, on_stage)
    return write_summary(final, layout)


def write_summary(final: PipelineState, layout: RunLayout) -> RunSummary:
    """reports/summary.json of a run whose graph has ended."""
    summary = _summary(final, layout)
    write_text_atomic(layout.summary_path, summary.model_dump_json(indent=2) + "\n")
    return summary


def as_graph_input(state: PipelineState) -> Any:
    """The state as plain JSON values: checkpointers then store no pickled or
    unregistered Python types, and any saver (SQLite, PostgreSQL) can restore it."""
    return state.model_dump(mode="json")


def _pending_state(graph: PipelineGraph, config: RunnableConfig) -> PipelineState | None:
    """The state of an unfinished run on this thread, if there is one."""
    snapshot = graph.get_state(config)
    if not snapshot.next or not snapshot.values:
        return None
    return PipelineState.model_validate(snapshot.values)


def moved_paths(pending: PipelineState, spec_path: Path, layout: RunLayout) -> dict[str, str]:
    """The state's paths to update before resuming `pending` in `layout`: none when the
    run is where it was, the new ones when its folder was moved (a service's data
    restored elsewhere) with the spec at the same place inside it. Any other spec or
    folder is another run: ResumeMismatch."""
    was_root, was_spec = Path(pending.run_dir), Path(pending.spec_path)
    if was_root == layout.root and was_spec == spec_path:
        return {}
    moved = was_spec.is_relative_to(was_root) and (
        layout.root / was_spec.relative_to(was_root) == spec_path
    )
    if not moved:
        raise ResumeMismatch(
            f"the unfinished run {pending.run_id} is for {pending.spec_path} in "
            f"{pending.run_dir}; use another thread id for {spec_path} in {layout.root}"
        )
    return {"run_dir": str(layout.root), "spec_path": str(spec_path)}


def resume_from(
    graph: PipelineGraph,
    config: RunnableConfig,
    pending: PipelineState,
    spec_path: Path,
    layout: RunLayout,
) -> RunnableConfig:
    """The checkpoint to run on from: `config`, or a fork of it whose paths name the
    run's folder where it is now."""
    moved = moved_paths(pending, spec_path, layout)
    return graph.update_state(config, moved) if moved else config


def _initial_state(spec_path: Path, layout: RunLayout, options: RunOptions) -> PipelineState:
    return PipelineState(
        run_id=uuid.uuid4().hex,
        operator=operator_name(spec_path),
        spec_path=str(spec_path),
        run_dir=str(layout.root),
        options=options,
        started_at=datetime.now(UTC),
    )


def _summary(state: PipelineState, layout: RunLayout) -> RunSummary:
    try:
        gate: GateReport | None = load_report(GateReport, layout)
    except ReportError:
        gate = None
    if gate is not None and gate.run_id != state.run_id:
        gate = None
    return RunSummary(
        operator=state.operator,
        outcome=state.outcome or Outcome.STOP,
        gate_verdict=state.verdicts.get(Stage.FINAL_GATE, "FAIL"),
        stages=state.records,
        headline=gate.headline if gate is not None else {},
        llm_tokens=state.llm_tokens,
        llm_cost_usd=state.llm_cost_usd,
        llm_usage=state.llm_usage,
    )
