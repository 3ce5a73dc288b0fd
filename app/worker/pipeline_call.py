"""The one place the service calls the pipeline graph."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemas.pipeline import RunOptions, RunSummary, StageRecord

if TYPE_CHECKING:
    from nodes.gpu_completion import GpuResults

RUNNER_MODULE = "graph.runner"


def pipeline_available() -> bool:
    return importlib.util.find_spec(RUNNER_MODULE) is not None


def call_pipeline(
    spec_path: Path,
    run_dir: Path,
    *,
    options: RunOptions,
    checkpointer: Any,
    thread_id: str,
    on_stage: Callable[[StageRecord], None],
) -> RunSummary:
    """Run (or resume, when the checkpointer holds this thread) one conversion."""
    from graph.runner import run_pipeline

    summary: RunSummary = run_pipeline(
        spec_path,
        run_dir,
        options=options,
        checkpointer=checkpointer,
        thread_id=thread_id,
        on_stage=on_stage,
    )
    return summary


def call_gpu_completion(
    spec_path: Path,
    run_dir: Path,
    results: GpuResults,
    *,
    checkpointer: Any,
    thread_id: str,
    on_stage: Callable[[StageRecord], None],
    on_fork: Callable[[], None],
) -> RunSummary:
    """Finish a run awaiting a GPU from checked GPU results (see graph.gpu_resume)."""
    from graph.gpu_resume import complete_with_gpu_results

    return complete_with_gpu_results(
        spec_path,
        run_dir,
        results,
        checkpointer=checkpointer,
        thread_id=thread_id,
        on_stage=on_stage,
        on_fork=on_fork,
    )
