"""Whole conversions through the real pipeline (graph.runner.run_pipeline with
the real stages) on the example corpus: the embedded worker, a worker killed
mid-run and restarted, cancel of a running job, and the PR bot's report at
the end. Skipped, with the reason, where the pipeline is not complete."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from github_fake import FakeGitHub, Repo
from service_support import (
    AUTH,
    conversion_status,
    corpus_copy,
    pipeline_missing,
    service_env,
    stop_process,
    wait_for,
)
from sqlalchemy import select

from app.context import ServiceContext
from app.conversions import run_dir
from app.github.report import notifier
from app.storage.models import Artifact, Event, StageExecution
from app.worker.checkpoints import open_checkpointer
from app.worker.executor import process_children
from app.worker.pool import WorkerPool
from schemas.gpu import LibraryManifest
from schemas.pipeline import RunSummary
from schemas.reports import GateReport, HostBuildReport, load_report
from schemas.run_layout import RunLayout
from toolchain.env import KERNELS_RS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(pipeline_missing() is not None, reason=str(pipeline_missing())),
]

RUN_TIMEOUT_S = 900.0
OPERATOR = "softmax"
NEW_OPERATOR = "vector_add"  # a kernel the checkout's library does not hold


@pytest.fixture
def corpus(context: ServiceContext, tmp_path: Path) -> Path:
    root = corpus_copy(tmp_path / "corpus")
    context.settings.source_root = root
    context.settings.no_gpu = True
    return root


def start(client: TestClient, operator: str = OPERATOR) -> str:
    body = {"source_path": f"{operator}.py", "options": {"no_gpu": True}}
    response = client.post("/v1/conversions", json=body, headers=AUTH)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def stage_rows(context: ServiceContext, conversion_id: str) -> list[StageExecution]:
    with context.sessions() as session:
        return list(
            session.scalars(
                select(StageExecution)
                .where(StageExecution.conversion_id == conversion_id)
                .order_by(StageExecution.id)
            )
        )


def event_kinds(context: ServiceContext, conversion_id: str) -> list[str]:
    with context.sessions() as session:
        return list(
            session.scalars(
                select(Event.kind).where(Event.conversion_id == conversion_id).order_by(Event.id)
            )
        )


def wait_terminal(client: TestClient, conversion_id: str) -> str:
    """Wait until no worker holds the run: ended, or awaiting a GPU."""
    wait_for(
        lambda: conversion_status(client, conversion_id) not in {"queued", "running"},
        RUN_TIMEOUT_S,
        f"conversion {conversion_id} to end",
        step=1.0,
    )
    return conversion_status(client, conversion_id)


@pytest.fixture
def pool(context: ServiceContext) -> Iterator[WorkerPool]:
    workers = WorkerPool(context.settings, context.sessions, threads=1)
    workers.start()
    yield workers
    workers.stop()


def test_embedded_worker_runs_a_conversion_to_its_end(
    client: TestClient, context: ServiceContext, corpus: Path, pool: WorkerPool
) -> None:
    cid = start(client)
    assert wait_terminal(client, cid) == "awaiting_gpu"  # --no-gpu: it stops at the boundary
    view = client.get(f"/v1/conversions/{cid}").json()
    root = run_dir(context.settings, cid)
    summary = RunSummary.model_validate_json((root / "reports" / "summary.json").read_text())
    assert view["outcome"] == summary.outcome.value
    assert view["gate_verdict"] == summary.gate_verdict
    assert view["headline"] == summary.headline
    timeline = [(s["stage"], s["attempt"], s["verdict"]) for s in view["stages"]]
    assert timeline == [(r.stage.value, r.attempt, r.verdict) for r in summary.stages]
    with context.sessions() as session:
        paths = set(session.scalars(select(Artifact.path).where(Artifact.conversion_id == cid)))
    assert "reports/summary.json" in paths
    with open_checkpointer(context.settings.resolved_database_url) as saver:
        config = {"configurable": {"thread_id": cid, "checkpoint_ns": ""}}
        assert saver.get_tuple(config) is not None, "a run awaiting a GPU keeps its checkpoints"


def tree_digest(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_a_kernel_outside_the_library_stops_at_the_gpu_boundary(
    client: TestClient, context: ServiceContext, corpus: Path, pool: WorkerPool
) -> None:
    """The run binds the new operator from its own spec and source (the run's input
    folder) and builds its library in its own workspace; the checkout's library
    crate is left as it was."""
    if context.engine.dialect.name != "sqlite":
        pytest.skip("the run itself does not depend on the database: SQLite shows it")
    before = tree_digest(KERNELS_RS)
    cid = start(client, NEW_OPERATOR)
    assert wait_terminal(client, cid) == "awaiting_gpu"
    layout = RunLayout(run_dir(context.settings, cid))
    assert load_report(GateReport, layout).reached_gpu_boundary
    host = load_report(HostBuildReport, layout)
    assert host.host_part_passed() and host.c_symbol == f"cutile_{NEW_OPERATOR}"
    assert host.library is not None and layout.resolve(host.library).is_file()
    workspace = layout.host_dir / "library" / "ported"
    manifest = LibraryManifest.model_validate_json(
        (workspace / "src" / "ffi" / "operators.json").read_text(encoding="utf-8")
    )
    spec = Path(manifest.operator(NEW_OPERATOR).spec)
    assert spec.is_absolute() and spec.is_relative_to(layout.root.resolve() / "input")
    assert tree_digest(KERNELS_RS) == before


def worker_process(context: ServiceContext, log: Path) -> subprocess.Popen[bytes]:
    env = service_env(context.settings, TILEPORT_NO_GPU="1")
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli_serve", "worker", "--threads", "1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def job_children(worker: subprocess.Popen[bytes]) -> list[int]:
    return process_children().get(worker.pid, [])


def test_a_killed_worker_resumes_without_repeating_a_stage(
    client: TestClient, context: ServiceContext, corpus: Path, tmp_path: Path
) -> None:
    cid = start(client)
    first = worker_process(context, tmp_path / "worker-1.log")
    try:
        wait_for(lambda: len(stage_rows(context, cid)) >= 2, RUN_TIMEOUT_S, "two stages")
        children = job_children(first)
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        stop_process(first)
    done_before = [(row.stage, row.attempt) for row in stage_rows(context, cid)]
    wait_for(lambda: all(not Path(f"/proc/{pid}").exists() for pid in children), 10, "job exit")
    second = worker_process(context, tmp_path / "worker-2.log")
    try:
        assert wait_terminal(client, cid) == "awaiting_gpu"
    finally:
        stop_process(second)
    rows = stage_rows(context, cid)
    executions = [(row.stage, row.attempt) for row in rows]
    assert len(executions) == len(set(executions))
    assert executions[: len(done_before)] == done_before
    assert "stage.repeated" not in event_kinds(context, cid)
    assert {row.worker_attempt for row in rows[: len(done_before)]} == {1}
    assert all(row.worker_attempt == 2 for row in rows[len(done_before) :])
    assert event_kinds(context, cid).count("worker.claimed") == 2


def test_cancel_reaches_a_running_job(
    client: TestClient, context: ServiceContext, corpus: Path, pool: WorkerPool
) -> None:
    cid = start(client)
    wait_for(lambda: len(stage_rows(context, cid)) >= 1, RUN_TIMEOUT_S, "a first stage")
    response = client.post(f"/v1/conversions/{cid}/cancel", headers=AUTH)
    assert response.status_code == 202
    wait_for(lambda: conversion_status(client, cid) == "cancelled", 60, "the cancel")
    stages_then = len(stage_rows(context, cid))
    time.sleep(5)
    assert len(stage_rows(context, cid)) == stages_then, "the job kept running"
    assert "conversion.cancelled" in event_kinds(context, cid)
    assert (run_dir(context.settings, cid) / "service" / "worker-1.log").is_file()


def test_a_pr_comment_runs_a_port_and_reports_back(
    client: TestClient, context: ServiceContext, corpus: Path
) -> None:
    if context.engine.dialect.name != "postgresql":
        pytest.skip("the bot's run does not depend on the database: PostgreSQL shows it")
    fake = FakeGitHub("gh-token").start()
    try:
        files = {f"examples/kernels/{path.name}": path.read_bytes() for path in corpus.iterdir()}
        fake.repos["acme/kernels"] = Repo("b" * 40, files)
        context.settings.github_api_url = fake.base_url
        context.settings.github_token = "gh-token"
        context.settings.api_admins = ["ci"]  # the bot's runs are read by admins
        payload = {
            "action": "created",
            "issue": {"number": 3, "pull_request": {}},
            "comment": {
                "body": f"/tileport port {OPERATOR}",
                "author_association": "MEMBER",
                "user": {"login": "ada"},
            },
            "repository": {"full_name": "acme/kernels"},
        }
        body = json.dumps(payload).encode()
        signature = hmac.new(b"webhook-secret", body, hashlib.sha256).hexdigest()
        response = client.post(
            "/v1/webhooks/github",
            content=body,
            headers={
                "X-GitHub-Event": "issue_comment",
                "X-GitHub-Delivery": "e2e-1",
                "X-Hub-Signature-256": f"sha256={signature}",
            },
        )
        assert response.status_code == 202, response.text
        [cid] = response.json()["conversions"]
        workers = WorkerPool(
            context.settings, context.sessions, 1, notifier(context.settings, context.sessions)
        )
        workers.start()
        try:
            assert wait_terminal(client, cid) == "awaiting_gpu"
            wait_for(
                lambda: len(fake.calls_to("POST", r".*/issues/3/comments")) == 1, 30, "a comment"
            )
        finally:
            workers.stop()
        [note] = fake.calls_to("POST", r".*/issues/3/comments")
        assert f"port of `{OPERATOR}`: **awaiting_gpu**" in note.body["body"]
        statuses = [c.body for c in fake.calls_to("POST", r".*/statuses/b+")]
        assert [s["state"] for s in statuses] == ["pending", "pending"]  # not red: GPU pending
        assert statuses[-1]["description"].endswith("; GPU run pending")
    finally:
        fake.stop()
