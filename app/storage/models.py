"""The service's tables. The conversions table doubles as the durable job queue
(status, lease owner and lease expiry), so a submission and its queue entry are
written in one transaction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from schemas.api import ConversionStatus

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[str]: JSON(),
    }


class Conversion(Base):
    __tablename__ = "conversions"
    __table_args__ = (Index("ix_conversions_status_queued_at", "status", "queued_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    operator: Mapped[str] = mapped_column(String(200), index=True)
    kernel: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default=ConversionStatus.QUEUED)
    outcome: Mapped[str | None] = mapped_column(String(16))
    gate_verdict: Mapped[str | None] = mapped_column(String(32))
    source_name: Mapped[str] = mapped_column(String(255))
    spec_name: Mapped[str] = mapped_column(String(255))
    source_sha256: Mapped[str] = mapped_column(String(64))
    spec_sha256: Mapped[str] = mapped_column(String(64))
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)
    origin: Mapped[dict[str, Any]] = mapped_column(default=dict)
    submitted_by: Mapped[str] = mapped_column(String(100))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    request_fingerprint: Mapped[str] = mapped_column(String(64))
    headline: Mapped[dict[str, Any]] = mapped_column(default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    llm_tokens: Mapped[int] = mapped_column(Integer, default=0)
    llm_cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # Run-relative folder of accepted GPU results the next job completes the run from.
    gpu_results: Mapped[str | None] = mapped_column(String(500))
    # Who sent them (schemas.api.ResultsTrust); kept after the completion has run.
    gpu_results_trust: Mapped[str | None] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    queued_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    stages: Mapped[list[StageExecution]] = relationship(
        back_populates="conversion",
        order_by="StageExecution.id",
        cascade="all, delete-orphan",
    )


class StageExecution(Base):
    __tablename__ = "stage_executions"
    __table_args__ = (UniqueConstraint("conversion_id", "stage", "attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str] = mapped_column(ForeignKey("conversions.id", ondelete="CASCADE"))
    stage: Mapped[str] = mapped_column(String(32))
    attempt: Mapped[int] = mapped_column(Integer)
    verdict: Mapped[str] = mapped_column(String(32))
    verdict_class: Mapped[str | None] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text, default="")
    report_path: Mapped[str | None] = mapped_column(String(500))
    # Deferred: status polls never need the (possibly large) report body.
    validator_output: Mapped[dict[str, Any]] = mapped_column(default=dict, deferred=True)
    started_at: Mapped[datetime] = mapped_column()
    finished_at: Mapped[datetime] = mapped_column()
    duration_s: Mapped[float] = mapped_column(Float)
    worker_attempt: Mapped[int] = mapped_column(Integer, default=1)

    conversion: Mapped[Conversion] = relationship(back_populates="stages")


class Artifact(Base):
    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("conversion_id", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str] = mapped_column(
        ForeignKey("conversions.id", ondelete="CASCADE"), index=True
    )
    path: Mapped[str] = mapped_column(String(500))
    kind: Mapped[str] = mapped_column(String(32))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class IrDump(Base):
    __tablename__ = "ir_dumps"
    __table_args__ = (UniqueConstraint("conversion_id", "side", "variant", "format"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str] = mapped_column(ForeignKey("conversions.id", ondelete="CASCADE"))
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifacts.id", ondelete="CASCADE"))
    side: Mapped[str] = mapped_column(String(16))
    variant: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(16))


class CuptiResult(Base):
    __tablename__ = "cupti_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str] = mapped_column(
        ForeignKey("conversions.id", ondelete="CASCADE"), index=True
    )
    stage_attempt: Mapped[int] = mapped_column(Integer)
    config: Mapped[str] = mapped_column(String(500))
    variant: Mapped[str | None] = mapped_column(String(200))
    baseline_us: Mapped[float | None] = mapped_column(Float)
    port_us: Mapped[float | None] = mapped_column(Float)
    ratio: Mapped[float | None] = mapped_column(Float)
    gpu: Mapped[str] = mapped_column(String(200), default="")
    driver: Mapped[str] = mapped_column(String(100), default="")
    clocks: Mapped[dict[str, Any]] = mapped_column(default=dict)
    toolchain: Mapped[dict[str, Any]] = mapped_column(default=dict)
    crate_versions: Mapped[dict[str, Any]] = mapped_column(default=dict)


class CorrectnessResult(Base):
    __tablename__ = "correctness_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str] = mapped_column(
        ForeignKey("conversions.id", ondelete="CASCADE"), index=True
    )
    stage_attempt: Mapped[int] = mapped_column(Integer)
    config: Mapped[str] = mapped_column(String(500))
    dtype: Mapped[str] = mapped_column(String(32), default="")
    seed: Mapped[int | None] = mapped_column(Integer)
    passed: Mapped[bool] = mapped_column(Boolean)
    max_abs_err: Mapped[float | None] = mapped_column(Float)
    max_rel_err: Mapped[float | None] = mapped_column(Float)
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)


class LlmUsage(Base):
    __tablename__ = "llm_usage"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str] = mapped_column(
        ForeignKey("conversions.id", ondelete="CASCADE"), index=True
    )
    stage: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(200))
    total_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebhookDelivery(Base):
    """Every delivery that reached the webhook. `delivery_id` is set (and unique)
    only for verified deliveries, so a forged request cannot burn a real id."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str | None] = mapped_column(String(100), unique=True)
    claimed_delivery_id: Mapped[str] = mapped_column(String(100), default="")
    event: Mapped[str] = mapped_column(String(64), default="")
    action: Mapped[str] = mapped_column(String(64), default="")
    signature_ok: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    payload_sha256: Mapped[str] = mapped_column(String(64))
    conversion_ids: Mapped[list[str]] = mapped_column(default=list)
    remote_addr: Mapped[str] = mapped_column(String(100), default="")
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversion_id: Mapped[str | None] = mapped_column(
        ForeignKey("conversions.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(64), index=True)
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
