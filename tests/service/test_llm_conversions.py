"""A conversion with `{"llm": true}` through the service: POST /v1/conversions,
the embedded worker runs the real pipeline in its job process, whose stage B
asks a loopback OpenAI-compatible endpoint (its first answer does not compile,
its second is a correct port); tokens and cost reach the API and the database."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_support import AUTH, REPO, conversion_status, pipeline_missing, wait_for
from sqlalchemy import select

from app.context import ServiceContext
from app.storage.models import LlmUsage, StageExecution
from app.worker.pool import WorkerPool
from toolchain.env import rs_export_binary

sys.path.insert(0, str(REPO / "tests" / "llm"))
from openai_fake import FakeEndpoint, Reply, serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(pipeline_missing() is not None, reason=str(pipeline_missing())),
    pytest.mark.skipif(not rs_export_binary().exists(), reason="tileport-rs-export is not built"),
]

KERNELS = REPO / "tests" / "kernel_writer" / "fixtures" / "kernels"
GOOD = (REPO / "tests" / "llm" / "fixtures" / "bit_union.kernel.rs").read_text()
RUN_TIMEOUT_S = 600.0


def fenced(source: str) -> str:
    return f"```rust\n{source}```\n"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEndpoint]:
    """The scripted endpoint, in the environment the worker's job process inherits."""
    broken = GOOD.replace("reduce(tx,", "reduce_tile(tx,")
    with serve([Reply(fenced(broken), 2000, 500), Reply(fenced(GOOD), 2600, 600)]) as fake:
        monkeypatch.setenv("TILEPORT_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("TILEPORT_LLM_MODEL", "port-model")
        monkeypatch.setenv("TILEPORT_LLM_PRICE_PROMPT_PER_1K", "1")
        monkeypatch.setenv("TILEPORT_LLM_PRICE_COMPLETION_PER_1K", "4")
        yield fake


@pytest.fixture
def pool(context: ServiceContext, tmp_path: Path) -> Iterator[WorkerPool]:
    if context.engine.dialect.name != "sqlite":
        pytest.skip("the run does not depend on the database: SQLite shows it")
    context.settings.source_root = Path(shutil.copytree(KERNELS, tmp_path / "kernels"))
    context.settings.no_gpu = True
    workers = WorkerPool(context.settings, context.sessions, threads=1)
    workers.start()
    yield workers
    workers.stop()


def test_a_conversion_with_llm_records_its_tokens_and_cost(
    client: TestClient, context: ServiceContext, endpoint: FakeEndpoint, pool: WorkerPool
) -> None:
    body = {"source_path": "bit_union.py", "options": {"no_gpu": True, "llm": True}}
    response = client.post("/v1/conversions", json=body, headers=AUTH)
    assert response.status_code == 202, response.text
    cid = str(response.json()["id"])
    wait_for(
        lambda: conversion_status(client, cid) not in {"queued", "running"},
        RUN_TIMEOUT_S,
        f"conversion {cid} to stop running",
        step=1.0,
    )
    view = client.get(f"/v1/conversions/{cid}").json()
    # No GPU here: the run stops at the GPU boundary, its port built into the library.
    assert view["status"] == "awaiting_gpu", view.get("error")
    assert view["options"]["llm"] is True
    [writer] = [s for s in view["stages"] if s["stage"] == "kernel_writer"]
    assert writer["verdict"] == "COMPILED", writer["summary"]
    tokens, cost = 2500 + 3200, 4.6 * 1 + 1.1 * 4
    assert view["llm_tokens"] == tokens and view["llm_cost_usd"] == pytest.approx(cost)
    assert len(endpoint.requests) == 2
    with context.sessions() as session:
        [usage] = session.scalars(select(LlmUsage).where(LlmUsage.conversion_id == cid)).all()
        row = session.scalars(
            select(StageExecution).where(
                StageExecution.conversion_id == cid, StageExecution.stage == "kernel_writer"
            )
        ).one()
        recorded = row.validator_output
    assert (usage.stage, usage.model, usage.total_tokens) == ("kernel_writer", "port-model", tokens)
    assert usage.cost_usd == pytest.approx(cost)
    assert recorded["writer"] == "llm" and recorded["llm_attempts"] == 2
    assert [a["outcome"]["verdict"] for a in recorded["llm"]["attempts"]] == [
        "FAIL_COMPILE",
        "COMPILED",
    ]
