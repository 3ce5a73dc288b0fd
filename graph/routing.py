"""The routing table and the caps of docs/PIPELINE.md, as pure functions.

Each `after_*` function maps the verdict a stage just gave (plus the attempts
used so far) to the next stage or to an outcome. One rule applies on top of
every row: a stage whose cap is used up is never run again, and the run
completes instead (so the loop converges or ends with a diagnosis).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from schemas.pipeline import Outcome, Stage
from schemas.state import PipelineState, VerdictT
from schemas.verdicts import (
    AnalyzerVerdict,
    DiffVerdict,
    FailureClass,
    FixOwner,
    HostBuildVerdict,
    InvestigationVerdict,
    KernelWriterVerdict,
    PerfVerdict,
    PreflightVerdict,
)

Target = Stage | Outcome
Attempts = Mapping[Stage, int]

CAPS: Final[Mapping[Stage, int]] = {
    Stage.PREFLIGHT: 1,
    Stage.ANALYZER: 1,
    Stage.KERNEL_WRITER: 2,
    Stage.IR_DIFF_ANALYST: 1,
    Stage.HOST_BUILDER: 2,
    Stage.PERF_VALIDATOR: 2,
    Stage.PERF_INVESTIGATOR: 1,
}
"""Executions allowed per run (A1 B2 C1 D2 E2 F1; preflight runs once)."""

NEXT_CHOICES: Final[Mapping[Stage, tuple[Target, ...]]] = {
    Stage.PREFLIGHT: (Stage.ANALYZER, Outcome.STOP, Outcome.COMPLETE),
    Stage.ANALYZER: (Stage.KERNEL_WRITER, Outcome.STOP, Outcome.COMPLETE),
    Stage.KERNEL_WRITER: (Stage.HOST_BUILDER, Outcome.STOP, Outcome.COMPLETE),
    Stage.HOST_BUILDER: (
        Stage.PERF_VALIDATOR,
        Stage.HOST_BUILDER,
        Stage.IR_DIFF_ANALYST,
        Outcome.STOP,
        Outcome.COMPLETE,
    ),
    Stage.PERF_VALIDATOR: (Stage.IR_DIFF_ANALYST, Stage.PERF_INVESTIGATOR, Outcome.COMPLETE),
    Stage.IR_DIFF_ANALYST: (
        Stage.KERNEL_WRITER,
        Stage.HOST_BUILDER,
        Stage.PERF_INVESTIGATOR,
        Outcome.COMPLETE,
    ),
    Stage.PERF_INVESTIGATOR: (Outcome.COMPLETE,),
}
"""Every place the table can send a run after each stage (COMPLETE also where a cap
cuts an edge); the graph declares exactly these edges, so LangGraph refuses any other."""


def is_unused(stage: Stage, attempts: Attempts) -> bool:
    """Whether the stage may run once more in this run."""
    return attempts.get(stage, 0) < CAPS[stage]


def capped(stage: Stage, attempts: Attempts) -> Target:
    """Go to `stage` if its cap allows, else complete."""
    return stage if is_unused(stage, attempts) else Outcome.COMPLETE


def after_preflight(verdict: PreflightVerdict, attempts: Attempts) -> Target:
    if verdict is PreflightVerdict.BLOCKED:
        return Outcome.STOP
    return capped(Stage.ANALYZER, attempts)


def after_analyzer(verdict: AnalyzerVerdict, attempts: Attempts) -> Target:
    if verdict is AnalyzerVerdict.PASS:
        return capped(Stage.KERNEL_WRITER, attempts)
    return Outcome.STOP


def after_kernel_writer(verdict: KernelWriterVerdict, attempts: Attempts) -> Target:
    if verdict is KernelWriterVerdict.COMPILED:
        return capped(Stage.HOST_BUILDER, attempts)
    return Outcome.STOP


def after_host_builder(
    verdict: HostBuildVerdict, failure_class: FailureClass | None, attempts: Attempts
) -> Target:
    if verdict is HostBuildVerdict.ALL_PASS:
        return capped(Stage.PERF_VALIDATOR, attempts)
    if failure_class is FailureClass.ENV:
        # Nothing a later stage can do about a missing GPU or tool: stop and say so.
        return Outcome.STOP
    if failure_class is FailureClass.HOST:
        return capped(Stage.HOST_BUILDER, attempts)
    return capped(Stage.IR_DIFF_ANALYST, attempts)


def after_perf_validator(verdict: PerfVerdict, attempts: Attempts) -> Target:
    if verdict is PerfVerdict.DONE:
        return Outcome.COMPLETE
    if is_unused(Stage.IR_DIFF_ANALYST, attempts):
        return Stage.IR_DIFF_ANALYST
    return capped(Stage.PERF_INVESTIGATOR, attempts)


def after_ir_diff_analyst(
    verdict: DiffVerdict, owner: FixOwner | None, perf_gap: bool, attempts: Attempts
) -> Target:
    if verdict is DiffVerdict.FAIL_FIXABLE:
        fixer = Stage.KERNEL_WRITER if owner is FixOwner.KERNEL else Stage.HOST_BUILDER
        return capped(fixer, attempts)
    if perf_gap:
        return capped(Stage.PERF_INVESTIGATOR, attempts)
    return Outcome.COMPLETE


def after_perf_investigator(verdict: InvestigationVerdict) -> Target:
    return Outcome.COMPLETE


def next_target(stage: Stage, state: PipelineState) -> Target:
    """The routing decision after `stage`, read from the state's latest verdicts."""
    attempts = state.attempts
    match stage:
        case Stage.PREFLIGHT:
            return after_preflight(_verdict(state, stage, PreflightVerdict), attempts)
        case Stage.ANALYZER:
            return after_analyzer(_verdict(state, stage, AnalyzerVerdict), attempts)
        case Stage.KERNEL_WRITER:
            return after_kernel_writer(_verdict(state, stage, KernelWriterVerdict), attempts)
        case Stage.HOST_BUILDER:
            return after_host_builder(
                _verdict(state, stage, HostBuildVerdict),
                state.class_of(stage, FailureClass),
                attempts,
            )
        case Stage.PERF_VALIDATOR:
            return after_perf_validator(_verdict(state, stage, PerfVerdict), attempts)
        case Stage.IR_DIFF_ANALYST:
            return after_ir_diff_analyst(
                _verdict(state, stage, DiffVerdict),
                state.class_of(stage, FixOwner),
                state.perf_gap_found(),
                attempts,
            )
        case Stage.PERF_INVESTIGATOR:
            return after_perf_investigator(_verdict(state, stage, InvestigationVerdict))
        case Stage.FINAL_GATE:
            raise ValueError("the final gate is the last node: nothing routes from it")


def _verdict(state: PipelineState, stage: Stage, kind: type[VerdictT]) -> VerdictT:
    verdict = state.verdict_of(stage, kind)
    if verdict is None:
        raise ValueError(f"routing after {stage.value}, which has no verdict")
    return verdict
