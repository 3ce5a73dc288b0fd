"""The embedded worker: a few threads that poll the conversions table, claim
one conversion each and run it through the Executor."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.worker import queue
from app.worker.executor import AfterTerminal, Executor

log = logging.getLogger("tileport.worker")


def worker_name(index: int) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{index}:{uuid.uuid4().hex[:6]}"


class WorkerPool:
    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        threads: int | None = None,
        after_terminal: AfterTerminal | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.size = threads or settings.worker_threads
        self.executor = Executor(settings, sessions, after_terminal)
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for index in range(self.size):
            thread = threading.Thread(
                target=self.loop, args=(worker_name(index),), name=f"tileport-worker-{index}"
            )
            thread.daemon = True
            thread.start()
            self.threads.append(thread)

    def loop(self, owner: str) -> None:
        settings = self.settings
        while not self.stopping.is_set():
            try:
                for conversion_id in queue.settle_abandoned(self.sessions, settings.max_attempts):
                    self.executor.finalize(conversion_id)
                claim = queue.claim_next(self.sessions, owner, settings.lease_s)
                if claim is None:
                    self.stopping.wait(settings.poll_s)
                    continue
                log.info("running %s (attempt %d)", claim.conversion_id, claim.worker_attempt)
                self.executor.run(claim, self.stopping)
            except Exception:
                # A database hiccup must not end the thread; try again after a pause.
                log.exception("worker loop error")
                self.stopping.wait(settings.poll_s)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming; running jobs are stopped and handed back to the queue."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout)
