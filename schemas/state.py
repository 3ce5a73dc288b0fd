"""The typed state the pipeline graph carries between stages, and what a stage returns.

The state holds paths, verdicts, attempt counters and costs, never artifacts:
everything large lives in the run directory and is reached through reports.
Every field is plain JSON once dumped, so any LangGraph checkpointer can store it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TypedDict, TypeVar

from pydantic import BaseModel, Field

from schemas.llm import TokenUsage
from schemas.pipeline import LlmSpend, Outcome, RunOptions, Stage, StageRecord
from schemas.reports import StageReport
from schemas.run_layout import RunLayout
from schemas.verdicts import PerfVerdict

VerdictT = TypeVar("VerdictT", bound=StrEnum)


class ReportMeta(TypedDict):
    run_id: str
    attempt: int


class PipelineState(BaseModel):
    run_id: str = Field(min_length=1)
    operator: str = Field(min_length=1)
    spec_path: str
    run_dir: str
    options: RunOptions = Field(default_factory=RunOptions)
    started_at: datetime

    attempts: dict[Stage, int] = Field(
        default_factory=dict, description="Executions finished per stage in this run."
    )
    verdicts: dict[Stage, str] = Field(
        default_factory=dict, description="The latest verdict of each stage that ran."
    )
    verdict_classes: dict[Stage, str] = Field(
        default_factory=dict,
        description="The latest qualifier beside a verdict: the host builder's failure "
        "class, the IR-diff analyst's fix owner.",
    )
    reports: dict[Stage, list[str]] = Field(
        default_factory=dict,
        description="Run-relative reports written by the latest execution of each stage.",
    )
    records: list[StageRecord] = Field(default_factory=list)
    outcome: Outcome | None = None
    llm_tokens: int = Field(0, ge=0)
    llm_cost_usd: float = Field(0.0, ge=0)
    llm_usage: list[LlmSpend] = Field(default_factory=list)

    def layout(self) -> RunLayout:
        return RunLayout(Path(self.run_dir))

    def llm_spent(self) -> TokenUsage:
        """What the run has spent on the LLM so far, for its cap."""
        return TokenUsage(total_tokens=self.llm_tokens, cost_usd=self.llm_cost_usd)

    def attempts_of(self, stage: Stage) -> int:
        return self.attempts.get(stage, 0)

    def next_attempt(self, stage: Stage) -> int:
        """The attempt number of the execution about to run (1-based)."""
        return self.attempts_of(stage) + 1

    def report_meta(self, stage: Stage) -> ReportMeta:
        """The run_id/attempt a stage puts in the report it is about to write:
        `PerfReport(**state.report_meta(Stage.PERF_VALIDATOR), verdict=...)`."""
        return {"run_id": self.run_id, "attempt": self.next_attempt(stage)}

    def verdict_of(self, stage: Stage, kind: type[VerdictT]) -> VerdictT | None:
        raw = self.verdicts.get(stage)
        return None if raw is None else kind(raw)

    def class_of(self, stage: Stage, kind: type[VerdictT]) -> VerdictT | None:
        raw = self.verdict_classes.get(stage)
        return None if raw is None else kind(raw)

    def perf_gap_found(self) -> bool:
        """True when the perf validator's latest measurement showed a gap."""
        return self.verdict_of(Stage.PERF_VALIDATOR, PerfVerdict) is PerfVerdict.INVESTIGATE


@dataclass(frozen=True)
class StageResult:
    """What a stage callable returns: its report (the verdict lives in it), any
    further reports it wrote, and what it spent on an LLM (and which)."""

    report: StageReport
    extra_reports: tuple[StageReport, ...] = field(default=())
    llm_tokens: int = 0
    llm_cost_usd: float = 0.0
    llm_model: str | None = None
