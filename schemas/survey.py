"""The survey of a kernel library (`tileport survey`): for each recorded kernel,
how far it got through writing its spec, porting it (stage B), converting it
without a GPU and bundling the runs for one GPU job, and why it stopped there.
Written as `survey.json` beside `survey.md`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.verdicts import GateVerdict, KernelWriterVerdict


@dataclass(frozen=True)
class SurveyLayout:
    """Where a survey writes, under its DIR."""

    root: Path

    @property
    def specs(self) -> Path:
        return self.root / "specs"

    def port_dir(self, spec: str) -> Path:
        """`tileport port-kernel`'s --out of one spec."""
        return self.root / "ports" / spec

    def run_dir(self, spec: str) -> Path:
        """`tileport convert`'s run directory of one spec."""
        return self.root / "runs" / spec

    @property
    def bundles(self) -> Path:
        """One bundle per run at the GPU boundary, `bundles/<operator>`."""
        return self.root / "bundles"

    @property
    def archive(self) -> Path:
        """The bundles and their runner for a GPU host without a checkout."""
        return self.root / "bundles.tar.xz"

    @property
    def report(self) -> Path:
        return self.root / "survey.json"

    @property
    def markdown(self) -> Path:
        return self.root / "survey.md"


class SurveyStage(StrEnum):
    """The survey's stages, in the order a kernel goes through them."""

    SPECS = "specs"
    PORT = "port"
    CONVERT = "convert"
    BUNDLE = "bundle"


STAGE_ORDER: Final = tuple(SurveyStage)


class SpecsVerdict(StrEnum):
    WRITTEN = "WRITTEN"
    NO_SPEC = "NO_SPEC"


class BundleVerdict(StrEnum):
    BUNDLED = "BUNDLED"
    SKIPPED = "SKIPPED"
    """The run reached the GPU boundary but its port could not join the batch."""
    FAILED = "FAILED"
    """The batch as a whole failed (the library did not build, a bundle was not made)."""


RAISED: Final = "RAISED"
"""The verdict of a stage that raised for the kernel; the detail names the exception."""

PASSING_VERDICT: Final[Mapping[SurveyStage, str]] = {
    SurveyStage.SPECS: SpecsVerdict.WRITTEN,
    SurveyStage.PORT: KernelWriterVerdict.COMPILED,
    SurveyStage.CONVERT: GateVerdict.AWAITING_GPU,
    SurveyStage.BUNDLE: BundleVerdict.BUNDLED,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KernelRow(_Strict):
    """One kernel: the furthest stage it reached and what that stage said."""

    kernel: str
    file: str = Field(description="The kernel's module file, as the records name it.")
    spec: str | None = Field(None, description="The spec's name (its operator), once written.")
    stage: SurveyStage = Field(description="The furthest stage the kernel reached.")
    verdict: str = Field(description="That stage's verdict.")
    detail: str = Field(
        description="The stage's own one line: why the kernel stopped there, or what it reached."
    )
    seconds: float = Field(0.0, ge=0, description="Time spent on the kernel over every stage.")

    def passed(self, stage: SurveyStage) -> bool:
        """Whether the kernel got through `stage`: a later one ran, or this one passed."""
        reached, asked = STAGE_ORDER.index(self.stage), STAGE_ORDER.index(stage)
        if reached != asked:
            return reached > asked
        return self.verdict == PASSING_VERDICT[stage]


class SurveyTotals(_Strict):
    kernels: int
    specs_written: int
    compiled: int
    at_gpu_boundary: int
    bundled: int

    @classmethod
    def of(cls, rows: Sequence[KernelRow]) -> Self:
        def count(stage: SurveyStage) -> int:
            return sum(row.passed(stage) for row in rows)

        return cls(
            kernels=len(rows),
            specs_written=count(SurveyStage.SPECS),
            compiled=count(SurveyStage.PORT),
            at_gpu_boundary=count(SurveyStage.CONVERT),
            bundled=count(SurveyStage.BUNDLE),
        )

    def line(self) -> str:
        return (
            f"{self.kernels} kernel(s): {self.specs_written} spec(s) written, "
            f"{self.compiled} COMPILED, {self.at_gpu_boundary} at the GPU boundary, "
            f"{self.bundled} bundled"
        )


class SurveyReport(_Strict):
    command: str = Field(description="The command line that made the survey.")
    through: SurveyStage = Field(description="The stage every kernel was taken up to.")
    rows: list[KernelRow]
    totals: SurveyTotals
    archive: str | None = Field(
        None, description="The GPU job archive of every bundled run, when one was written."
    )

    @classmethod
    def of(
        cls,
        command: str,
        through: SurveyStage,
        rows: Sequence[KernelRow],
        archive: str | None = None,
    ) -> Self:
        return cls(
            command=command,
            through=through,
            rows=list(rows),
            totals=SurveyTotals.of(rows),
            archive=archive,
        )

    @model_validator(mode="after")
    def _totals_count_the_rows(self) -> Self:
        if self.totals != SurveyTotals.of(self.rows):
            raise ValueError("the totals must count the rows")
        return self

    @property
    def every_kernel_through(self) -> bool:
        """Whether there are kernels and each got through the stage asked for."""
        return bool(self.rows) and all(row.passed(self.through) for row in self.rows)
