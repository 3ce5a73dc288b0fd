"""Stage D, the host/FFI builder (see `nodes.host_builder.stage`): the C ABI of each
operator (`abi`, `binding`, `ffi_gen`), the aggregated library (`library`), its
ABI checks (`abi_checks`). `python -m nodes.host_builder` drives it by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas.state import PipelineState, StageResult


def run(state: PipelineState) -> StageResult:
    # Imported on use: the stage pulls in the bundle builder, which imports this package.
    from nodes.host_builder.stage import run as run_stage

    return run_stage(state)
