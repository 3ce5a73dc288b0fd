"""Service settings, read from environment variables.

pydantic-settings is not a dependency, so this is a plain pydantic model filled
from `os.environ` by `load_settings`; every field maps to one upper-case
variable named in its description."""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "tileport"


class WorkerMode(StrEnum):
    INPROC = "inproc"
    CELERY = "celery"


class Settings(BaseModel):
    data_dir: Path = Field(DEFAULT_DATA_DIR, description="TILEPORT_DATA_DIR")
    database_url: str = Field("", description="DATABASE_URL; empty: SQLite file in data_dir")
    artifact_root: Path | None = Field(
        None, description="ARTIFACT_ROOT; default data_dir/artifacts"
    )
    source_root: Path | None = Field(
        None, description="SOURCE_ROOT: where JSON submissions may name kernel files"
    )
    api_tokens: dict[str, str] = Field(
        default_factory=dict, description="API_TOKENS: 'name:token,name2:token2'"
    )
    api_admins: list[str] = Field(
        default_factory=list,
        description="API_ADMINS: names of API tokens that may act on any caller's "
        "conversion (cancel it); every other token acts on its own only",
    )
    api_gpu_workers: list[str] = Field(
        default_factory=list,
        description="API_GPU_WORKERS: names of API tokens held by GPU hosts the service "
        "trusts; only their GPU results can make a run's gate PASS (anyone else's are "
        "recorded as user-reported)",
    )
    public_read: bool = Field(
        False,
        description="PUBLIC_READ: anyone may read runs, their artifacts and pages without "
        "a token; off, each caller reads its own runs (admins and GPU workers every run)",
    )
    github_webhook_secret: str = Field("", description="GITHUB_WEBHOOK_SECRET")
    github_api_url: str = Field("https://api.github.com", description="GITHUB_API_URL")
    github_token: str = Field("", description="GITHUB_TOKEN")
    github_kernel_dir: str = Field(
        "examples/kernels", description="GITHUB_KERNEL_DIR: kernels' folder in a repository"
    )
    github_port_label: str = Field("tileport:port", description="GITHUB_PORT_LABEL")
    github_tilegym_launches: str = Field(
        "tileport/launches.jsonl",
        description="GITHUB_TILEGYM_LAUNCHES: where a TileGym-layout repository keeps the "
        "launch records of its kernels (`tileport capture`)",
    )
    public_url: str = Field("", description="TILEPORT_PUBLIC_URL: base of links sent out")
    max_upload_bytes: int = Field(1_000_000, gt=0, description="MAX_UPLOAD_BYTES")
    queue_max_pending: int = Field(64, gt=0, description="QUEUE_MAX_PENDING")
    queue_max_per_caller: int = Field(
        16,
        gt=0,
        description="QUEUE_MAX_PER_CALLER: conversions one caller may have waiting or "
        "running; checked before a submission is read",
    )
    max_connections: int = Field(
        4096,
        gt=0,
        description="MAX_CONNECTIONS: open connections the server keeps (at most its "
        "descriptor limit less a reserve); beyond it a new one is closed at once",
    )
    max_connections_per_client: int = Field(
        64, gt=0, description="MAX_CONNECTIONS_PER_CLIENT: open connections per client address"
    )
    request_head_timeout_s: float = Field(
        10.0, gt=0, description="REQUEST_HEAD_TIMEOUT_S: time to send a request's headers"
    )
    request_body_timeout_s: float = Field(
        120.0, gt=0, description="REQUEST_BODY_TIMEOUT_S: time to send a request's body"
    )
    page_requests_per_minute: int = Field(
        120,
        gt=0,
        description="PAGE_REQUESTS_PER_MINUTE: page and sign-in requests per client address "
        "(a burst of this many, refilled over a minute); beyond it 429",
    )
    queue_retry_after_s: int = Field(30, gt=0, description="QUEUE_RETRY_AFTER_S")
    worker_mode: WorkerMode = Field(WorkerMode.INPROC, description="WORKER_MODE")
    worker_threads: int = Field(2, gt=0, description="WORKER_THREADS (inproc)")
    lease_s: float = Field(30.0, gt=0, description="WORKER_LEASE_S: lease before reclaim")
    poll_s: float = Field(1.0, gt=0, description="WORKER_POLL_S")
    max_attempts: int = Field(3, gt=0, description="WORKER_MAX_ATTEMPTS per conversion")
    job_wall_s: float = Field(
        4 * 3600.0, gt=0, description="JOB_WALL_S: one job's wall-clock limit; past it, error"
    )
    job_memory_mb: int = Field(
        16384,
        gt=0,
        description="JOB_MEMORY_MB: resident memory of one job's process tree; past it, error",
    )
    broker_url: str = Field("redis://127.0.0.1:6379/0", description="BROKER_URL")
    no_gpu: bool = Field(False, description="TILEPORT_NO_GPU: runs skip GPU stages")
    gpu_queues: list[str] = Field(
        default_factory=list,
        description="GPU_QUEUES: architectures with a GPU worker (Celery), e.g. 'sm_90,sm_100'",
    )

    @field_validator("github_api_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'tileport.db'}"

    @property
    def resolved_artifact_root(self) -> Path:
        return self.artifact_root or self.data_dir / "artifacts"


ENV_FIELDS: dict[str, str] = {
    "TILEPORT_DATA_DIR": "data_dir",
    "DATABASE_URL": "database_url",
    "ARTIFACT_ROOT": "artifact_root",
    "SOURCE_ROOT": "source_root",
    "API_TOKENS": "api_tokens",
    "API_ADMINS": "api_admins",
    "API_GPU_WORKERS": "api_gpu_workers",
    "PUBLIC_READ": "public_read",
    "GITHUB_WEBHOOK_SECRET": "github_webhook_secret",
    "GITHUB_API_URL": "github_api_url",
    "GITHUB_TOKEN": "github_token",
    "GITHUB_KERNEL_DIR": "github_kernel_dir",
    "GITHUB_PORT_LABEL": "github_port_label",
    "GITHUB_TILEGYM_LAUNCHES": "github_tilegym_launches",
    "TILEPORT_PUBLIC_URL": "public_url",
    "MAX_UPLOAD_BYTES": "max_upload_bytes",
    "QUEUE_MAX_PENDING": "queue_max_pending",
    "QUEUE_MAX_PER_CALLER": "queue_max_per_caller",
    "QUEUE_RETRY_AFTER_S": "queue_retry_after_s",
    "PAGE_REQUESTS_PER_MINUTE": "page_requests_per_minute",
    "MAX_CONNECTIONS": "max_connections",
    "MAX_CONNECTIONS_PER_CLIENT": "max_connections_per_client",
    "REQUEST_HEAD_TIMEOUT_S": "request_head_timeout_s",
    "REQUEST_BODY_TIMEOUT_S": "request_body_timeout_s",
    "WORKER_MODE": "worker_mode",
    "WORKER_THREADS": "worker_threads",
    "WORKER_LEASE_S": "lease_s",
    "WORKER_POLL_S": "poll_s",
    "WORKER_MAX_ATTEMPTS": "max_attempts",
    "JOB_WALL_S": "job_wall_s",
    "JOB_MEMORY_MB": "job_memory_mb",
    "BROKER_URL": "broker_url",
    "TILEPORT_NO_GPU": "no_gpu",
    "GPU_QUEUES": "gpu_queues",
}


def parse_tokens(text: str) -> dict[str, str]:
    """'ci:abc,alice:def' -> {'ci': 'abc', 'alice': 'def'}; a bare token is named by position."""
    tokens: dict[str, str] = {}
    for index, item in enumerate(part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, token = item.partition(":")
        tokens[name if sep else f"token{index}"] = token if sep else name
    return tokens


def _convert(field: str, raw: str) -> Any:
    if field == "api_tokens":
        return parse_tokens(raw)
    if field in ("no_gpu", "public_read"):
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    if field in ("api_admins", "api_gpu_workers"):
        return [name.strip() for name in raw.split(",") if name.strip()]
    if field == "gpu_queues":
        return [arch.strip() for arch in raw.split(",") if arch.strip()]
    return raw


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from the environment (or `environ`), with keyword overrides on top."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {
        field: _convert(field, env[name]) for name, field in ENV_FIELDS.items() if name in env
    }
    values.update(overrides)
    return Settings.model_validate(values)
