"""Stage E, the perf validator (see `nodes.perf_validator.stage`); the measurement
protocol the GPU runner applies is `nodes.perf_validator.measure`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas.state import PipelineState, StageResult


def run(state: PipelineState) -> StageResult:
    # Imported on use: the GPU runner imports `measure` and must not carry the stage.
    from nodes.perf_validator.stage import run as run_stage

    return run_stage(state)
