"""Everything one service instance holds: settings, database, metrics, and the
dispatcher that hands queued conversions to workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.metrics import ServiceMetrics
from app.settings import Settings, WorkerMode
from app.storage.database import make_engine, make_session_factory
from app.storage.models import Conversion
from app.worker.dispatch import Dispatcher, TableQueueDispatcher


@dataclass
class ServiceContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    metrics: ServiceMetrics
    dispatcher: Dispatcher
    # What `tileport serve` found missing at start (tileport doctor's required
    # checks, each with its fix); /readyz is not ready while any is.
    missing_requirements: list[str] = field(default_factory=list)


def count_by_status(sessions: sessionmaker[Session]) -> dict[str, int]:
    with sessions() as session:
        rows = session.execute(
            select(Conversion.status, func.count()).group_by(Conversion.status)
        ).all()
    return {status: int(count) for status, count in rows}


def default_dispatcher(settings: Settings) -> Dispatcher:
    if settings.worker_mode is WorkerMode.CELERY:
        # Imported here: the embedded mode never needs Celery loaded.
        from app.worker.celery_app import CeleryDispatcher

        return CeleryDispatcher(settings)
    return TableQueueDispatcher()


def build_context(settings: Settings, dispatcher: Dispatcher | None = None) -> ServiceContext:
    engine = make_engine(settings.resolved_database_url)
    sessions = make_session_factory(engine)
    return ServiceContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        metrics=ServiceMetrics(partial(count_by_status, sessions)),
        dispatcher=dispatcher or default_dispatcher(settings),
    )
