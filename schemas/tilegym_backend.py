"""What `tileport tilegym add` and `tileport tilegym test` report: an op delivered as
TileGym's own cutile-rs backend, and TileGym's test files run against it."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from schemas.verdicts import KernelWriterVerdict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AddOutcome(StrEnum):
    ADDED = "added"
    UNCHANGED = "unchanged"  # the checkout already holds exactly what the command writes
    REFUSED = "refused"


class KernelPort(_Strict):
    """One kernel of the op and how its port came out."""

    kernel: str
    spec: str
    verdict: KernelWriterVerdict
    summary: str


class AddResult(_Strict):
    op: str
    outcome: AddOutcome
    reason: str = Field("", description="Why the op was refused; empty otherwise.")
    modules: list[str] = Field(default_factory=list, description="The op's cutile modules.")
    kernels: list[KernelPort] = Field(default_factory=list)
    changed: list[str] = Field(
        default_factory=list, description="Files written, relative to the checkout."
    )
    patch: str = Field("", description="`git diff` of the checkout against its HEAD.")


class OpTestResult(_Strict):
    op: str
    passed: int
    failed: int
    skipped: int
    errors: int = 0
    command: str
    exit_code: int
    seconds: float


class TestRunReport(_Strict):
    """`bench/results/tilegym-tests-<date>.json`."""

    date: str
    tilegym: str = Field(description="The checkout the tests ran in.")
    gpu: str
    driver: str
    toolchain: str
    ops: list[OpTestResult]
