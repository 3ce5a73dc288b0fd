"""Running one claimed conversion: the pipeline runs in a child process (see
job.py) so that a cancel can stop it at any point, a crash of the pipeline
cannot take the worker down, and the worker's process never runs the graph.
While the child runs, this side renews the lease and watches for a cancel."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from app.conversions import record_event, run_dir
from app.settings import Settings
from app.storage.database import transaction
from app.worker import queue
from app.worker.checkpoints import prune
from app.worker.ingest import SERVICE_DIR, ingest_run
from app.worker.job import EXIT_AWAITING_GPU, EXIT_BAD_REQUEST, EXIT_DONE, EXIT_PIPELINE_ERROR
from schemas.api import ConversionStatus

log = logging.getLogger("tileport.worker")

KILL_GRACE_S = 10.0
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
AfterTerminal = Callable[[str], None]


def job_log(settings: Settings, conversion_id: str, attempt: int) -> Path:
    # Outside the run layout's stage directories, which a fresh run empties.
    folder = run_dir(settings, conversion_id) / SERVICE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"worker-{attempt}.log"


def spawn_job(settings: Settings, claim: queue.Claim) -> subprocess.Popen[bytes]:
    log_path = job_log(settings, claim.conversion_id, claim.worker_attempt)
    command = [
        sys.executable,
        "-m",
        "app.worker.job",
        claim.conversion_id,
        str(claim.worker_attempt),
        "--parent-pid",
        str(os.getpid()),
    ]
    with log_path.open("ab") as log_file:
        child = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    assert child.stdin is not None
    child.stdin.write(settings.model_dump_json().encode())
    child.stdin.close()
    return child


def process_children() -> dict[int, list[int]]:
    """Every process's children, by parent pid (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        # The command name may hold spaces and parentheses: the fields follow the last ')'.
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def process_tree(root: int) -> list[int]:
    """`root` and every process below it, sandboxed steps included."""
    children = process_children()
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def resident_bytes(root: int) -> int:
    """Resident memory of the job's whole process tree (shared pages counted in each
    process: an upper bound, which is what a cap needs)."""
    total = 0
    for pid in process_tree(root):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
        except (OSError, IndexError, ValueError):
            continue
    return total


def stop_job(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the job's process group (the pipeline's own tools too), then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


class Executor:
    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        after_terminal: AfterTerminal | None = None,
        on_requeue: Callable[[str], None] | None = None,
        on_awaiting_gpu: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.after_terminal = after_terminal
        self.on_requeue = on_requeue
        self.on_awaiting_gpu = on_awaiting_gpu

    def run(self, claim: queue.Claim, stop: threading.Event) -> ConversionStatus | None:
        """Run the job to its end. Returns the status it settled in (terminal, or
        awaiting a GPU), or None when the conversion went back to the queue or another
        worker owns it now."""
        child = spawn_job(self.settings, claim)
        outcome = self.watch(claim, child, stop)
        if outcome is not None:
            self.finalize(claim.conversion_id, outcome is ConversionStatus.AWAITING_GPU)
        return outcome

    def watch(
        self, claim: queue.Claim, child: subprocess.Popen[bytes], stop: threading.Event
    ) -> ConversionStatus | None:
        settings = self.settings
        renew_every = settings.lease_s / 3
        started = last_renewal = time.monotonic()
        while True:
            try:
                code = child.wait(timeout=settings.poll_s)
            except subprocess.TimeoutExpired:
                pass
            else:
                return self.settle(claim, code)
            over = self.over_limits(child, time.monotonic() - started)
            if over is not None:
                stop_job(child)
                return self.mark(claim, ConversionStatus.ERROR, over)
            if queue.cancel_requested(self.sessions, claim.conversion_id):
                stop_job(child)
                return self.mark(claim, ConversionStatus.CANCELLED, "cancelled while running")
            if stop.is_set():
                stop_job(child)
                self.requeue(claim, "the worker shut down")
                return None
            if time.monotonic() - last_renewal >= renew_every:
                if not queue.renew(self.sessions, claim, settings.lease_s):
                    log.warning("lost the lease on %s; stopping its job", claim.conversion_id)
                    stop_job(child)
                    return None
                last_renewal = time.monotonic()

    def over_limits(self, child: subprocess.Popen[bytes], elapsed_s: float) -> str | None:
        """Why the job must stop (JOB_WALL_S, JOB_MEMORY_MB), or None. Its sandboxed
        steps have their own, tighter limits; these bound the job as a whole."""
        settings = self.settings
        if elapsed_s > settings.job_wall_s:
            return f"the job ran longer than JOB_WALL_S ({settings.job_wall_s:g} s); stopped"
        used = resident_bytes(child.pid)
        if used > settings.job_memory_mb << 20:
            return (
                f"the job used {used >> 20} MiB, more than JOB_MEMORY_MB "
                f"({settings.job_memory_mb} MiB); stopped"
            )
        return None

    def settle(self, claim: queue.Claim, code: int) -> ConversionStatus | None:
        if code == EXIT_DONE:
            return self.mark(claim, ConversionStatus.FINISHED)
        if code == EXIT_AWAITING_GPU:
            return self.mark(claim, ConversionStatus.AWAITING_GPU)
        if code == EXIT_PIPELINE_ERROR:
            return self.mark(claim, ConversionStatus.ERROR)
        if code == EXIT_BAD_REQUEST:
            return self.mark(claim, ConversionStatus.ERROR, "the job could not load its request")
        if queue.cancel_requested(self.sessions, claim.conversion_id):
            return self.mark(claim, ConversionStatus.CANCELLED, "cancelled while running")
        reason = f"the job process ended with code {code}"
        if claim.worker_attempt >= self.settings.max_attempts:
            return self.mark(claim, ConversionStatus.ERROR, reason)
        self.requeue(claim, reason)
        return None

    def mark(
        self, claim: queue.Claim, status: ConversionStatus, error: str | None = None
    ) -> ConversionStatus | None:
        # The run's files go into the store first: a client that sees the terminal
        # status finds its artifacts, reports and IR dumps already there.
        self.attempt_step(
            "ingest",
            claim.conversion_id,
            lambda: ingest_run(self.sessions, self.settings, claim.conversion_id),
        )
        return status if queue.finish(self.sessions, claim, status, error) else None

    def requeue(self, claim: queue.Claim, reason: str) -> None:
        if queue.requeue(self.sessions, claim, reason) and self.on_requeue is not None:
            self.on_requeue(claim.conversion_id)

    def finalize(self, conversion_id: str, awaiting_gpu: bool = False) -> None:
        """Work after the run settled; each step is logged, none undoes the status. A run
        awaiting a GPU keeps its checkpoints (its completion forks them) and goes to a
        GPU queue when there is one for it."""
        steps: list[tuple[str, Callable[[], None]]] = []
        if not awaiting_gpu:
            url = self.settings.resolved_database_url
            steps.append(("prune", lambda: prune(url, conversion_id)))
        if self.after_terminal is not None:
            hook = self.after_terminal
            steps.append(("notify", lambda: hook(conversion_id)))
        if awaiting_gpu and self.on_awaiting_gpu is not None:
            gpu = self.on_awaiting_gpu
            steps.append(("gpu_dispatch", lambda: gpu(conversion_id)))
        for name, step in steps:
            self.attempt_step(name, conversion_id, step)

    def attempt_step(self, name: str, conversion_id: str, step: Callable[[], None]) -> None:
        """Runs one step of a run's ending; a failure is logged and recorded, not raised."""
        try:
            step()
        except Exception as error:
            log.exception("%s failed for %s", name, conversion_id)
            with transaction(self.sessions) as session:
                record_event(
                    session,
                    f"finalize.{name}_failed",
                    f"{type(error).__name__}: {error}"[:1000],
                    conversion_id,
                )
