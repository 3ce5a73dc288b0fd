"""The IR diff report: what `tileport ir diff` prints as JSON and what the
IR-diff analyst stage routes from. Classification follows docs/PIPELINE.md,
"IR diff: what must match"."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class Severity(StrEnum):
    CRITICAL = "critical"  # any one fails the port
    WARN = "warn"  # same semantics likely, may cost speed: a note
    EQUIVALENT = "equivalent"  # a known semantically equivalent form
    NOISE = "noise"  # no effect on the code (dead constants, extra assumes)


class Owner(StrEnum):
    """Who fixes it: the kernel writer, the host/FFI builder, nobody (an
    upstream compiler or front-end difference), or nobody (an equivalence)."""

    KERNEL = "kernel"
    HOST = "host"
    COMPILER = "compiler"
    EQUIVALENCE = "equivalence"


class RootCause(StrEnum):
    KERNEL_BUG = "kernel_bug"
    DSL_LIMITATION = "dsl_limitation"
    COMPILER_BUG = "compiler_bug"
    SEMANTIC_EQUIVALENCE = "semantic_equivalence"


class Level(StrEnum):
    """The IR-level sameness; `sass-identical` is decided by the SASS compare."""

    EXACT = "exact"
    EQUIVALENT = "equivalent"
    DIFFERENT = "different"


class OpSite(BaseModel):
    """Where an op sits on one side: entry index, 1-based line, op text."""

    entry: int = 0
    line: int
    op: str
    text: str = Field(description="The op's line as printed, trimmed.")
    location: str | None = Field(None, description="Source file:line:col, when printed (-g).")


class Finding(BaseModel):
    severity: Severity
    category: str = Field(description="e.g. padding_value, memory_op_family, reduction.")
    op: str = Field(description="The op the finding is about (reference side first).")
    message: str
    ref: OpSite | None = None
    gen: OpSite | None = None
    ref_attributes: dict[str, str] = Field(default_factory=dict)
    gen_attributes: dict[str, str] = Field(default_factory=dict)
    owner: Owner
    root_cause: RootCause
    fix: str = Field("", description="What the owner should change, when known.")


class SeverityCounts(BaseModel):
    critical: int = 0
    warn: int = 0
    equivalent: int = 0
    noise: int = 0


class EntrySummary(BaseModel):
    ref_symbol: str | None
    gen_symbol: str | None
    ref_ops: int
    gen_ops: int
    exact: bool


class DiffReport(BaseModel):
    exact: bool = Field(
        description="Canonical forms equal (names, entry symbol, dead constants aside)."
    )
    level: Level = Field(description="exact / equivalent / different, SASS not considered.")
    counts: SeverityCounts
    findings: list[Finding]
    entries: list[EntrySummary]
    ref_printer: str = "tileirdisasm"
    gen_printer: str = "tileirdisasm"
