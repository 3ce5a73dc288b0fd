"""The contract between the pipeline graph and whoever runs it (the CLI, the
service's workers): what goes in, what each stage reports as it ends, and what
a finished run says."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Stage(StrEnum):
    PREFLIGHT = "preflight"
    ANALYZER = "analyzer"
    KERNEL_WRITER = "kernel_writer"
    HOST_BUILDER = "host_builder"
    PERF_VALIDATOR = "perf_validator"
    IR_DIFF_ANALYST = "ir_diff_analyst"
    PERF_INVESTIGATOR = "perf_investigator"
    FINAL_GATE = "final_gate"


class Outcome(StrEnum):
    """How the routed part of a run ended, before the final gate."""

    COMPLETE = "complete"
    STOP = "stop"


class RunOptions(BaseModel):
    """Switches a caller may set for one conversion; any other key is refused."""

    model_config = ConfigDict(extra="forbid")

    no_gpu: bool = Field(False, description="Never try GPU stages; they end BLOCKED env.")
    llm: bool = Field(False, description="Allow the LLM fallback in the kernel writer.")
    gpu_arch: str | None = Field(
        None,
        pattern=r"^sm_[0-9]{2,3}[a-z]?$",
        description="The GPU architecture whose queue runs the bundle at the GPU boundary "
        "(service, Celery mode); default: the first of GPU_QUEUES.",
    )
    time_all_configs: bool = Field(
        False,
        description="Time every configuration on the GPU, the test ones too; by default "
        "only the spec's perf configurations are timed.",
    )


class StageRecord(BaseModel):
    """One execution of one stage, reported as soon as it ends."""

    stage: Stage
    attempt: int = Field(ge=1)
    verdict: str
    verdict_class: str | None = Field(
        None, description="host / kernel / env, for the host builder's verdicts."
    )
    started_at: datetime
    finished_at: datetime
    report_path: str | None = Field(None, description="Relative to the run directory.")
    summary: str = ""


class LlmSpend(BaseModel):
    """What one stage execution spent on the LLM (a row of the `llm_usage` table)."""

    stage: Stage
    attempt: int = Field(ge=1)
    model: str | None = None
    total_tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)


class RunSummary(BaseModel):
    """What a finished run says: written to reports/summary.json."""

    operator: str
    outcome: Outcome
    gate_verdict: str
    stages: list[StageRecord]
    headline: dict[str, str | float | int | None] = Field(
        default_factory=dict,
        description="Figures worth showing first: IR sameness level, geomean ratio, ...",
    )
    llm_tokens: int = 0
    llm_cost_usd: float = 0.0
    llm_usage: list[LlmSpend] = Field(
        default_factory=list, description="Per stage execution that used the LLM."
    )
