"""The worker's parts that need no pipeline run: the durable queue (claims,
leases, reclaim after a lost worker), the stage recorder, the ingestion of a
run's reports, and checkpoint pruning; on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langgraph.checkpoint.base import empty_checkpoint
from service_support import submit
from sqlalchemy import select, update
from sqlalchemy.orm import undefer

from app.context import ServiceContext
from app.conversions import run_dir
from app.storage.models import (
    Artifact,
    Conversion,
    CorrectnessResult,
    CuptiResult,
    Event,
    IrDump,
    StageExecution,
)
from app.worker import queue
from app.worker.checkpoints import open_checkpointer, prune
from app.worker.ingest import PATCH_PATH, ingest_run
from app.worker.job import StageRecorder
from schemas.api import ConversionStatus
from schemas.pipeline import Stage, StageRecord
from schemas.reports import (
    CorrectnessCase,
    CorrectnessReport,
    MeasurementEnvironment,
    PerfReport,
    PerfRow,
    ReferenceBackend,
    save_report,
)
from schemas.run_layout import RunLayout
from schemas.verdicts import CorrectnessVerdict, PerfVerdict


@pytest.fixture
def conversion_id(client: TestClient) -> str:
    return str(submit(client).json()["id"])


def status_of(context: ServiceContext, conversion_id: str) -> Conversion:
    with context.sessions() as session:
        return session.get_one(Conversion, conversion_id)


def expire_lease(context: ServiceContext, conversion_id: str) -> None:
    with context.sessions.begin() as session:
        session.execute(
            update(Conversion)
            .where(Conversion.id == conversion_id)
            .values(lease_expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )


def test_only_one_of_many_workers_claims_a_conversion(
    context: ServiceContext, conversion_id: str
) -> None:
    claims: list[queue.Claim | None] = []
    barrier = threading.Barrier(6)

    def contend(owner: str) -> None:
        barrier.wait()
        claims.append(queue.claim_next(context.sessions, owner, 30.0))

    threads = [threading.Thread(target=contend, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [claim for claim in claims if claim is not None]
    assert len(won) == 1
    row = status_of(context, conversion_id)
    assert row.status == "running" and row.lease_owner == won[0].owner and row.attempt == 1


def test_a_live_lease_is_not_reclaimed_an_expired_one_is(
    context: ServiceContext, conversion_id: str
) -> None:
    first = queue.claim_next(context.sessions, "w1", 30.0)
    assert first is not None
    assert queue.claim_next(context.sessions, "w2", 30.0) is None
    expire_lease(context, conversion_id)
    second = queue.claim_next(context.sessions, "w2", 30.0)
    assert second is not None and second.worker_attempt == 2
    assert not queue.renew(context.sessions, first, 30.0)
    assert not queue.finish(context.sessions, first, ConversionStatus.FINISHED)
    assert queue.renew(context.sessions, second, 30.0)
    assert queue.finish(context.sessions, second, ConversionStatus.FINISHED)
    assert status_of(context, conversion_id).status == "finished"


def test_requeue_puts_it_back_for_the_next_claim(
    context: ServiceContext, conversion_id: str
) -> None:
    claim = queue.claim_next(context.sessions, "w1", 30.0)
    assert claim is not None
    assert queue.requeue(context.sessions, claim, "job died")
    assert status_of(context, conversion_id).status == "queued"
    again = queue.claim_next(context.sessions, "w2", 30.0)
    assert again is not None and again.worker_attempt == 2


def test_lost_workers_settle_cancelled_and_exhausted_conversions(
    client: TestClient, context: ServiceContext, conversion_id: str
) -> None:
    other = submit(client, headers={"Idempotency-Key": "2"}).json()["id"]
    for cid in (conversion_id, other):
        assert queue.try_claim(context.sessions, cid, "dead", 30.0) is not None
    with context.sessions.begin() as session:
        session.execute(
            update(Conversion).where(Conversion.id == conversion_id).values(cancel_requested=True)
        )
    expire_lease(context, conversion_id)
    expire_lease(context, other)
    settled = queue.settle_abandoned(context.sessions, max_attempts=1)
    assert sorted(settled) == sorted([conversion_id, other])
    assert queue.claim_next(context.sessions, "w", 30.0) is None
    assert status_of(context, conversion_id).status == "cancelled"
    exhausted = status_of(context, other)
    assert exhausted.status == "error" and "lost 1 times" in (exhausted.error or "")


def test_stage_recorder_writes_one_row_per_execution(
    context: ServiceContext, conversion_id: str
) -> None:
    root = run_dir(context.settings, conversion_id)
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "preflight.json").write_text('{"verdict": "PASS", "checks": []}')
    recorder = StageRecorder(context.sessions, conversion_id, root, worker_attempt=1)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    record = StageRecord(
        stage=Stage.PREFLIGHT,
        attempt=1,
        verdict="PASS",
        started_at=start,
        finished_at=start + timedelta(seconds=2.5),
        report_path="reports/preflight.json",
        summary="all tools present",
    )
    recorder(record)
    recorder(record.model_copy(update={"stage": Stage.ANALYZER, "report_path": "../../etc"}))
    with context.sessions() as session:
        rows = session.scalars(
            select(StageExecution)
            .where(StageExecution.conversion_id == conversion_id)
            .order_by(StageExecution.id)
            .options(undefer(StageExecution.validator_output))
        ).all()
        kinds = session.scalars(select(Event.kind).where(Event.conversion_id == conversion_id))
        assert "stage.repeated" not in list(kinds)
    assert [(row.stage, row.verdict, row.duration_s) for row in rows] == [
        ("preflight", "PASS", 2.5),
        ("analyzer", "PASS", 2.5),
    ]
    assert rows[0].validator_output == {"verdict": "PASS", "checks": []}
    assert rows[1].validator_output == {}


def test_a_repeated_stage_execution_is_flagged(context: ServiceContext, conversion_id: str) -> None:
    root = run_dir(context.settings, conversion_id)
    recorder = StageRecorder(context.sessions, conversion_id, root, worker_attempt=1)
    now = datetime.now(UTC)
    record = StageRecord(
        stage=Stage.ANALYZER, attempt=1, verdict="PASS", started_at=now, finished_at=now
    )
    recorder(record)
    recorder(record)  # told again after a resume: the same execution, nothing new
    later = now + timedelta(seconds=5)
    again = record.model_copy(update={"started_at": later, "finished_at": later})
    StageRecorder(context.sessions, conversion_id, root, worker_attempt=2)(again)
    with context.sessions() as session:
        rows = session.scalars(
            select(StageExecution).where(StageExecution.conversion_id == conversion_id)
        ).all()
        repeated = session.scalars(
            select(Event).where(
                Event.conversion_id == conversion_id, Event.kind == "stage.repeated"
            )
        ).all()
    assert len(rows) == 1 and rows[0].worker_attempt == 2
    assert len(repeated) == 1


def perf_report(run_id: str) -> PerfReport:
    rows = [
        PerfRow(
            config_id=name,
            variant="tile1024",
            dtype="float32",
            shapes={"a": [size]},
            port_us=port,
            baseline_us=base,
            baseline_backend=ReferenceBackend.CUTILE_PYTHON,
            repetitions=50,
        )
        for name, size, port, base in (("small", 1000, 10.0, 10.0), ("big", 10**6, 99.0, 100.0))
    ]
    return PerfReport(
        run_id=run_id,
        attempt=1,
        verdict=PerfVerdict.DONE,
        l2_flush_bytes=256 * 1024 * 1024,
        warmup_iterations=5,
        interleaved=True,
        rows=rows,
        environment=MeasurementEnvironment(
            gpu="NVIDIA H200",
            driver="580.1",
            clocks="sm 1980 MHz, mem 3201 MHz",
            toolchain={"tileiras": "13.4.92", "cutile": "0.5.0"},
        ),
        **PerfReport.geomean_fields(rows),
    )


def correctness_report(run_id: str) -> CorrectnessReport:
    cases = [
        CorrectnessCase(
            config_id="ragged_f32",
            dtype="float32",
            seed=seed,
            shapes={"a": [1000003]},
            passed=True,
            max_abs_error=1e-7,
            max_rel_error=2e-7,
            atol=1e-5,
            rtol=1.3e-6,
        )
        for seed in (1, 2)
    ]
    return CorrectnessReport(
        run_id=run_id,
        attempt=1,
        verdict=CorrectnessVerdict.ALL_PASS,
        ran_on_gpu=True,
        gpu="NVIDIA H200",
        cases=cases,
    )


def fill_run(root: Path, outside: Path) -> None:
    layout = RunLayout(root)
    layout.ensure()
    save_report(perf_report("r1"), layout)
    save_report(correctness_report("r1"), layout)
    layout.reference_ir("tile1024").write_text("cuda_tile.module @m {}\n")
    layout.generated_ir("tile1024").write_text("cuda_tile.module @m {}\n")
    layout.kernel_rs.write_text("pub fn vadd() {}\n")
    layout.ffi_rs.write_text('pub extern "C" fn cutile_vadd() {}\n')
    outside.write_text("not part of the run")
    (root / "generated" / "escape.txt").symlink_to(outside)


def test_ingest_records_artifacts_ir_and_results_idempotently(
    context: ServiceContext, conversion_id: str, tmp_path: Path
) -> None:
    root = run_dir(context.settings, conversion_id)
    fill_run(root, tmp_path / "outside.txt")
    for _ in range(2):
        ingest_run(context.sessions, context.settings, conversion_id)
    with context.sessions() as session:
        artifacts = {
            row.path: row
            for row in session.scalars(
                select(Artifact).where(Artifact.conversion_id == conversion_id)
            )
        }
        dumps = session.scalars(select(IrDump).where(IrDump.conversion_id == conversion_id)).all()
        cupti = session.scalars(
            select(CuptiResult).where(CuptiResult.conversion_id == conversion_id)
        ).all()
        cases = session.scalars(
            select(CorrectnessResult).where(CorrectnessResult.conversion_id == conversion_id)
        ).all()
    assert "generated/escape.txt" not in artifacts
    assert {"reports/perf.json", "generated/kernel.rs", "input/vadd.py", PATCH_PATH} <= set(
        artifacts
    )
    assert artifacts["reference/tile1024.mlir"].kind == "ir"
    assert sorted((dump.side, dump.variant, dump.format) for dump in dumps) == [
        ("generated", "tile1024", "text"),
        ("reference", "tile1024", "text"),
    ]
    assert sorted((row.config, round(row.ratio or 0, 3)) for row in cupti) == [
        ("big", 0.99),
        ("small", 1.0),
    ]
    assert cupti[0].gpu == "NVIDIA H200" and cupti[0].crate_versions == {"cutile": "0.5.0"}
    assert cupti[0].clocks == {"clocks": "sm 1980 MHz, mem 3201 MHz"}
    assert sorted(case.seed or 0 for case in cases) == [1, 2]
    patch = (root / PATCH_PATH).read_text()
    assert "+++ b/ported/vadd/kernel.rs" in patch and "+pub fn vadd() {}" in patch


def test_ingest_skips_a_report_that_does_not_validate(
    context: ServiceContext, conversion_id: str
) -> None:
    root = run_dir(context.settings, conversion_id)
    history = root / "reports" / "history"
    history.mkdir(parents=True)
    (history / "perf.1.json").write_text('{"verdict": "DONE"}')
    ingest_run(context.sessions, context.settings, conversion_id)
    with context.sessions() as session:
        kinds = list(
            session.scalars(select(Event.kind).where(Event.conversion_id == conversion_id))
        )
        assert session.scalars(select(CuptiResult)).first() is None
    assert "ingest.invalid_report" in kinds


def test_checkpoints_live_in_the_service_database_and_are_pruned(
    context: ServiceContext,
) -> None:
    url = context.settings.resolved_database_url
    config: Any = {"configurable": {"thread_id": "conversion-1", "checkpoint_ns": ""}}
    with open_checkpointer(url) as saver:
        saver.put(config, empty_checkpoint(), {}, {})
        assert saver.get_tuple(config) is not None
    prune(url, "conversion-1")
    with open_checkpointer(url) as saver:
        assert saver.get_tuple(config) is None
