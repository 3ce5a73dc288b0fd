"""Celery mode: conversions whose worker died (lease expired) are handed to the
broker again, in case the broker did not redeliver their task itself."""

from __future__ import annotations

import logging
import threading

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.github.report import notifier
from app.settings import Settings
from app.storage.models import Conversion, utcnow
from app.worker import queue
from app.worker.dispatch import Dispatcher
from app.worker.executor import Executor
from schemas.api import ConversionStatus

log = logging.getLogger("tileport.reaper")


def expired_leases(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(
            session.scalars(
                select(Conversion.id).where(
                    Conversion.status == ConversionStatus.RUNNING,
                    Conversion.lease_expires_at < utcnow(),
                )
            )
        )


def reap_once(settings: Settings, sessions: sessionmaker[Session], dispatcher: Dispatcher) -> int:
    executor = Executor(settings, sessions, notifier(settings, sessions))
    for conversion_id in queue.settle_abandoned(sessions, settings.max_attempts):
        executor.finalize(conversion_id)
    lost = expired_leases(sessions)
    for conversion_id in lost:
        dispatcher.dispatch(conversion_id)
    return len(lost)


class LeaseReaper:
    def __init__(
        self, settings: Settings, sessions: sessionmaker[Session], dispatcher: Dispatcher
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.dispatcher = dispatcher
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, name="tileport-reaper", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def loop(self) -> None:
        while not self.stopping.wait(self.settings.lease_s):
            try:
                count = reap_once(self.settings, self.sessions, self.dispatcher)
            except Exception:
                log.exception("lease reaper pass failed")
                continue
            if count:
                log.info("re-dispatched %d conversions whose worker was lost", count)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
