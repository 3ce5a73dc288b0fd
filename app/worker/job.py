"""The job child process: runs (or resumes) the pipeline for one claimed
conversion and records each stage as it ends.

    python -m app.worker.job CONVERSION_ID WORKER_ATTEMPT [--parent-pid PID]
                                               (settings JSON on stdin)

The worker that spawned it owns the conversion's status; this process only
writes stage executions and the run's results. Exit codes tell the worker
what happened."""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.conversions import record_event, run_dir, spec_path
from app.settings import Settings
from app.storage.database import make_engine, make_session_factory, transaction
from app.storage.models import Conversion, LlmUsage, StageExecution
from app.worker.checkpoints import open_checkpointer
from app.worker.completion import complete_from_gpu
from app.worker.ingest import ingest_files
from app.worker.pipeline_call import call_pipeline
from schemas.api import ResultsTrust
from schemas.pipeline import RunOptions, RunSummary, StageRecord
from schemas.run_layout import REPORTS_DIR, SUMMARY_FILE
from schemas.verdicts import GateVerdict

EXIT_DONE = 0
EXIT_PIPELINE_ERROR = 3
EXIT_BAD_REQUEST = 4
EXIT_PARENT_GONE = 5
EXIT_AWAITING_GPU = 6
PR_SET_PDEATHSIG = 1
MAX_VALIDATOR_OUTPUT_BYTES = 256 * 1024

log = logging.getLogger("tileport.job")


def read_report(root: Path, relative: str | None) -> dict[str, Any]:
    """The stage's report as stored in stage_executions.validator_output (if small)."""
    if not relative:
        return {}
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        return {}
    if path.stat().st_size > MAX_VALIDATOR_OUTPUT_BYTES:
        return {"omitted": f"report larger than {MAX_VALIDATOR_OUTPUT_BYTES} bytes"}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"omitted": "report is not JSON"}
    return loaded if isinstance(loaded, dict) else {"value": loaded}


class StageRecorder:
    """The pipeline's on_stage callback: one stage_executions row per execution."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        conversion_id: str,
        root: Path,
        worker_attempt: int,
        after: Callable[[], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.conversion_id = conversion_id
        self.root = root
        self.worker_attempt = worker_attempt
        self.after = after  # run once the stage is recorded

    def __call__(self, record: StageRecord) -> None:
        with transaction(self.sessions) as session:
            existing = session.scalars(
                select(StageExecution).where(
                    StageExecution.conversion_id == self.conversion_id,
                    StageExecution.stage == record.stage.value,
                    StageExecution.attempt == record.attempt,
                )
            ).first()
            if existing is not None and _same_instant(existing.started_at, record.started_at):
                return  # told again after a resume: the execution is recorded
            row = existing or StageExecution(
                conversion_id=self.conversion_id, stage=record.stage.value, attempt=record.attempt
            )
            row.verdict = record.verdict
            row.verdict_class = record.verdict_class
            row.summary = record.summary
            row.report_path = record.report_path
            row.validator_output = read_report(self.root, record.report_path)
            row.started_at = record.started_at
            row.finished_at = record.finished_at
            row.duration_s = (record.finished_at - record.started_at).total_seconds()
            row.worker_attempt = self.worker_attempt
            session.add(row)
            kind = "stage.repeated" if existing is not None else "stage.finished"
            record_event(
                session,
                kind,
                f"{record.stage.value} #{record.attempt}: {record.verdict}",
                self.conversion_id,
                stage=record.stage.value,
                attempt=record.attempt,
                verdict=record.verdict,
                worker_attempt=self.worker_attempt,
            )
        if self.after is not None:
            self.after()


def _same_instant(stored: datetime, told: datetime) -> bool:
    """SQLite gives stored datetimes back without their zone (they are UTC)."""
    return stored.replace(tzinfo=None) == told.astimezone(UTC).replace(tzinfo=None)


def store_summary(sessions: sessionmaker[Session], conversion_id: str, summary: RunSummary) -> None:
    with transaction(sessions) as session:
        conversion = session.get_one(Conversion, conversion_id)
        conversion.outcome = summary.outcome.value
        conversion.gate_verdict = service_gate(summary.gate_verdict, conversion.gpu_results_trust)
        conversion.gpu_results = None
        conversion.headline = dict(summary.headline)
        conversion.llm_tokens = summary.llm_tokens
        conversion.llm_cost_usd = summary.llm_cost_usd
        for spend in summary.llm_usage:
            session.add(
                LlmUsage(
                    conversion_id=conversion_id,
                    stage=spend.stage.value,
                    model=spend.model,
                    total_tokens=spend.total_tokens,
                    cost_usd=spend.cost_usd,
                )
            )


def service_gate(gate_verdict: str, trust: str | None) -> str:
    """The gate the service records: a pass on results no GPU worker sent is UNVERIFIED
    (the run's own reports keep what the pipeline said of those results)."""
    if gate_verdict == GateVerdict.PASS and trust == ResultsTrust.USER_REPORTED:
        return GateVerdict.UNVERIFIED
    return gate_verdict


def exit_for(gate_verdict: str) -> int:
    """A summarised run's exit code: awaiting a GPU, or done."""
    return EXIT_AWAITING_GPU if gate_verdict == GateVerdict.AWAITING_GPU else EXIT_DONE


def run_job(settings: Settings, conversion_id: str, worker_attempt: int) -> int:
    engine = make_engine(settings.resolved_database_url)
    sessions = make_session_factory(engine)
    with sessions() as session:
        conversion = session.get(Conversion, conversion_id)
        if conversion is None:
            log.error("no conversion %s", conversion_id)
            return EXIT_BAD_REQUEST
        options = RunOptions.model_validate(conversion.options)
        spec = spec_path(settings, conversion)
        gate = conversion.gate_verdict
        results = conversion.gpu_results
    root = run_dir(settings, conversion_id)
    if gate is not None and results is None and (root / REPORTS_DIR / SUMMARY_FILE).is_file():
        # The run ended before its worker could say so: never run it a second time.
        log.info("%s already has its summary; nothing to run", conversion_id)
        return exit_for(gate)
    if settings.no_gpu:
        options = options.model_copy(update={"no_gpu": True})
    # The stage's steps have ended: its files go into the store, where they are served.
    recorder = StageRecorder(
        sessions,
        conversion_id,
        root,
        worker_attempt,
        after=lambda: ingest_files(sessions, settings, conversion_id),
    )
    try:
        with open_checkpointer(settings.resolved_database_url) as checkpointer:
            if results is not None:
                summary = complete_from_gpu(
                    sessions, conversion_id, spec, root, results, checkpointer, recorder
                )
            else:
                summary = call_pipeline(
                    spec,
                    root,
                    options=options,
                    checkpointer=checkpointer,
                    thread_id=conversion_id,
                    on_stage=recorder,
                )
    except Exception as error:
        log.exception("the pipeline failed")
        with transaction(sessions) as session:
            session.get_one(
                Conversion, conversion_id
            ).error = f"pipeline error: {type(error).__name__}: {error}"[:2000]
        return EXIT_PIPELINE_ERROR
    store_summary(sessions, conversion_id, summary)
    engine.dispose()
    return exit_for(summary.gate_verdict)


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to kill this process when its worker dies, so that a killed worker
    leaves no orphan job writing to the run (the next worker resumes it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(EXIT_PARENT_GONE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.worker.job")
    parser.add_argument("conversion_id")
    parser.add_argument("worker_attempt", type=int)
    parser.add_argument("--parent-pid", type=int, default=None)
    args = parser.parse_args(argv)
    if args.parent_pid is not None and sys.platform == "linux":
        die_with_parent(args.parent_pid)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = Settings.model_validate_json(sys.stdin.read())
    return run_job(settings, args.conversion_id, args.worker_attempt)


if __name__ == "__main__":
    sys.exit(main())
