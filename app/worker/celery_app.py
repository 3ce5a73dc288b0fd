"""Scaled-out execution on Celery (Redis or RabbitMQ broker).

Queues: `tileport.cpu` runs the graph (one conversion per task, through the
same Executor as the embedded worker, so cancel, lease and resume behave the
same); `tileport.gpu.<arch>` runs GPU job bundles, one per GPU: start one
worker per GPU with `--concurrency 1` and CUDA_VISIBLE_DEVICES set.

    celery -A app.worker.celery_app worker -Q tileport.cpu -c 2
    CUDA_VISIBLE_DEVICES=0 celery -A app.worker.celery_app worker -Q tileport.gpu.sm_90 -c 1

Tasks are acknowledged late and requeued when their worker dies, and a task
only runs if it can claim the conversion in the database, so a redelivered
or duplicated message is harmless."""

from __future__ import annotations

import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

from celery import Celery

from app.github.report import notifier
from app.settings import Settings, load_settings
from app.storage.database import make_engine, make_session_factory
from app.worker import queue
from app.worker.executor import Executor
from app.worker.pool import worker_name

CPU_QUEUE = "tileport.cpu"
RUN_TASK = "tileport.run_conversion"
GPU_TASK = "tileport.gpu_job"
GPU_JOB_TIMEOUT_S = 3600
# A submission waits at most a few seconds for the broker, then answers 503.
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}


def gpu_queue(arch: str) -> str:
    return f"tileport.gpu.{arch}"


def make_celery(settings: Settings) -> Celery:
    # GPU jobs return results; a Redis broker keeps them too, RabbitMQ replies over rpc.
    backend = settings.broker_url if settings.broker_url.startswith("redis") else "rpc://"
    celery = Celery("tileport", broker=settings.broker_url, backend=backend)
    celery.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=CPU_QUEUE,
        task_routes={RUN_TASK: {"queue": CPU_QUEUE}},
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": 3600},
        task_ignore_result=True,
        broker_connection_timeout=3,
    )
    return celery


class CeleryDispatcher:
    def __init__(self, settings: Settings) -> None:
        self.celery = make_celery(settings)

    def dispatch(self, conversion_id: str) -> None:
        self.celery.send_task(
            RUN_TASK,
            args=[conversion_id],
            queue=CPU_QUEUE,
            task_id=uuid.uuid4().hex,
            retry_policy=PUBLISH_RETRY,
            ignore_result=True,
        )

    def ping(self) -> None:
        with self.celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)


def run_conversion(conversion_id: str, settings: Settings) -> str:
    """Claim and run one conversion; returns what happened, for the task's log."""
    engine = make_engine(settings.resolved_database_url)
    sessions = make_session_factory(engine)
    try:
        claim = queue.try_claim(sessions, conversion_id, worker_name(0), settings.lease_s)
        if claim is None:
            return "not claimable (finished, cancelled or owned by another worker)"
        dispatcher = CeleryDispatcher(settings)
        executor = Executor(
            settings, sessions, notifier(settings, sessions), on_requeue=dispatcher.dispatch
        )
        status = executor.run(claim, threading.Event())
        return status.value if status is not None else "requeued"
    finally:
        engine.dispose()


def run_gpu_job(bundle: str, arch: str) -> dict[str, Any]:
    """Run a GPU job bundle on this worker's GPU with `tileport gpu-run`."""
    completed = subprocess.run(
        ["tileport", "gpu-run", str(Path(bundle))],
        capture_output=True,
        text=True,
        timeout=GPU_JOB_TIMEOUT_S,
        check=False,
    )
    return {
        "arch": arch,
        "returncode": completed.returncode,
        "output_tail": (completed.stdout + completed.stderr)[-4000:],
    }


app = make_celery(load_settings())


@app.task(name=RUN_TASK)  # type: ignore[untyped-decorator]
def run_conversion_task(conversion_id: str) -> str:
    return run_conversion(conversion_id, load_settings())


@app.task(name=GPU_TASK, ignore_result=False)  # type: ignore[untyped-decorator]
def gpu_job_task(bundle: str, arch: str) -> dict[str, Any]:
    return run_gpu_job(bundle, arch)


def submit_gpu_job(settings: Settings, bundle: Path, arch: str) -> Any:
    """Queue a GPU bundle for the workers of one architecture; returns the AsyncResult."""
    celery = make_celery(settings)
    return celery.send_task(GPU_TASK, args=[str(bundle), arch], queue=gpu_queue(arch))
