"""A job (the pipeline's process for one run) is bounded as a whole: past
JOB_MEMORY_MB of resident memory over its process tree, or JOB_WALL_S, the worker
stops it and the run ends in error saying which limit it crossed. The jobs here are
real: a submitted conversion run by the worker's executor."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from fastapi.testclient import TestClient
from service_support import submit

from app.context import ServiceContext
from app.settings import Settings
from app.storage.models import Conversion
from app.worker import queue
from app.worker.executor import Executor, resident_bytes
from schemas.api import ConversionStatus


def run_claimed(context: ServiceContext, settings: Settings, conversion_id: str) -> Conversion:
    claim = queue.try_claim(context.sessions, conversion_id, "w", 30.0)
    assert claim is not None
    started = time.monotonic()
    status = Executor(settings, context.sessions).run(claim, threading.Event())
    assert status is ConversionStatus.ERROR
    assert time.monotonic() - started < 60
    with context.sessions() as session:
        return session.get_one(Conversion, conversion_id)


def test_a_job_past_its_memory_cap_is_stopped(client: TestClient, context: ServiceContext) -> None:
    cid = submit(client).json()["id"]
    capped = context.settings.model_copy(update={"job_memory_mb": 8})
    row = run_claimed(context, capped, cid)
    assert row.error is not None and "more than JOB_MEMORY_MB (8 MiB); stopped" in row.error


def test_a_job_past_its_wall_clock_limit_is_stopped(
    client: TestClient, context: ServiceContext
) -> None:
    cid = submit(client).json()["id"]
    capped = context.settings.model_copy(update={"job_wall_s": 0.5})
    row = run_claimed(context, capped, cid)
    assert row.error == "the job ran longer than JOB_WALL_S (0.5 s); stopped"


def test_the_memory_of_a_process_tree_counts_its_children() -> None:
    grow = "b = bytearray(64 << 20); import time; time.sleep(30)"
    spawn = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grow!r}])"
    parent = subprocess.Popen([sys.executable, "-c", spawn])
    try:
        deadline = time.monotonic() + 20
        while resident_bytes(parent.pid) < 64 << 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert resident_bytes(parent.pid) >= 64 << 20
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait()
