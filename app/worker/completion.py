"""The job's side of finishing a run awaiting a GPU: the accepted result folder is
checked again against the run's bundle, the stage rows the fork replaces (the host
builder's attempt the results belong to and every row after it) are dropped, and
the graph runs on from the results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.conversions import record_event
from app.storage.database import transaction
from app.storage.models import StageExecution
from app.worker.pipeline_call import call_gpu_completion
from nodes.gpu_completion import bundle_dir, check_results
from schemas.pipeline import RunSummary, Stage, StageRecord
from schemas.run_layout import RunLayout


def drop_replaced_stages(sessions: sessionmaker[Session], conversion_id: str, attempt: int) -> None:
    """Delete the rows from host_builder #attempt on: the fork records them anew."""
    with transaction(sessions) as session:
        first = session.scalar(
            select(StageExecution.id).where(
                StageExecution.conversion_id == conversion_id,
                StageExecution.stage == Stage.HOST_BUILDER.value,
                StageExecution.attempt == attempt,
            )
        )
        if first is None:
            return
        session.execute(
            delete(StageExecution).where(
                StageExecution.conversion_id == conversion_id, StageExecution.id >= first
            )
        )
        record_event(
            session,
            "gpu.completion_started",
            f"finishing from host_builder #{attempt} with the GPU results",
            conversion_id,
        )


def complete_from_gpu(
    sessions: sessionmaker[Session],
    conversion_id: str,
    spec: Path,
    root: Path,
    folder: str,
    checkpointer: Any,
    on_stage: Callable[[StageRecord], None],
) -> RunSummary:
    """Finish the run from the accepted results in `root/folder`."""
    checked = check_results(bundle_dir(RunLayout(root)), root / folder)
    return call_gpu_completion(
        spec,
        root,
        checked,
        checkpointer=checkpointer,
        thread_id=conversion_id,
        on_stage=on_stage,
        on_fork=lambda: drop_replaced_stages(sessions, conversion_id, checked.attempt),
    )
