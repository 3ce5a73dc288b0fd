"""The stage callables the graph runs, injected so that tests can script them.

A stage is any `(PipelineState) -> StageResult`. The real ones live in
`nodes/<stage>.py`, each exposing `run`; `StageNodes.from_modules()` finds them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.final_gate import run_final_gate
from schemas.pipeline import Stage
from schemas.state import PipelineState, StageResult

StageFn = Callable[[PipelineState], StageResult]

ROUTED_STAGES: tuple[Stage, ...] = tuple(s for s in Stage if s is not Stage.FINAL_GATE)


class StageNotImplemented(LookupError):
    pass


@dataclass(frozen=True)
class StageNodes:
    preflight: StageFn
    analyzer: StageFn
    kernel_writer: StageFn
    host_builder: StageFn
    perf_validator: StageFn
    ir_diff_analyst: StageFn
    perf_investigator: StageFn
    final_gate: StageFn = field(default=run_final_gate)

    def for_stage(self, stage: Stage) -> StageFn:
        fn: StageFn = getattr(self, stage.value)
        return fn

    @classmethod
    def from_modules(cls, package: str = "nodes") -> StageNodes:
        """The real stages: `<package>.<stage>.run` for every routed stage."""
        found = {stage.value: _load_stage(package, stage) for stage in ROUTED_STAGES}
        return cls(**found)


def _load_stage(package: str, stage: Stage) -> StageFn:
    module_name = f"{package}.{stage.value}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise StageNotImplemented(f"stage {stage.value} has no module {module_name}") from exc
    run = getattr(module, "run", None)
    if not callable(run):
        raise StageNotImplemented(f"{module_name} does not define run(state)")
    fn: StageFn = run
    return fn
