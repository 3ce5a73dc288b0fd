"""Finish a run that stopped at the GPU boundary from the results of a GPU run.

The run's checkpoints are kept while it awaits a GPU. Completing it forks its
thread at the checkpoint just before the host builder's attempt the results
belong to and runs the graph on from there, with that attempt finished from the
results (`nodes.gpu_completion`): the host build becomes ALL_PASS (or FAIL) with
the GPU's correctness, routing goes on to the perf validator, and the final gate
gives a real verdict. Stages before the fork are not executed again. A completion
interrupted part-way resumes from its own last checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.build import OnStage, PipelineGraph, compile_pipeline, report_last_stage
from graph.runner import resume_from, write_summary
from graph.stages import StageNodes
from nodes.gpu_completion import GpuResults, GpuResultsError, completion_stage
from schemas.pipeline import RunSummary, Stage
from schemas.run_layout import RunLayout
from schemas.state import PipelineState
from schemas.verdicts import GateVerdict


def _fork_point(graph: PipelineGraph, config: RunnableConfig, attempt: int) -> RunnableConfig:
    """The checkpoint whose next step is host_builder attempt `attempt` (the latest one)."""
    latest = graph.get_state(config)
    if not latest.values:
        raise GpuResultsError(["the run has no checkpoints: it cannot be completed"])
    ended = PipelineState.model_validate(latest.values)
    if ended.verdicts.get(Stage.FINAL_GATE) != GateVerdict.AWAITING_GPU:
        raise GpuResultsError(["the run is not awaiting a GPU"])
    for snapshot in graph.get_state_history(config):
        if snapshot.next != (Stage.HOST_BUILDER.value,):
            continue
        before = PipelineState.model_validate(snapshot.values)
        if before.attempts.get(Stage.HOST_BUILDER, 0) == attempt - 1:
            return snapshot.config
    raise GpuResultsError([f"the run has no checkpoint before host_builder attempt {attempt}"])


def complete_with_gpu_results(
    spec_path: Path,
    run_dir: Path,
    results: GpuResults,
    *,
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str,
    nodes: StageNodes | None = None,
    on_stage: OnStage | None = None,
    on_fork: Callable[[], None] | None = None,
) -> RunSummary:
    """Run the rest of the graph from `results` and write reports/summary.json;
    `on_fork` is called before a fork replaces the run's tail (not on a resume)."""
    layout = RunLayout(run_dir.resolve())
    stages = nodes or StageNodes.from_modules()
    completing = dataclasses.replace(
        stages, host_builder=completion_stage(results, stages.host_builder)
    )
    graph = compile_pipeline(completing, checkpointer=checkpointer, on_stage=on_stage)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    snapshot = graph.get_state(config)
    fork = config if snapshot.next else _fork_point(graph, config, results.attempt)
    pending = PipelineState.model_validate(snapshot.values)
    start = resume_from(graph, fork, pending, spec_path.resolve(), layout)
    if fork is not config and on_fork is not None:
        on_fork()
    result = graph.invoke(None, start, durability="sync")
    final = PipelineState.model_validate(result)
    report_last_stage(final, on_stage)
    return write_summary(final, layout)
