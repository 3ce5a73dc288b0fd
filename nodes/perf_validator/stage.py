"""Stage E, the perf validator: measures, never optimises.

The measurement itself runs on the GPU host inside the job runner (see
`nodes.perf_validator.measure`), right after correctness passed, so that port
and reference are timed on the same GPU in the same process. This stage takes
the perf report of the host builder's latest GPU run of this run and issues it
as its own; without one (no GPU, or `--no-gpu`) it ends BLOCKED and says that
nothing was timed on a GPU. A run started with `--no-gpu` and completed later
from a GPU run of its bundle (graph.gpu_resume) has that run's perf report here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from schemas.gpu import GpuRunReport
from schemas.pipeline import Stage
from schemas.reports import PerfReport
from schemas.run_layout import RunLayout
from schemas.state import PipelineState, StageResult
from schemas.verdicts import PerfVerdict

GPU_RESULTS_DIR = "gpu"


def gpu_results(layout: RunLayout) -> Path:
    return layout.host_dir / GPU_RESULTS_DIR


def _blocked(state: PipelineState, attempt: int, why: str) -> StageResult:
    report = PerfReport(
        run_id=state.run_id,
        attempt=attempt,
        verdict=PerfVerdict.BLOCKED,
        summary=f"Nothing was timed on a GPU: {why}",
        **PerfReport.geomean_fields([]),
    )
    return StageResult(report=report)


def _why_not_run(results: Path) -> str:
    try:
        run = GpuRunReport.model_validate_json((results / GpuRunReport.FILE_NAME).read_text())
    except (OSError, ValidationError):
        return "the host builder produced no GPU run for this run"
    return run.statement


def run(state: PipelineState) -> StageResult:
    attempt = state.next_attempt(Stage.PERF_VALIDATOR)
    results = gpu_results(state.layout())
    try:
        measured = PerfReport.model_validate_json((results / PerfReport.FILE_NAME).read_text())
    except (OSError, ValidationError):
        if state.options.no_gpu:
            return _blocked(state, attempt, "the run was started with --no-gpu.")
        return _blocked(state, attempt, _why_not_run(results))
    if measured.run_id != state.run_id:
        return _blocked(state, attempt, f"the GPU results belong to run {measured.run_id}")
    if measured.verdict is PerfVerdict.BLOCKED:
        return _blocked(state, attempt, measured.summary)
    return StageResult(report=measured.model_copy(update={"attempt": attempt}))
