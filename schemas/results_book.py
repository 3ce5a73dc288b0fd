"""The results book: what several GPU runs (`tileport gpu-run`) found, side by side.

A book gathers the `gpu_run.json` (and, when present, `correctness.json` and the
host-side `investigation.json` of `tileport investigate`) of one run per kernel,
keeps every timing column the runs wrote unchanged, and checks the whole against
the project's targets. `tileport results-book` writes it as
`<name>.json` beside a markdown table and an SVG chart.
"""

from __future__ import annotations

import math
import statistics
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from schemas.gpu import Band, GpuEnvironment, HostOverhead, TimingColumn, outside_band
from schemas.reports import InvestigationReport, geomean_line
from schemas.run_layout import safe_name

BookName = Annotated[str, AfterValidator(safe_name)]
"""Used as a file name: `<name>.json`, `<name>.md`, `<name>.svg`."""

CaseSource = Literal["correctness.json", "gpu_run.json"]
TargetId = Literal["a", "b", "c", "d", "e", "f"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MachineRecord(GpuEnvironment):
    """One distinct GPU and driver the runs ran on, with the toolchain they reported."""

    kernels: list[str] = Field(min_length=1, description="The kernels whose runs used it.")
    differences: list[str] = Field(
        default_factory=list,
        description="Fields on which runs on this GPU and driver disagreed; the values "
        "above are those of the first run.",
    )


class BookCase(_Strict):
    """One correctness case, from `gpu_run.json` and the matching `correctness.json` case."""

    config_id: str
    seed: int
    passed: bool
    dtype: str | None = None
    shapes: dict[str, list[int]] = Field(default_factory=dict)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    ragged: bool | None = None
    port_status: int | None = None
    matches_reference_kernel: bool | None = None


class BookTiming(_Strict):
    """One timed configuration; the three columns are copied from the run unchanged."""

    config_id: str
    dtype: str | None = None
    port: TimingColumn
    reference: TimingColumn = Field(description="The cuTile Python reference kernel.")
    torch: TimingColumn | None = None
    control: TimingColumn | None = Field(
        None, description="The reference timed again as its own contender (A/A)."
    )
    ratio: float = Field(gt=0, description="Port median / reference median.")
    control_ratio: float | None = Field(
        None, gt=0, description="Control median / reference median: the protocol's noise."
    )
    rounds: int | None = Field(None, ge=1, description="Interleaved rounds the run took.")
    cap_hit: bool = False
    ratio_interval: Band | None = Field(None, description="Bootstrap 95 % interval of ratio.")
    aa_band: Band | None = Field(
        None, description="Bootstrap 95 % interval of control / reference (A/A)."
    )

    @property
    def outside_aa_band(self) -> bool:
        """Not what identical kernels measure here: stage F's, never averaged away."""
        return outside_band(self.ratio, self.aa_band, self.ratio_interval)


class KernelEntry(_Strict):
    name: str = Field(min_length=1, description="The operator.")
    run: str = Field(description="The run folder's name.")
    ran_on_gpu: bool
    statement: str
    correctness_verdict: str
    perf_verdict: str
    case_source: CaseSource = Field(description="Where each case's pass/fail was read.")
    cases: list[BookCase] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    configurations_checked: int = Field(ge=0)
    configurations_correct: int = Field(ge=0)
    failed_configurations: list[str] = Field(default_factory=list)
    worst_max_abs_error: float | None = None
    worst_max_rel_error: float | None = None
    timings: list[BookTiming] = Field(default_factory=list)
    geomean_ratio: float | None = None
    geomean_interval: Band | None = Field(
        None,
        description="Bootstrap 95 % interval of the geomean, from the samples the run kept "
        "(None when it kept none).",
    )
    min_ratio: float | None = None
    max_ratio: float | None = None
    control_geomean_ratio: float | None = Field(
        None, description="Geomean of control/reference: what identical kernels measure."
    )
    host_overhead: list[HostOverhead] = Field(default_factory=list)
    investigation: InvestigationReport | None = Field(
        None,
        description="Stage F's host-side investigation of the run (`investigation.json`, "
        "checked against gpu_run.json's figures), when the folder has one.",
    )
    notes: list[str] = Field(default_factory=list, description="The run's own notes.")

    @property
    def stage_f_configurations(self) -> list[str]:
        """The configurations outside their A/A band."""
        return [timing.config_id for timing in self.timings if timing.outside_aa_band]

    @property
    def correct(self) -> bool:
        """Every checked configuration correct, and the run itself said ALL_PASS."""
        return (
            self.correctness_verdict == "ALL_PASS"
            and self.configurations_checked > 0
            and not self.failed_configurations
        )

    @model_validator(mode="after")
    def _figures_match_rows(self) -> Self:
        if self.configurations_correct > self.configurations_checked:
            raise ValueError(f"{self.name}: more correct configurations than checked")
        ratios = [timing.ratio for timing in self.timings]
        expected = statistics.geometric_mean(ratios) if ratios else None
        if not _same(expected, self.geomean_ratio):
            raise ValueError(f"{self.name}: geomean {self.geomean_ratio} != rows ({expected})")
        return self


class BookOverall(_Strict):
    kernels: int = Field(ge=0)
    configurations_timed: int = Field(ge=0)
    geomean_ratio: float | None = Field(None, description="Over every timed configuration.")
    geomean_interval: Band | None = Field(
        None,
        description="Bootstrap 95 % interval of the geomean over every timed configuration, "
        "when every run kept its samples.",
    )
    geomean_line: str
    control_geomean_ratio: float | None = Field(
        None, description="Geomean of control/reference over every configuration that has one."
    )
    control_spread: tuple[float, float] | None = Field(
        None, description="Lowest and highest control/reference of one configuration."
    )
    configurations_checked: int = Field(ge=0)
    configurations_correct: int = Field(ge=0)
    correct_fraction: float | None = Field(None, ge=0, le=1)


class TargetCheck(_Strict):
    id: TargetId
    description: str
    passed: bool
    missing: list[str] = Field(
        default_factory=list,
        description="Kernels that miss it on their own; for the whole-book geomean (b), "
        "the kernels above the line, which the others may offset.",
    )
    detail: str = ""


class ResultsBook(_Strict):
    schema_version: Literal[1] = 1
    name: BookName
    machines: list[MachineRecord] = Field(default_factory=list)
    crates: dict[str, str] = Field(
        default_factory=dict,
        description="The cutile crates the kernel library was built with (its Cargo.lock).",
    )
    kernels: list[KernelEntry] = Field(min_length=1)
    sass_identical_kernels: list[str] = Field(
        default_factory=list, description="Kernels held to the 0.99-1.01 band (target d)."
    )
    overall: BookOverall
    targets: list[TargetCheck]

    @property
    def all_targets_met(self) -> bool:
        return all(target.passed for target in self.targets)

    @model_validator(mode="after")
    def _overall_matches_kernels(self) -> Self:
        names = [kernel.name for kernel in self.kernels]
        if len(names) != len(set(names)):
            raise ValueError(f"a kernel appears twice: {names}")
        ratios = [timing.ratio for kernel in self.kernels for timing in kernel.timings]
        expected = statistics.geometric_mean(ratios) if ratios else None
        overall = self.overall
        if overall.kernels != len(self.kernels) or overall.configurations_timed != len(ratios):
            raise ValueError("overall counts do not match the kernels")
        if not _same(expected, overall.geomean_ratio):
            raise ValueError(f"overall geomean {overall.geomean_ratio} != rows ({expected})")
        if overall.geomean_line != geomean_line(expected, len(ratios)):
            raise ValueError("overall geomean_line does not match the rows")
        # Books written before the parity target (f) existed check a to e.
        if sorted(target.id for target in self.targets) not in (list("abcde"), list("abcdef")):
            raise ValueError("a book checks each target a to f once (a to e before f existed)")
        return self


def _same(expected: float | None, stored: float | None) -> bool:
    if expected is None or stored is None:
        return expected is None and stored is None
    return math.isclose(expected, stored)
