"""What the API does with conversions: store a submission and queue it, list,
read, cancel. Shared by the REST routes, the web pages and the PR bot."""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload, sessionmaker

from app.access import Caller, Reader, check_owner, may_read
from app.errors import ApiError, unknown_conversion
from app.intake import Submission
from app.settings import Settings
from app.storage.blobs import BlobStore, sha256_bytes
from app.storage.database import transaction
from app.storage.models import Conversion, Event, StageExecution, utcnow
from schemas.api import (
    ConversionItem,
    ConversionPage,
    ConversionStatus,
    ConversionView,
    ErrorCode,
    GpuCompletion,
    Links,
    StageView,
)
from schemas.verdicts import GateVerdict

INPUT_DIR = "input"


def run_dir(settings: Settings, conversion_id: str) -> Path:
    return settings.resolved_artifact_root / "runs" / conversion_id


def blob_store(settings: Settings) -> BlobStore:
    return BlobStore(settings.resolved_artifact_root / "objects")


def new_id() -> str:
    return uuid.uuid4().hex


def fingerprint(submission: Submission) -> str:
    """What makes two requests 'the same' for Idempotency-Key purposes."""
    parts = {
        "files": {path: sha256_bytes(data) for path, data in sorted(submission.files.items())},
        "options": submission.options.model_dump(mode="json"),
        "origin": submission.origin,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def record_event(
    session: Session, kind: str, message: str, conversion_id: str | None = None, **data: Any
) -> None:
    session.add(Event(conversion_id=conversion_id, kind=kind, message=message, data=data))


def queue_depth(session: Session) -> int:
    count = session.scalar(
        select(func.count()).select_from(Conversion).where(Conversion.status == "queued")
    )
    return int(count or 0)


def find_by_key(session: Session, key: str) -> Conversion | None:
    return session.scalars(select(Conversion).where(Conversion.idempotency_key == key)).first()


def replay_or_conflict(existing: Conversion, request_fingerprint: str) -> Conversion:
    if existing.request_fingerprint != request_fingerprint:
        raise ApiError(
            409,
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "this Idempotency-Key was used for a different request",
            {"conversion_id": existing.id},
        )
    return existing


def check_backpressure(session: Session, settings: Settings, caller: str) -> None:
    """429 when the queue is full, or when `caller` already has its share waiting or
    running (one tenant cannot fill the queue for the others)."""
    retry = {"Retry-After": str(settings.queue_retry_after_s)}
    if queue_depth(session) >= settings.queue_max_pending:
        raise ApiError(
            429,
            ErrorCode.QUEUE_FULL,
            "too many conversions are waiting; retry later",
            {"queued_limit": settings.queue_max_pending},
            headers=retry,
        )
    if pending_of(session, caller) >= settings.queue_max_per_caller:
        raise ApiError(
            429,
            ErrorCode.QUEUE_FULL,
            "you have as many conversions waiting or running as one caller may; retry later",
            {"caller_limit": settings.queue_max_per_caller},
            headers=retry,
        )


def pending_of(session: Session, caller: str) -> int:
    """The caller's conversions waiting or running."""
    count = session.scalar(
        select(func.count())
        .select_from(Conversion)
        .where(
            Conversion.submitted_by == caller,
            Conversion.status.in_([ConversionStatus.QUEUED, ConversionStatus.RUNNING]),
        )
    )
    return int(count or 0)


def check_capacity(factory: sessionmaker[Session], settings: Settings, caller: str) -> None:
    """`check_backpressure` before a submission is read: a caller over its share
    costs no intake work (the sandboxed kernel check)."""
    with factory() as session:
        check_backpressure(session, settings, caller)


def write_inputs(settings: Settings, conversion_id: str, submission: Submission) -> None:
    inputs = run_dir(settings, conversion_id) / INPUT_DIR
    for relative, data in submission.files.items():
        target = inputs / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def spec_path(settings: Settings, conversion: Conversion) -> Path:
    return run_dir(settings, conversion.id) / INPUT_DIR / conversion.spec_name


def submit(
    factory: sessionmaker[Session],
    settings: Settings,
    submission: Submission,
    submitted_by: str,
    idempotency_key: str | None = None,
) -> tuple[Conversion, bool]:
    """Store and queue a conversion. Returns it and whether it was an idempotent replay."""
    request_fingerprint = fingerprint(submission)
    if idempotency_key:
        with factory() as session:
            existing = find_by_key(session, idempotency_key)
            if existing is not None:
                return replay_or_conflict(existing, request_fingerprint), True
    conversion_id = new_id()
    try:
        with transaction(factory) as session:
            check_backpressure(session, settings, submitted_by)
            conversion = new_conversion(settings, conversion_id, submission, submitted_by)
            conversion.request_fingerprint = request_fingerprint
            conversion.idempotency_key = idempotency_key or None
            session.add(conversion)
            session.flush()
            record_event(
                session,
                "conversion.queued",
                f"{submission.operator} queued by {submitted_by}",
                conversion_id,
                kernel=submission.kernel,
            )
    except BaseException as error:
        shutil.rmtree(run_dir(settings, conversion_id), ignore_errors=True)
        if not (idempotency_key and isinstance(error, IntegrityError)):
            raise
        # Another request with the same Idempotency-Key won the race.
        with factory() as session:
            existing = find_by_key(session, idempotency_key)
        if existing is None:
            raise
        return replay_or_conflict(existing, request_fingerprint), True
    with factory() as session:
        return get(session, conversion_id), False


def new_conversion(
    settings: Settings, conversion_id: str, submission: Submission, submitted_by: str
) -> Conversion:
    """The row for a new submission, with both files stored by hash and in the run dir."""
    blobs = blob_store(settings)
    write_inputs(settings, conversion_id, submission)
    return Conversion(
        id=conversion_id,
        operator=submission.operator,
        status=ConversionStatus.QUEUED,
        kernel=submission.kernel,
        source_name=submission.source_path,
        spec_name=submission.spec_name,
        source_sha256=blobs.put_bytes(submission.source),
        spec_sha256=blobs.put_bytes(submission.spec),
        options=submission.options.model_dump(mode="json"),
        origin=submission.origin,
        submitted_by=submitted_by,
    )


def get(
    session: Session, conversion_id: str, with_reports: bool = False, reader: Reader = None
) -> Conversion:
    """The conversion with its stages in one query (and their reports if asked). A
    conversion `reader` may not read is unknown to it, as one that does not exist;
    a reader of None reads everything (the service itself, or anyone under
    PUBLIC_READ)."""
    stages = joinedload(Conversion.stages)
    if with_reports:
        stages = stages.undefer(StageExecution.validator_output)
    conversion = (
        session.scalars(select(Conversion).where(Conversion.id == conversion_id).options(stages))
        .unique()
        .one_or_none()
    )
    if conversion is None or not may_read(reader, conversion):
        raise unknown_conversion(conversion_id)
    return conversion


def list_page(
    session: Session,
    reader: Reader,
    status: ConversionStatus | None,
    operator: str | None,
    limit: int,
    offset: int,
) -> tuple[list[Conversion], int]:
    """One page of the conversions `reader` may read, newest first."""
    query = select(Conversion)
    if reader is not None and not (reader.admin or reader.gpu_worker):
        query = query.where(Conversion.submitted_by == reader.name)
    if status is not None:
        query = query.where(Conversion.status == status)
    if operator:
        query = query.where(Conversion.operator == operator)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(
        query.order_by(Conversion.created_at.desc(), Conversion.id).limit(limit).offset(offset)
    ).all()
    return list(rows), int(total)


def cancel(factory: sessionmaker[Session], conversion_id: str, by: Caller) -> Conversion:
    """Queued or awaiting a GPU: cancelled at once. Running: flagged; the worker stops
    the job. Only its submitter, or an admin (`API_ADMINS`), may cancel it."""
    with transaction(factory) as session:
        conversion = get(session, conversion_id)
        check_owner(conversion, by, "cancel it")
        status = ConversionStatus(conversion.status)
        if status.terminal:
            raise ApiError(
                409,
                ErrorCode.NOT_CANCELLABLE,
                f"the conversion is already {status.value}",
                {"status": status.value},
            )
        session.execute(
            update(Conversion)
            .where(
                Conversion.id == conversion_id,
                Conversion.status.in_([ConversionStatus.QUEUED, ConversionStatus.AWAITING_GPU]),
            )
            .values(
                status=ConversionStatus.CANCELLED,
                cancel_requested=True,
                finished_at=utcnow(),
                updated_at=utcnow(),
            )
        )
        session.execute(
            update(Conversion)
            .where(Conversion.id == conversion_id, Conversion.status == ConversionStatus.RUNNING)
            .values(cancel_requested=True, updated_at=utcnow())
        )
        record_event(session, "conversion.cancel_requested", f"cancel by {by}", conversion_id)
    with factory() as session:
        return get(session, conversion_id)


def links(conversion_id: str) -> Links:
    return Links(
        self=f"/v1/conversions/{conversion_id}",
        web=f"/runs/{conversion_id}",
        artifacts=f"/v1/conversions/{conversion_id}/artifacts",
    )


def item_view(conversion: Conversion) -> ConversionItem:
    level = conversion.headline.get("level")
    return ConversionItem(
        id=conversion.id,
        operator=conversion.operator,
        status=ConversionStatus(conversion.status),
        outcome=conversion.outcome,
        gate_verdict=conversion.gate_verdict,
        reached_gpu_boundary=conversion.gate_verdict == GateVerdict.AWAITING_GPU,
        level=str(level) if level is not None else None,
        created_at=conversion.created_at,
        started_at=conversion.started_at,
        finished_at=conversion.finished_at,
        headline=conversion.headline,
        links=links(conversion.id),
    )


def stage_view(conversion_id: str, stage: StageExecution) -> StageView:
    report_url = (
        f"/v1/conversions/{conversion_id}/artifacts/{stage.report_path}"
        if stage.report_path
        else None
    )
    return StageView(
        stage=stage.stage,
        attempt=stage.attempt,
        verdict=stage.verdict,
        verdict_class=stage.verdict_class,
        summary=stage.summary,
        report_path=stage.report_path,
        report_url=report_url,
        started_at=stage.started_at,
        finished_at=stage.finished_at,
        duration_s=stage.duration_s,
        worker_attempt=stage.worker_attempt,
    )


def elapsed(start: datetime | None, end: datetime | None) -> float | None:
    if start is None:
        return None
    return ((end or utcnow()) - start).total_seconds()


def full_view(conversion: Conversion, gpu: GpuCompletion | None = None) -> ConversionView:
    """The API's view; `gpu` says how to complete a run awaiting a GPU."""
    return ConversionView(
        **item_view(conversion).model_dump(),
        kernel=conversion.kernel,
        source_name=conversion.source_name,
        spec_name=conversion.spec_name,
        options=conversion.options,
        origin=conversion.origin,
        submitted_by=conversion.submitted_by,
        worker_attempts=conversion.attempt,
        cancel_requested=conversion.cancel_requested,
        error=conversion.error,
        duration_s=elapsed(conversion.started_at, conversion.finished_at),
        stages=[stage_view(conversion.id, stage) for stage in conversion.stages],
        llm_tokens=conversion.llm_tokens,
        llm_cost_usd=conversion.llm_cost_usd,
        gpu=gpu,
        gpu_results_trust=conversion.gpu_results_trust,
    )


def page_view(rows: list[Conversion], total: int, limit: int, offset: int) -> ConversionPage:
    next_offset = offset + len(rows) if offset + len(rows) < total else None
    return ConversionPage(
        items=[item_view(row) for row in rows],
        total=total,
        limit=limit,
        offset=offset,
        next_offset=next_offset,
    )
