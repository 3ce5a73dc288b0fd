"""A run that stops at the GPU boundary is finished later from GPU results: the real
pipeline ports vector_add (a kernel the checkout's library does not hold) to
`awaiting_gpu`; `tileport gpu-run BUNDLE --upload URL` on this machine (no GPU)
sends the runner's own BLOCKED results, which are recorded while the run keeps
waiting; the real H200 result folder of vector_add (tests/stages/fixtures/gpu_runs)
is refused, because it was made from another bundle (another run, another library
build). test_h200_completion.py finishes a run from the H200 folder of its own
bundle."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_support import (
    AUTH,
    REPO,
    TOKEN,
    conversion_status,
    corpus_copy,
    pipeline_missing,
    wait_for,
)
from sqlalchemy import select
from test_browser import LiveServer

from app.api.main import create_app
from app.context import ServiceContext
from app.conversions import run_dir
from app.storage.models import Event
from app.worker.pool import WorkerPool

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(pipeline_missing() is not None, reason=str(pipeline_missing())),
]

H200_RUN = REPO / "tests" / "stages" / "fixtures" / "gpu_runs" / "h200-2026-11-29-vector_add"
RUN_TIMEOUT_S = 900.0


@pytest.fixture
def pool(context: ServiceContext, tmp_path: Path) -> Iterator[WorkerPool]:
    if context.engine.dialect.name != "sqlite":
        pytest.skip("the completion does not depend on the database: SQLite shows it")
    context.settings.source_root = corpus_copy(tmp_path / "corpus")
    context.settings.no_gpu = True
    workers = WorkerPool(context.settings, context.sessions, threads=1)
    workers.start()
    yield workers
    workers.stop()


def events(context: ServiceContext, conversion_id: str) -> list[Event]:
    with context.sessions() as session:
        return list(
            session.scalars(
                select(Event).where(Event.conversion_id == conversion_id).order_by(Event.id)
            )
        )


def result_files(folder: Path) -> list[tuple[str, tuple[str, bytes]]]:
    return [("files", (path.name, path.read_bytes())) for path in sorted(folder.iterdir())]


def test_a_run_awaiting_a_gpu_records_blocked_results_and_refuses_foreign_ones(
    client: TestClient, context: ServiceContext, pool: WorkerPool, tmp_path: Path
) -> None:
    body = {"source_path": "vector_add.py", "options": {"no_gpu": True}}
    cid = client.post("/v1/conversions", json=body, headers=AUTH).json()["id"]
    wait_for(
        lambda: conversion_status(client, cid) not in {"queued", "running"},
        RUN_TIMEOUT_S,
        "the run to settle",
        step=1.0,
    )
    view = client.get(f"/v1/conversions/{cid}").json()
    assert view["status"] == "awaiting_gpu", view["error"]
    assert view["gate_verdict"] == "AWAITING_GPU" and view["reached_gpu_boundary"]
    assert view["level"] == "IR exact, SASS-identical sm_90/sm_100"
    bundle = run_dir(context.settings, cid) / "host" / "bundle"
    assert view["gpu"]["bundle"] == "host/bundle"
    assert view["gpu"]["command"].startswith(f"tileport gpu-run {bundle} --upload ")

    # gpu-run here reaches no GPU: its BLOCKED results are recorded, the run keeps waiting.
    with LiveServer(create_app(context)) as live:
        url = f"{live.url}/v1/conversions/{cid}/gpu-results"
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "gpu-run", str(bundle), "--upload", url],
            env={**os.environ, "TILEPORT_API_TOKEN": TOKEN},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"uploaded to {url}" in done.stdout
    blocked = [e for e in events(context, cid) if e.kind == "gpu.results_blocked"]
    assert blocked and blocked[0].message.startswith("Nothing was run on a GPU")
    assert conversion_status(client, cid) == "awaiting_gpu"

    # The H200's folder was made from another bundle: refused, with every mismatch.
    url = f"/v1/conversions/{cid}/gpu-results"
    refused = client.post(url, files=result_files(H200_RUN), headers=AUTH)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_gpu_results"
    problems = "\n".join(error["detail"]["problems"])
    assert "correctness.json is for run standalone attempt 1" in problems
    assert "cdef fingerprint" in problems
