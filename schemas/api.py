"""Bodies of the service's REST API (`/v1`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from schemas.pipeline import RunOptions


class ErrorCode(StrEnum):
    INVALID_SPEC = "invalid_spec"
    NOT_A_KERNEL = "not_a_kernel"
    UPLOAD_TOO_LARGE = "upload_too_large"
    INVALID_REQUEST = "invalid_request"
    INVALID_SOURCE_PATH = "invalid_source_path"
    UNKNOWN_CONVERSION = "unknown_conversion"
    UNKNOWN_ARTIFACT = "unknown_artifact"
    INVALID_ARTIFACT_PATH = "invalid_artifact_path"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    NOT_CANCELLABLE = "not_cancellable"
    QUEUE_FULL = "queue_full"
    RATE_LIMITED = "rate_limited"
    BROKER_UNAVAILABLE = "broker_unavailable"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    BAD_SIGNATURE = "bad_signature"
    REPLAYED_DELIVERY = "replayed_delivery"
    MALFORMED_DELIVERY = "malformed_delivery"
    NOT_FOUND = "not_found"
    INVALID_OPTIONS = "invalid_options"
    NOT_AWAITING_GPU = "not_awaiting_gpu"
    INVALID_GPU_RESULTS = "invalid_gpu_results"
    INTERNAL = "internal_error"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    REQUIREMENT_MISSING = "requirement_missing"
    ARTIFACT_CORRUPT = "artifact_corrupt"


class ResultsTrust(StrEnum):
    """Who sent a run's GPU results, which decides whether they can make it pass."""

    GPU_WORKER = "gpu-worker"
    """A GPU worker of the service (through the broker) or a token in API_GPU_WORKERS."""
    USER_REPORTED = "user-reported"
    """The submitter or an admin: kept and shown, never a PASS."""


class ErrorDetail(BaseModel):
    code: ErrorCode
    message: str
    detail: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: `{"error": {"code": ..., "message": ..., "detail": {...}}}`."""

    error: ErrorDetail


class ConversionFromPath(BaseModel):
    """JSON submission naming files under the server's SOURCE_ROOT. The spec is read
    from `spec_path`, or given inline in `spec` (YAML/JSON text or an object), or
    found as `<stem>.port.yaml` beside `source_path`; the kernel source and the
    reference module are the files the spec names, beside the spec."""

    model_config = ConfigDict(extra="forbid")

    source_path: str | None = Field(None, min_length=1, max_length=500)
    spec_path: str | None = Field(None, min_length=1, max_length=500)
    spec: str | dict[str, Any] | None = None
    options: RunOptions = Field(default_factory=RunOptions)


class ConversionStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_GPU = "awaiting_gpu"
    """Every check that needs no GPU passed; the run waits for the results of its bundle."""
    FINISHED = "finished"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in {
            ConversionStatus.FINISHED,
            ConversionStatus.ERROR,
            ConversionStatus.CANCELLED,
        }


class Links(BaseModel):
    self: str
    web: str
    artifacts: str


class ConversionAccepted(BaseModel):
    id: str
    status: ConversionStatus
    operator: str
    duplicate: bool = Field(False, description="True when an Idempotency-Key matched")
    links: Links


class StageView(BaseModel):
    stage: str
    attempt: int
    verdict: str
    verdict_class: str | None
    summary: str
    report_path: str | None
    report_url: str | None
    started_at: datetime
    finished_at: datetime
    duration_s: float
    worker_attempt: int


class GpuCompletion(BaseModel):
    """How a run awaiting a GPU is completed: `tileport gpu-run` on its bundle, results
    sent to `results_url`."""

    bundle: str = Field(description="The bundle's folder, relative to the run directory.")
    bundle_url: str = Field(description="Its manifest.json; every file is an artifact.")
    results_url: str = Field(description="POST the result folder here (multipart `files`).")
    command: str = Field(description="The command that completes the run from a GPU host.")


class ConversionItem(BaseModel):
    id: str
    operator: str
    status: ConversionStatus
    outcome: str | None
    gate_verdict: str | None
    reached_gpu_boundary: bool = Field(
        description="The run stopped at the GPU boundary with every check that needs no GPU "
        "passed (status awaiting_gpu until its GPU results arrive)."
    )
    level: str | None = Field(
        description="The sameness the kernel writer proved, e.g. "
        "'IR exact, SASS-identical sm_90/sm_100'."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    headline: dict[str, Any]
    links: Links


class ConversionView(ConversionItem):
    kernel: str
    source_name: str
    spec_name: str
    options: dict[str, Any]
    origin: dict[str, Any]
    submitted_by: str
    worker_attempts: int
    cancel_requested: bool
    error: str | None
    duration_s: float | None
    stages: list[StageView]
    llm_tokens: int
    llm_cost_usd: float
    gpu: GpuCompletion | None = Field(
        None, description="While awaiting a GPU: the bundle and how to complete the run."
    )
    gpu_results_trust: ResultsTrust | None = Field(
        None, description="Who sent the GPU results the run was finished from."
    )


class GpuResultsAnswer(BaseModel):
    conversion_id: str
    status: ConversionStatus
    resumed: bool = Field(description="The run was queued to finish from these results.")
    results: str = Field(description="Where the folder was kept, relative to the run.")
    correctness: str
    perf: str
    statement: str = Field(description="What ran where, from gpu_run.json.")
    trust: ResultsTrust = Field(
        description="gpu-worker, or user-reported: then the run's gate is at best UNVERIFIED."
    )


class ConversionPage(BaseModel):
    items: list[ConversionItem]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class ArtifactView(BaseModel):
    path: str
    kind: str
    sha256: str | None
    size: int
    url: str


class ArtifactList(BaseModel):
    conversion_id: str
    items: list[ArtifactView]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    checks: dict[str, str]


class WebhookAnswer(BaseModel):
    delivery: str
    status: str
    reason: str = ""
    conversions: list[str] = Field(default_factory=list)
