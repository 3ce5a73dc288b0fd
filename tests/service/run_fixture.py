"""A finished conversion as the pages show it, built from schema-valid reports:
stages, an IR pair with a critical difference (padding neg_inf vs zero), a
perf report with three configurations, a correctness report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service_support import FIXTURES, submit
from sqlalchemy.orm import Session, sessionmaker

from app.context import ServiceContext
from app.conversions import run_dir
from app.storage.models import Conversion
from app.worker import queue
from app.worker.ingest import ingest_run
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

HOSTILE_SUMMARY = "<script>document.title='pwned'</script> ok"
TIMELINE = [
    (Stage.PREFLIGHT, "PASS", 1.2),
    (Stage.ANALYZER, "PASS", 3.4),
    (Stage.KERNEL_WRITER, "COMPILED", 12.0),
    (Stage.HOST_BUILDER, "ALL_PASS", 20.5),
    (Stage.PERF_VALIDATOR, "DONE", 30.0),
    (Stage.FINAL_GATE, "PASS", 0.3),
]
PERF = [("ragged_f32", 1.00, 10.0), ("many_rows_f16", 0.98, 50.0), ("wide_bf16", 1.04, 80.0)]
LEVEL = "IR exact, SASS-identical sm_90/sm_100"
KERNEL_RS = """// the port
pub fn softmax_kernel<const BLOCK: i32>(x: &Tensor<f32, 2>, out: &mut Tensor<f32, 2>) {
    let row = load_tile(x, [get_tile_block_id().0, 0]);
    store_tile(out, exp(row - reduce_max(row, 1)));
}
"""


def perf_report(run_id: str) -> PerfReport:
    rows = [
        PerfRow(
            config_id=name,
            variant="row",
            dtype="float32",
            shapes={"x": [37, 1000]},
            port_us=base * ratio,
            baseline_us=base,
            baseline_backend=ReferenceBackend.CUTILE_PYTHON,
            repetitions=100,
        )
        for name, ratio, base in PERF
    ]
    return PerfReport(
        run_id=run_id,
        attempt=1,
        verdict=PerfVerdict.DONE,
        l2_flush_bytes=512 * 1024 * 1024,
        warmup_iterations=10,
        interleaved=True,
        rows=rows,
        environment=MeasurementEnvironment(
            gpu="NVIDIA H200",
            driver="580.65",
            clocks="sm 1980 MHz",
            toolchain={"tileiras": "13.4.92", "cutile": "0.5.0"},
        ),
        **PerfReport.geomean_fields(rows),
    )


def correctness_report(run_id: str) -> CorrectnessReport:
    return CorrectnessReport(
        run_id=run_id,
        attempt=1,
        verdict=CorrectnessVerdict.ALL_PASS,
        ran_on_gpu=True,
        gpu="NVIDIA H200",
        cases=[
            CorrectnessCase(
                config_id="ragged_f32",
                dtype="float32",
                seed=seed,
                shapes={"x": [37, 1000]},
                passed=True,
                max_abs_error=1e-7,
                max_rel_error=1e-6,
                atol=1e-5,
                rtol=1.3e-6,
            )
            for seed in (0, 1)
        ],
    )


def write_run_files(context: ServiceContext, conversion_id: str) -> None:
    layout = RunLayout(run_dir(context.settings, conversion_id))
    layout.ensure()
    reference = (FIXTURES / "softmax_ref.mlir").read_text()
    layout.reference_ir("row").write_text(reference)
    layout.generated_ir("row").write_text(reference.replace("neg_inf", "zero"))
    layout.kernel_rs.write_text(KERNEL_RS)
    save_report(perf_report("run-1"), layout)
    save_report(correctness_report("run-1"), layout)


def record_stages(
    sessions: sessionmaker[Session], context: ServiceContext, conversion_id: str, span: slice
) -> None:
    recorder = StageRecorder(sessions, conversion_id, run_dir(context.settings, conversion_id), 1)
    start = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    for stage, verdict, seconds in TIMELINE[span]:
        recorder(
            StageRecord(
                stage=stage,
                attempt=1,
                verdict=verdict,
                started_at=start,
                finished_at=start + timedelta(seconds=seconds),
                summary=HOSTILE_SUMMARY if stage is Stage.ANALYZER else f"{stage.value} done",
            )
        )
        start += timedelta(seconds=seconds)


def running_run(client: object, context: ServiceContext, stages: int = 2) -> str:
    cid = str(submit(client).json()["id"])  # type: ignore[arg-type]
    assert queue.try_claim(context.sessions, cid, "worker", 600.0) is not None
    record_stages(context.sessions, context, cid, slice(0, stages))
    return cid


def finish(context: ServiceContext, conversion_id: str, done: int = 2) -> None:
    record_stages(context.sessions, context, conversion_id, slice(done, None))
    with context.sessions.begin() as session:
        row = session.get_one(Conversion, conversion_id)
        row.outcome, row.gate_verdict = "complete", "PASS"
        row.headline = {"sameness": "different", "geomean_ratio": 1.0066, "level": LEVEL}
        owner = row.lease_owner
    claim = queue.Claim(conversion_id, 1, owner or "worker")
    assert queue.finish(context.sessions, claim, ConversionStatus.FINISHED)


def finished_run(client: object, context: ServiceContext) -> str:
    cid = running_run(client, context)
    write_run_files(context, cid)
    finish(context, cid)
    ingest_run(context.sessions, context.settings, cid)
    return cid
