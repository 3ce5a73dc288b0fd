"""The one place the service calls the pipeline graph."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.pipeline import RunOptions, RunSummary, StageRecord

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
