"""Scaled-out execution on Celery (Redis or RabbitMQ broker).

Queues: `tileport.cpu` runs the graph (one conversion per task, through the
same Executor as the embedded worker, so cancel, lease and resume behave the
same) and records what GPU jobs returned; `tileport.gpu.<arch>` runs GPU job
bundles, one per GPU: start one worker per GPU with `--concurrency 1` and
CUDA_VISIBLE_DEVICES set.

    celery -A app.worker.celery_app worker -Q tileport.cpu -c 2
    CUDA_VISIBLE_DEVICES=0 celery -A app.worker.celery_app worker -Q tileport.gpu.sm_90 -c 1

A run that stops at the GPU boundary goes to the GPU queue of its architecture
(RunOptions.gpu_arch, else the first of GPU_QUEUES) unless it asked for no GPU.
The GPU worker runs `tileport gpu-run` on the bundle (on the artifact volume it
shares with the CPU workers) and returns the result folder's files; a linked
task on `tileport.cpu` checks and keeps them, and queues the run to finish from
them when a GPU ran (`app.gpu_results`).

Tasks are acknowledged late and requeued when their worker dies, and a task
only runs if it can claim the conversion in the database, so a redelivered
or duplicated message is harmless."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery, signature
from sqlalchemy.orm import Session, sessionmaker

from app import conversions
from app.errors import ApiError
from app.github.report import notifier
from app.gpu_results import accept_results, gpu_queue_arch
from app.settings import Settings, load_settings
from app.storage.database import make_engine, make_session_factory, transaction
from app.storage.models import Conversion, utcnow
from app.worker import queue
from app.worker.executor import Executor
from app.worker.pool import worker_name
from nodes.gpu_completion import bundle_dir
from schemas.gpu import RESULT_FILES
from schemas.run_layout import RunLayout
from toolchain.env import REPO_ROOT, toolchain_env
from toolchain.sandbox import PATH, SandboxUnavailable, gpu_sandbox, open_output

CPU_QUEUE = "tileport.cpu"
RUN_TASK = "tileport.run_conversion"
GPU_TASK = "tileport.gpu_job"
GPU_RESULTS_TASK = "tileport.gpu_results"
BUNDLE_RESULTS = "results"  # where `tileport gpu-run` writes in the bundle by default
GPU_JOB_TIMEOUT_S = 3600
GPU_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
EXIT_NO_SANDBOX = 126  # the job did not run: no sandbox can be made here
PACKAGES = ("app", "graph", "nodes", "schemas", "tileir", "toolchain")  # what `tileport` runs
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
        task_routes={RUN_TASK: {"queue": CPU_QUEUE}, GPU_RESULTS_TASK: {"queue": CPU_QUEUE}},
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

    def dispatch_gpu(self, conversion_id: str, bundle: Path, arch: str) -> None:
        """Queue the bundle for the GPU workers of `arch`; what the job returns goes to
        the GPU results task on the CPU queue."""
        self.celery.send_task(
            GPU_TASK,
            args=[conversion_id, str(bundle), arch],
            queue=gpu_queue(arch),
            task_id=uuid.uuid4().hex,
            retry_policy=PUBLISH_RETRY,
            link=signature(GPU_RESULTS_TASK, queue=CPU_QUEUE),
        )

    def ping(self) -> None:
        with self.celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)


def gpu_dispatcher(
    settings: Settings, sessions: sessionmaker[Session], dispatcher: CeleryDispatcher
) -> Callable[[str], None]:
    """The executor's hook for a run that stopped at the GPU boundary."""

    def dispatch(conversion_id: str) -> None:
        with sessions() as session:
            arch = gpu_queue_arch(settings, conversions.get(session, conversion_id))
        if arch is None:
            return
        root = conversions.run_dir(settings, conversion_id)
        dispatcher.dispatch_gpu(conversion_id, bundle_dir(RunLayout(root)), arch)
        with transaction(sessions) as session:
            conversions.record_event(
                session, "gpu.dispatched", f"bundle sent to {gpu_queue(arch)}", conversion_id
            )

    return dispatch


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
            settings,
            sessions,
            notifier(settings, sessions),
            on_requeue=dispatcher.dispatch,
            on_awaiting_gpu=gpu_dispatcher(settings, sessions, dispatcher),
        )
        status = executor.run(claim, threading.Event())
        return status.value if status is not None else "requeued"
    finally:
        engine.dispose()


def run_gpu_job(bundle: str, arch: str) -> dict[str, Any]:
    """Run a GPU job bundle on this worker's GPU with `tileport gpu-run`, in the
    sandbox (toolchain.sandbox): the bundle and this package read-only, only the
    bundle's results folder writable. Without a sandbox, nothing runs."""
    root = Path(bundle).resolve()
    results = root / BUNDLE_RESULTS
    results.mkdir(exist_ok=True)
    packages = [REPO_ROOT / name for name in PACKAGES]
    env = toolchain_env({"PATH": PATH, "LANG": "C.UTF-8", "PYTHONPATH": str(REPO_ROOT)})
    env.update({k: os.environ[k] for k in GPU_ENV if k in os.environ})
    tileport = Path(sys.executable).parent / "tileport"
    command = [str(tileport), "gpu-run", str(root), "--out", str(results)]
    try:
        launch = gpu_sandbox(results, [root, *packages], env).launch(command)
    except SandboxUnavailable as error:
        return {"arch": arch, "returncode": EXIT_NO_SANDBOX, "output_tail": str(error)}
    completed = subprocess.run(
        launch.argv,
        env=launch.env,
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


def result_files(results: Path) -> dict[str, str]:
    """The result files the sandboxed job left: plain files, never read through a link."""
    files: dict[str, str] = {}
    for name in RESULT_FILES:
        try:
            with open_output(results, name) as handle:
                files[name] = handle.read().decode("utf-8")
        except (OSError, ValueError):  # missing, a link, not a regular file, not UTF-8
            continue
    return files


def gpu_job(conversion_id: str, bundle: str, arch: str) -> dict[str, Any]:
    """One GPU job for a conversion: `run_gpu_job`, then the result folder's files (none
    when gpu-run did not get that far), where and when it ran."""
    results = Path(bundle) / BUNDLE_RESULTS
    shutil.rmtree(results, ignore_errors=True)  # never send an earlier job's files
    started = utcnow().isoformat()
    try:
        outcome = run_gpu_job(bundle, arch)
    except (OSError, subprocess.SubprocessError) as error:  # gpu-run could not be run
        outcome = {
            "arch": arch,
            "returncode": None,
            "output_tail": f"{type(error).__name__}: {error}",
        }
    files = result_files(results)
    return {
        **outcome,
        "conversion_id": conversion_id,
        "worker": socket.gethostname(),
        "started_at": started,
        "finished_at": utcnow().isoformat(),
        "files": files,
    }


def record_gpu_job(settings: Settings, job: dict[str, Any]) -> str:
    """Keep what a GPU job returned: an event, and its result folder when it wrote one
    (checked, and the run queued to finish from it when a GPU ran)."""
    conversion_id = str(job["conversion_id"])
    engine = make_engine(settings.resolved_database_url)
    sessions = make_session_factory(engine)
    try:
        with sessions() as session:
            if session.get(Conversion, conversion_id) is None:
                return f"no conversion {conversion_id}"
        facts = {key: job.get(key) for key in ("arch", "worker", "returncode")}
        facts |= {"started_at": job.get("started_at"), "finished_at": job.get("finished_at")}
        with transaction(sessions) as session:
            conversions.record_event(
                session,
                "gpu.job_finished",
                f"gpu-run on {job.get('arch')} exited {job.get('returncode')}",
                conversion_id,
                **facts,
                output_tail=str(job.get("output_tail", ""))[-1000:],
            )
        files = {str(name): str(text).encode() for name, text in dict(job["files"]).items()}
        if not files:
            return "no result folder"
        try:
            arrival = accept_results(
                sessions, settings, conversion_id, files, f"gpu:{job.get('arch')}"
            )
        except ApiError as error:
            with transaction(sessions) as session:
                conversions.record_event(
                    session, "gpu.results_refused", error.message, conversion_id, **error.detail
                )
            return f"refused: {error.message}"
        if arrival.resumed:
            CeleryDispatcher(settings).dispatch(conversion_id)
        return f"kept {arrival.results}; resumed: {arrival.resumed}"
    finally:
        engine.dispose()


@app.task(name=GPU_TASK)  # type: ignore[untyped-decorator]
def gpu_job_task(conversion_id: str, bundle: str, arch: str) -> dict[str, Any]:
    return gpu_job(conversion_id, bundle, arch)


@app.task(name=GPU_RESULTS_TASK)  # type: ignore[untyped-decorator]
def gpu_results_task(job: dict[str, Any]) -> str:
    return record_gpu_job(load_settings(), job)
