"""The durable queue: conversions rows with status `queued`, claimed by a worker
under a lease it renews while the job runs. A worker that dies stops renewing;
once the lease expires another worker claims the conversion again and the
pipeline resumes from its checkpoint.

Every transition is a conditional UPDATE (compare-and-set on status and lease),
so two workers can never both own a conversion, on PostgreSQL or SQLite."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Update, and_, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from app.conversions import record_event
from app.storage.database import transaction
from app.storage.models import Conversion, utcnow
from schemas.api import ConversionStatus

CANDIDATES_PER_POLL = 8


def changed_rows(session: Session, statement: Update) -> int:
    """Run a conditional UPDATE and say how many rows it changed (0 or 1 here)."""
    result = cast(CursorResult[Any], session.execute(statement))
    return int(result.rowcount)


@dataclass(frozen=True)
class Claim:
    conversion_id: str
    worker_attempt: int
    owner: str


def claimable(now_clause: ColumnElement[bool]) -> ColumnElement[bool]:
    """Queued, or running under a lease that has expired."""
    return or_(
        Conversion.status == ConversionStatus.QUEUED,
        and_(Conversion.status == ConversionStatus.RUNNING, now_clause),
    )


def lease_expired() -> ColumnElement[bool]:
    return Conversion.lease_expires_at < utcnow()


def try_claim(
    sessions: sessionmaker[Session], conversion_id: str, owner: str, lease_s: float
) -> Claim | None:
    now = utcnow()
    with transaction(sessions) as session:
        changed = changed_rows(
            session,
            update(Conversion)
            .where(
                Conversion.id == conversion_id,
                Conversion.cancel_requested.is_(False),
                claimable(Conversion.lease_expires_at < now),
            )
            .values(
                status=ConversionStatus.RUNNING,
                lease_owner=owner,
                lease_expires_at=now + timedelta(seconds=lease_s),
                attempt=Conversion.attempt + 1,
                started_at=func.coalesce(Conversion.started_at, now),
                updated_at=now,
            )
            .execution_options(synchronize_session=False),
        )
        if changed != 1:
            return None
        attempt = session.scalar(select(Conversion.attempt).where(Conversion.id == conversion_id))
        record_event(
            session, "worker.claimed", f"claimed by {owner}", conversion_id, attempt=attempt
        )
    return Claim(conversion_id, int(attempt or 1), owner)


def settle_abandoned(sessions: sessionmaker[Session], max_attempts: int) -> list[str]:
    """End conversions whose worker died and that must not run again: those whose
    cancel was requested, and those that used up their attempts. Returns their ids."""
    now = utcnow()
    abandoned = and_(
        Conversion.status == ConversionStatus.RUNNING, Conversion.lease_expires_at < now
    )
    endings = (
        (Conversion.cancel_requested.is_(True), ConversionStatus.CANCELLED, None),
        (
            Conversion.attempt >= max_attempts,
            ConversionStatus.ERROR,
            f"the worker was lost {max_attempts} times",
        ),
    )
    settled: list[str] = []
    with transaction(sessions) as session:
        for condition, status, error in endings:
            ids = list(session.scalars(select(Conversion.id).where(abandoned, condition)))
            for conversion_id in ids:
                values: dict[str, object] = {"status": status, "finished_at": now}
                values |= {"lease_owner": None, "lease_expires_at": None}
                if error is not None:
                    values["error"] = error
                changed = changed_rows(
                    session,
                    update(Conversion)
                    .where(Conversion.id == conversion_id, abandoned)
                    .values(**values)
                    .execution_options(synchronize_session=False),
                )
                if changed == 1:
                    settled.append(conversion_id)
                    record_event(session, f"conversion.{status.value}", error or "", conversion_id)
    return settled


def claim_next(sessions: sessionmaker[Session], owner: str, lease_s: float) -> Claim | None:
    now = utcnow()
    with sessions() as session:
        candidates = session.scalars(
            select(Conversion.id)
            .where(claimable(Conversion.lease_expires_at < now))
            .order_by(Conversion.queued_at)
            .limit(CANDIDATES_PER_POLL)
        ).all()
    for conversion_id in candidates:
        claim = try_claim(sessions, conversion_id, owner, lease_s)
        if claim is not None:
            return claim
    return None


def renew(sessions: sessionmaker[Session], claim: Claim, lease_s: float) -> bool:
    """Extend the lease; False when this worker no longer owns the conversion."""
    with transaction(sessions) as session:
        changed = changed_rows(
            session,
            update(Conversion)
            .where(
                Conversion.id == claim.conversion_id,
                Conversion.lease_owner == claim.owner,
                Conversion.status == ConversionStatus.RUNNING,
            )
            .values(lease_expires_at=utcnow() + timedelta(seconds=lease_s))
            .execution_options(synchronize_session=False),
        )
        return changed == 1


def cancel_requested(sessions: sessionmaker[Session], conversion_id: str) -> bool:
    with sessions() as session:
        return bool(
            session.scalar(
                select(Conversion.cancel_requested).where(Conversion.id == conversion_id)
            )
        )


def finish(
    sessions: sessionmaker[Session],
    claim: Claim,
    status: ConversionStatus,
    error: str | None = None,
) -> bool:
    """Set a terminal status, if this worker still owns the conversion."""
    now = utcnow()
    with transaction(sessions) as session:
        values: dict[str, object] = {
            "status": status,
            "finished_at": now,
            "lease_owner": None,
            "lease_expires_at": None,
            "updated_at": now,
        }
        if error is not None:
            values["error"] = error
        changed = changed_rows(
            session,
            update(Conversion)
            .where(
                Conversion.id == claim.conversion_id,
                Conversion.lease_owner == claim.owner,
                Conversion.status == ConversionStatus.RUNNING,
            )
            .values(**values)
            .execution_options(synchronize_session=False),
        )
        if changed == 1:
            record_event(
                session,
                f"conversion.{status.value}",
                error or status.value,
                claim.conversion_id,
                attempt=claim.worker_attempt,
            )
        return changed == 1


def requeue(sessions: sessionmaker[Session], claim: Claim, reason: str) -> bool:
    """Give a conversion back to the queue (its job died); the next claim resumes it."""
    with transaction(sessions) as session:
        changed = changed_rows(
            session,
            update(Conversion)
            .where(
                Conversion.id == claim.conversion_id,
                Conversion.lease_owner == claim.owner,
                Conversion.status == ConversionStatus.RUNNING,
            )
            .values(
                status=ConversionStatus.QUEUED,
                lease_owner=None,
                lease_expires_at=None,
                updated_at=utcnow(),
            )
            .execution_options(synchronize_session=False),
        )
        if changed == 1:
            record_event(session, "worker.requeued", reason, claim.conversion_id)
        return changed == 1
