"""Celery mode against the real brokers (Redis, RabbitMQ): routing of graph and
GPU tasks, the API dispatching through the broker, a real Celery worker
consuming tasks, and (where the pipeline is complete) a whole run, which stops at
the GPU boundary and goes to a GPU worker of its architecture; on this machine
without a GPU that worker's result is the runner's own BLOCKED, recorded on the
run."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kombu.connection import Connection
from service_support import (
    AUTH,
    conversion_status,
    corpus_copy,
    make_context,
    pipeline_missing,
    service_env,
    stop_process,
    submit,
    wait_for,
)
from sqlalchemy import select

from app.api.main import create_app
from app.context import ServiceContext
from app.conversions import run_dir
from app.settings import Settings
from app.storage.models import Event
from app.worker.celery_app import CPU_QUEUE, CeleryDispatcher, gpu_queue
from schemas.gpu import GpuRunReport

BROKERS = {
    "redis": "redis://127.0.0.1:6379/13",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//",
}
TEST_QUEUES = (CPU_QUEUE, gpu_queue("sm_90"), gpu_queue("sm_100"))


def connect(url: str, **options: Any) -> Any:
    return Connection(url, **options)  # type: ignore[no-untyped-call]


def reachable(url: str) -> bool:
    try:
        with connect(url, connect_timeout=3) as connection:
            connection.ensure_connection(max_retries=1)
            return True
    except Exception:
        return False


def queue_length(url: str, name: str) -> int:
    with connect(url) as connection, connection.channel() as channel:
        try:
            return int(channel.queue_declare(queue=name, passive=True).message_count)
        except Exception:
            return 0


def purge(url: str) -> None:
    with connect(url) as connection:
        for name in TEST_QUEUES:
            try:
                connection.SimpleQueue(name).clear()
            except Exception:
                continue


@pytest.fixture(params=sorted(BROKERS))
def broker(request: pytest.FixtureRequest) -> Iterator[str]:
    url = BROKERS[request.param]
    if not reachable(url):
        pytest.skip(f"{request.param} is not reachable at {url}")
    purge(url)
    yield url
    purge(url)


@pytest.fixture
def celery_settings(settings: Settings, broker: str) -> Settings:
    return settings.model_copy(update={"worker_mode": "celery", "broker_url": broker})


@pytest.fixture
def celery_context(celery_settings: Settings) -> Iterator[ServiceContext]:
    context = make_context(celery_settings, CeleryDispatcher(celery_settings))
    yield context
    context.engine.dispose()


@pytest.fixture
def celery_client(celery_context: ServiceContext) -> Iterator[TestClient]:
    with TestClient(create_app(celery_context), headers=AUTH) as client:
        yield client


def test_submissions_go_to_the_cpu_queue(
    celery_client: TestClient, celery_context: ServiceContext, broker: str
) -> None:
    assert submit(celery_client).status_code == 202
    assert submit(celery_client).status_code == 202
    assert queue_length(broker, CPU_QUEUE) == 2
    ready = celery_client.get("/readyz").json()
    assert ready["checks"]["queue"] == "ok"


def test_gpu_jobs_go_to_their_architectures_queue(
    celery_settings: Settings, broker: str, tmp_path: Path
) -> None:
    dispatcher = CeleryDispatcher(celery_settings)
    dispatcher.dispatch_gpu("c1", tmp_path / "bundle", "sm_90")
    dispatcher.dispatch_gpu("c2", tmp_path / "bundle", "sm_90")
    dispatcher.dispatch_gpu("c3", tmp_path / "bundle", "sm_100")
    assert queue_length(broker, gpu_queue("sm_90")) == 2
    assert queue_length(broker, gpu_queue("sm_100")) == 1
    assert queue_length(broker, CPU_QUEUE) == 0


def test_an_unreachable_broker_is_503_and_not_ready(settings: Settings) -> None:
    down = settings.model_copy(
        update={"worker_mode": "celery", "broker_url": "redis://127.0.0.1:1/0"}
    )
    context = make_context(down, CeleryDispatcher(down))
    with TestClient(create_app(context)) as client:
        response = submit(client)
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "broker_unavailable"
        assert client.get("/readyz").status_code == 503
    context.engine.dispose()


def celery_worker(
    settings: Settings, log: Path, queue: str = CPU_QUEUE, pool: tuple[str, ...] = ("-P", "solo")
) -> subprocess.Popen[bytes]:
    env = service_env(
        settings,
        WORKER_MODE="celery",
        BROKER_URL=settings.broker_url,
        TILEPORT_NO_GPU="1",
        GPU_QUEUES=",".join(settings.gpu_queues),
        # `tileport gpu-run` is this environment's
        PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    )
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "app.worker.celery_app",
        "worker",
        "-Q",
        queue,
        # A node name of its own: RabbitMQ refuses a second worker's pidbox of the same name.
        "-n",
        f"{queue}.{uuid.uuid4().hex[:8]}@%h",
        *pool,
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "INFO",
    ]
    with log.open("ab") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_worker_consumes_tasks_and_skips_what_it_cannot_claim(
    celery_client: TestClient,
    celery_context: ServiceContext,
    celery_settings: Settings,
    broker: str,
    tmp_path: Path,
) -> None:
    cid = submit(celery_client).json()["id"]
    celery_client.post(f"/v1/conversions/{cid}/cancel", headers=AUTH)
    log = tmp_path / "celery.log"
    worker = celery_worker(celery_settings, log)
    try:
        wait_for(lambda: queue_length(broker, CPU_QUEUE) == 0, 240, "the task to be consumed")
        wait_for(lambda: "not claimable" in log.read_text(errors="replace"), 30, "the task's end")
    finally:
        stop_process(worker)
    assert conversion_status(celery_client, cid) == "cancelled"


def gpu_events(context: ServiceContext, conversion_id: str, kind: str) -> list[Event]:
    with context.sessions() as session:
        return list(
            session.scalars(
                select(Event)
                .where(Event.conversion_id == conversion_id, Event.kind == kind)
                .order_by(Event.id)
            )
        )


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(pipeline_missing() is not None, reason=str(pipeline_missing()))
def test_a_run_at_the_gpu_boundary_goes_to_the_gpu_worker_of_its_architecture(
    celery_client: TestClient,
    celery_context: ServiceContext,
    celery_settings: Settings,
    broker: str,
    tmp_path: Path,
) -> None:
    # Each broker is shown once, on one database: the route does not depend on the pair.
    pairing = {"redis": "sqlite", "rabbitmq": "postgresql"}
    database = celery_context.engine.dialect.name
    if pairing[next(name for name, url in BROKERS.items() if url == broker)] != database:
        pytest.skip("this broker's run is shown on the other database")
    celery_settings.source_root = corpus_copy(tmp_path / "corpus")
    celery_settings.gpu_queues = ["sm_90", "sm_100"]
    cpu = celery_worker(celery_settings, tmp_path / "celery.log")
    gpu = celery_worker(
        celery_settings, tmp_path / "gpu.log", gpu_queue("sm_90"), ("--concurrency", "1")
    )
    try:
        body = {"source_path": "softmax.py", "options": {"gpu_arch": "sm_90"}}
        cid = celery_client.post("/v1/conversions", json=body, headers=AUTH).json()["id"]
        wait_for(
            lambda: conversion_status(celery_client, cid) not in {"queued", "running"},
            900,
            "the conversion to settle",
            step=1.0,
        )
        view = celery_client.get(f"/v1/conversions/{cid}").json()
        assert view["status"] == "awaiting_gpu", view["error"]
        assert view["stages"] and view["stages"][-1]["stage"] == "final_gate"
        # The dispatch is part of the run's ending, after its status is written.
        wait_for(
            lambda: bool(gpu_events(celery_context, cid, "gpu.dispatched")), 60, "the GPU dispatch"
        )
        [sent] = gpu_events(celery_context, cid, "gpu.dispatched")
        assert sent.message == "bundle sent to tileport.gpu.sm_90"
        wait_for(
            lambda: gpu_events(celery_context, cid, "gpu.results_blocked"), 300, "the GPU result"
        )
        # Two more jobs at once on the one GPU worker: they run one after the other.
        bundle = run_dir(celery_settings, cid) / "host" / "bundle"
        dispatcher = CeleryDispatcher(celery_settings)
        dispatcher.dispatch_gpu(cid, bundle, "sm_90")
        dispatcher.dispatch_gpu(cid, bundle, "sm_90")
        wait_for(
            lambda: len(gpu_events(celery_context, cid, "gpu.results_blocked")) == 3,
            300,
            "three GPU results",
        )
    finally:
        stop_process(gpu)
        stop_process(cpu)
    jobs = gpu_events(celery_context, cid, "gpu.job_finished")
    assert [job.data["returncode"] for job in jobs] == [2, 2, 2]  # gpu-run: BLOCKED
    spans = sorted(
        (
            datetime.fromisoformat(job.data["started_at"]),
            datetime.fromisoformat(job.data["finished_at"]),
        )
        for job in jobs
    )
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans)), spans
    blocked = gpu_events(celery_context, cid, "gpu.results_blocked")[0]
    assert blocked.message.startswith("Nothing was run on a GPU")
    kept = run_dir(celery_settings, cid) / blocked.data["results"]
    run = GpuRunReport.model_validate_json((kept / GpuRunReport.FILE_NAME).read_text())
    assert not run.ran_on_gpu
    assert run.bundle_sha256 == hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
    assert conversion_status(celery_client, cid) == "awaiting_gpu"
