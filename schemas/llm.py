"""What crosses the boundary between the kernel writer and the LLM fallback loop.

The kernel writer hands the loop a `verify` callable (compile the candidate
`kernel.rs`, then diff its Tile IR against the reference) that answers with a
`VerifyOutcome`; the loop answers with an `LlmPortResult`: the accepted source
or why there is none, every attempt, and the tokens and money spent. Stage B
records what its fallback did in kernel_writer.json as an `LlmFallbackRecord`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.verdicts import KernelWriterVerdict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VerifyStep(StrEnum):
    """How far a candidate got: extracting the source, compiling it, or the IR diff."""

    EXTRACT = "extract"
    COMPILE = "compile"
    IR_DIFF = "ir_diff"


class VerifyOutcome(_Strict):
    """The kernel writer's verdict on one candidate source."""

    ok: bool
    step: VerifyStep = Field(description="The last step run: where it failed, or ir_diff.")
    feedback: str = Field(
        "", description="Compiler errors or IR-diff findings, sent back to the model on a retry."
    )
    verdict: KernelWriterVerdict | None = Field(
        None, description="The verdict the candidate would get as the port; None without source."
    )

    @model_validator(mode="after")
    def _failure_says_why(self) -> Self:
        if not self.ok and not self.feedback.strip():
            raise ValueError("a failed verification needs feedback for the next attempt")
        return self


class TokenUsage(_Strict):
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    total_tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class LlmAttempt(_Strict):
    number: int = Field(ge=1)
    usage: TokenUsage
    outcome: VerifyOutcome
    retries: int = Field(0, ge=0, description="Requests repeated after a 429, 5xx or timeout.")
    seconds: float = Field(0.0, ge=0, description="Wall time of the request and the check.")


class LlmStatus(StrEnum):
    SUCCEEDED = "succeeded"
    EXHAUSTED = "exhausted"
    """Every allowed attempt was made and none verified."""
    ENDPOINT_ERROR = "endpoint_error"
    """The endpoint failed (HTTP error, unreachable, timed out) after its retries: the
    loop stopped."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """The run's token or cost cap was reached before a verified answer."""
    NOT_CONFIGURED = "not_configured"
    NOT_RUN = "not_run"
    """The kernel writer had nothing to start the loop from (no reference IR)."""


class LlmPortResult(_Strict):
    status: LlmStatus
    source: str | None = Field(None, description="The verified kernel.rs, on success only.")
    attempts: list[LlmAttempt] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    reason: str = Field("", description="Why there is no source; empty on success.")
    model: str | None = None

    @model_validator(mode="after")
    def _source_exactly_on_success(self) -> Self:
        succeeded = self.status is LlmStatus.SUCCEEDED
        if succeeded != (self.source is not None):
            raise ValueError("a source is given exactly when the loop succeeded")
        if not succeeded and not self.reason.strip():
            raise ValueError(f"{self.status} needs a reason")
        return self


class LlmFallbackRecord(_Strict):
    """What stage B's LLM fallback did, as kernel_writer.json records it."""

    status: LlmStatus
    model: str | None = None
    reason: str = ""
    lifter_verdict: KernelWriterVerdict = Field(description="The lifter's verdict before it.")
    lifter_summary: str
    attempts: list[LlmAttempt] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    llm_entries: list[str] = Field(
        default_factory=list,
        description="Entries of the accepted kernel.rs the model wrote (the others are the "
        "lifter's, unchanged).",
    )
    seconds: float = Field(0.0, ge=0)
