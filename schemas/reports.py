"""One report model per stage, written by the stage and checked by the final gate.

Writer and checker share these models, so a report that loads is a report
whose verdict agrees with its own content: each model's validators refuse a
verdict the content does not support (a PASS preflight with a missing tool,
a DONE perf report whose geomean exceeds the limit, an ALL_PASS correctness
report that never ran on a GPU, ...).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, ClassVar, Final, Literal, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from schemas.gpu import Band, outside_band
from schemas.llm import LlmFallbackRecord, LlmStatus
from schemas.pipeline import Outcome, Stage
from schemas.run_layout import RunLayout, check_run_relative, safe_name, write_text_atomic
from schemas.verdicts import (
    PERF_RATIO_LIMIT,
    AnalyzerVerdict,
    CorrectnessVerdict,
    DiffVerdict,
    FailureClass,
    FixOwner,
    GateVerdict,
    HostBuildVerdict,
    InvestigationVerdict,
    KernelWriterVerdict,
    PerfVerdict,
    PreflightVerdict,
    SamenessLevel,
)

RunPath = Annotated[str, AfterValidator(check_run_relative)]
"""A path relative to the run directory; absolute paths and `..` are refused."""

SafeName = Annotated[str, AfterValidator(safe_name)]
Scalar = bool | int | float | str
Shape = list[Annotated[int, Field(ge=0)]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StageReport(_Strict):
    """Fields every report carries. `run_id` and `attempt` tie a file on disk to
    one execution of one run, so a stale file can never be taken for a fresh one."""

    FILE_NAME: ClassVar[str] = ""

    schema_version: Literal[1] = 1
    run_id: str = Field(min_length=1)
    stage: Stage
    attempt: int = Field(ge=1)
    verdict: str
    summary: str = Field("", description="One line a person reads first; required unless success.")
    notes: list[str] = Field(default_factory=list)

    def routing_class(self) -> str | None:
        """The qualifier routing reads beside the verdict (class or owner), if any."""
        return None

    def artifact_paths(self) -> list[str]:
        """Run-relative files this report vouches for; the gate checks they exist."""
        return []

    def _require_reason(self) -> None:
        if not self.summary.strip():
            raise ValueError(f"verdict {self.verdict} needs a summary that says why")


# --- preflight ---------------------------------------------------------------


class PreflightCheck(_Strict):
    name: str = Field(min_length=1)
    ok: bool
    detail: str = ""
    remedy: str = Field("", description="What to do about it; required when not ok.")


class PreflightReport(StageReport):
    FILE_NAME: ClassVar[str] = "preflight.json"

    stage: Literal[Stage.PREFLIGHT] = Stage.PREFLIGHT
    verdict: PreflightVerdict
    checks: list[PreflightCheck] = Field(min_length=1)

    @model_validator(mode="after")
    def _verdict_matches_checks(self) -> Self:
        failed = [check for check in self.checks if not check.ok]
        if self.verdict is PreflightVerdict.PASS and failed:
            raise ValueError(f"PASS with failed checks: {[c.name for c in failed]}")
        if self.verdict is PreflightVerdict.BLOCKED:
            if not failed:
                raise ValueError("BLOCKED but every check is ok")
            vague = [check.name for check in failed if not check.remedy.strip()]
            if vague:
                raise ValueError(f"failed checks without a remedy: {vague}")
            self._require_reason()
        return self


# --- analyzer: analysis.json ---------------------------------------------------


class ReferenceBackend(StrEnum):
    CUTILE_PYTHON = "cutile_python"
    TRITON_TILEIR = "triton_tileir"


class LaunchPath(StrEnum):
    DIRECT = "direct"
    AUTOTUNED = "autotuned"


class KernelPattern(StrEnum):
    SINGLE = "single"
    MULTI_VARIANT = "multi_variant"


class ConfigUse(StrEnum):
    CORRECTNESS = "correctness"
    PERF = "perf"


class DtypeLowering(_Strict):
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    where: str = ""


class OpsUsed(_Strict):
    """What the kernel does, so that semantics hold beyond the one dumped shape."""

    ops: list[str] = Field(min_length=1)
    uses_cdiv: bool
    check_bounds: bool
    padding_modes: list[str] = Field(default_factory=list)
    dtype_lowering: list[DtypeLowering] = Field(default_factory=list)


class OperatorConfig(_Strict):
    """One test/perf configuration of the operator."""

    id: SafeName
    dtype: str = Field(min_length=1)
    shapes: dict[str, Shape] = Field(min_length=1)
    constants: dict[str, Scalar] = Field(default_factory=dict)
    uses: list[ConfigUse] = Field(default_factory=lambda: [ConfigUse.CORRECTNESS, ConfigUse.PERF])


class ArrayParam(_Strict):
    """The facts cuTile specialises on at launch; an export reproduces the
    reference IR only if it carries the same ones."""

    name: str = Field(min_length=1)
    dtype: str = Field(min_length=1)
    ndim: int = Field(ge=0)
    shape_divisible_by: list[int | None] | None = None
    stride_divisible_by: list[int | None] | None = None
    stride_constant: list[int | None] | None = None
    base_addr_divisible_by: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _per_dim_lists_match_rank(self) -> Self:
        for field in ("shape_divisible_by", "stride_divisible_by", "stride_constant"):
            values: list[int | None] | None = getattr(self, field)
            if values is not None and len(values) != self.ndim:
                raise ValueError(f"{self.name}.{field} has {len(values)} entries, ndim {self.ndim}")
        return self


class Variant(_Strict):
    name: SafeName
    kernel_function: str = Field(min_length=1)
    dispatch_condition: str = Field(min_length=1, description="'always' for single variants.")
    constants: dict[str, Scalar] = Field(default_factory=dict)
    reference_ir: RunPath
    reference_backend: ReferenceBackend
    arrays: list[ArrayParam] = Field(default_factory=list)
    autotune_configs: list[dict[str, Scalar]] = Field(default_factory=list)


class CorrectnessReference(_Strict):
    function: str | None = Field(None, description="None: the reference kernel is the oracle.")
    origin: str = Field(min_length=1, description="Where the reference function came from.")


class Tolerance(_Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    source: str = Field(min_length=1, description="The operator test it was taken from.")


class AutotuneSpace(_Strict):
    key: list[str] = Field(default_factory=list)
    space: list[dict[str, Scalar]] = Field(min_length=1)


class EntrySymbolPolicy(_Strict):
    c_symbol: str = Field(pattern=r"^cutile_[a-z0-9_]+$")
    rust_entries: dict[str, str] = Field(min_length=1, description="variant -> Rust entry.")
    ir_entry_compared: Literal["modulo_name"] = "modulo_name"


class BaselineTiming(_Strict):
    config_id: str
    variant: str
    backend: ReferenceBackend
    median_us: float = Field(gt=0)
    gpu: str = Field(min_length=1)


class KernelAnalysis(_Strict):
    """The contract every later stage routes from."""

    operator: SafeName
    kernel_name: str = Field(min_length=1)
    source_file: str = Field(min_length=1)
    reference_backend: ReferenceBackend
    launch_path: LaunchPath
    pattern: KernelPattern
    ops: OpsUsed
    configs: list[OperatorConfig] = Field(min_length=1)
    variants: list[Variant] = Field(min_length=1)
    config_variants: dict[str, str]
    correctness_reference: CorrectnessReference
    tolerances: dict[str, Tolerance] = Field(min_length=1, description="dtype -> tolerance.")
    autotune: AutotuneSpace | None = None
    entry_symbols: EntrySymbolPolicy
    baselines: list[BaselineTiming] = Field(default_factory=list)

    def variant_names(self) -> list[str]:
        return [variant.name for variant in self.variants]

    @model_validator(mode="after")
    def _cross_references_hold(self) -> Self:
        config_ids = [config.id for config in self.configs]
        variant_names = self.variant_names()
        _require_unique("config id", config_ids)
        _require_unique("variant name", variant_names)
        if set(self.config_variants) != set(config_ids):
            raise ValueError("config_variants must map every config id, and only those")
        unknown = set(self.config_variants.values()) - set(variant_names)
        if unknown:
            raise ValueError(f"config_variants names unknown variants: {sorted(unknown)}")
        untolerated = {config.dtype for config in self.configs} - set(self.tolerances)
        if untolerated:
            raise ValueError(f"no tolerance for dtypes {sorted(untolerated)}")
        if set(self.entry_symbols.rust_entries) != set(variant_names):
            raise ValueError("entry_symbols.rust_entries must name one entry per variant")
        self._pattern_matches_variants()
        if self.launch_path is LaunchPath.AUTOTUNED and self.autotune is None:
            raise ValueError("autotuned launch path without an autotune space")
        for baseline in self.baselines:
            if baseline.config_id not in config_ids or baseline.variant not in variant_names:
                raise ValueError(f"baseline for unknown config/variant: {baseline.config_id}")
        return self

    def _pattern_matches_variants(self) -> None:
        single = len(self.variants) == 1
        if single != (self.pattern is KernelPattern.SINGLE):
            raise ValueError(f"pattern {self.pattern} with {len(self.variants)} variant(s)")


class AnalysisReport(StageReport):
    FILE_NAME: ClassVar[str] = "analysis.json"

    stage: Literal[Stage.ANALYZER] = Stage.ANALYZER
    verdict: AnalyzerVerdict
    analysis: KernelAnalysis | None = None
    problems: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _pass_has_analysis(self) -> Self:
        if self.verdict is AnalyzerVerdict.PASS:
            if self.analysis is None:
                raise ValueError("PASS without an analysis")
        else:
            self._require_reason()
        return self

    def artifact_paths(self) -> list[str]:
        if self.analysis is None:
            return []
        return [variant.reference_ir for variant in self.analysis.variants]


# --- B kernel writer -------------------------------------------------------------


class WriterKind(StrEnum):
    LIFTER = "lifter"
    LLM = "llm"


class KernelWriterReport(StageReport):
    FILE_NAME: ClassVar[str] = "kernel_writer.json"

    stage: Literal[Stage.KERNEL_WRITER] = Stage.KERNEL_WRITER
    verdict: KernelWriterVerdict
    writer: WriterKind = WriterKind.LIFTER
    kernel_rs: RunPath | None = None
    generated_ir: dict[str, RunPath] = Field(default_factory=dict, description="variant -> IR.")
    build_log: RunPath | None = None
    pipeline_check_passed: bool = False
    ir_self_check_passed: bool = False
    unsupported_constructs: list[str] = Field(default_factory=list)
    llm_attempts: int = Field(0, ge=0)
    llm: LlmFallbackRecord | None = Field(
        None, description="What the LLM fallback did, when it ran (`--llm`, the lifter stopped)."
    )

    @model_validator(mode="after")
    def _writer_is_recorded(self) -> Self:
        attempts = len(self.llm.attempts) if self.llm is not None else 0
        if self.llm_attempts != attempts:
            raise ValueError(f"llm_attempts is {self.llm_attempts}, the record has {attempts}")
        succeeded = self.llm is not None and self.llm.status is LlmStatus.SUCCEEDED
        if (self.writer is WriterKind.LLM) != succeeded:
            raise ValueError("the writer is the LLM exactly when its fallback succeeded")
        return self

    @model_validator(mode="after")
    def _compiled_is_proven(self) -> Self:
        if self.verdict is KernelWriterVerdict.COMPILED:
            if self.kernel_rs is None or not self.generated_ir:
                raise ValueError("COMPILED without kernel.rs or generated IR")
            if not (self.pipeline_check_passed and self.ir_self_check_passed):
                raise ValueError("COMPILED needs both the pipeline check and the IR self-check")
        else:
            self._require_reason()
        return self

    def artifact_paths(self) -> list[str]:
        paths = [*self.generated_ir.values()]
        paths += [p for p in (self.kernel_rs, self.build_log) if p is not None]
        return paths


# --- D host/FFI builder and correctness -------------------------------------------


class CheckResult(_Strict):
    name: str = Field(min_length=1)
    passed: bool
    detail: str = ""


class AbiCheck(_Strict):
    """One ABI error path exercised through cffi: it must return its own code."""

    case: str = Field(min_length=1)
    expected_code: int
    returned_code: int | None = None

    @property
    def passed(self) -> bool:
        return self.returned_code == self.expected_code


class HostBuildReport(StageReport):
    FILE_NAME: ClassVar[str] = "host_build.json"

    stage: Literal[Stage.HOST_BUILDER] = Stage.HOST_BUILDER
    verdict: HostBuildVerdict
    verdict_class: FailureClass | None = None
    c_symbol: str | None = Field(None, pattern=r"^cutile_[a-z0-9_]+$")
    ffi_rs: RunPath | None = None
    wrapper: RunPath | None = None
    library: RunPath | None = None
    host_checks: list[CheckResult] = Field(default_factory=list)
    abi_checks: list[AbiCheck] = Field(default_factory=list)
    correctness_report: RunPath | None = None

    def host_part_passed(self) -> bool:
        """Library build, pipeline check and ABI checks: what needs no GPU."""
        built = None not in (self.ffi_rs, self.wrapper, self.library)
        checks = bool(self.host_checks) and all(check.passed for check in self.host_checks)
        abi = bool(self.abi_checks) and all(check.passed for check in self.abi_checks)
        return built and checks and abi

    @model_validator(mode="after")
    def _verdict_matches_content(self) -> Self:
        if self.verdict is HostBuildVerdict.ALL_PASS:
            if self.verdict_class is not None:
                raise ValueError("ALL_PASS carries no failure class")
            if not self.host_part_passed() or self.correctness_report is None:
                raise ValueError("ALL_PASS needs the host checks, ABI checks and correctness")
            return self
        self._require_reason()
        if self.verdict is HostBuildVerdict.FAIL and self.verdict_class is FailureClass.ENV:
            raise ValueError("an environment problem is BLOCKED env, not FAIL")
        return self

    def routing_class(self) -> str | None:
        return None if self.verdict_class is None else self.verdict_class.value

    def artifact_paths(self) -> list[str]:
        optional = (self.ffi_rs, self.wrapper, self.library, self.correctness_report)
        return [path for path in optional if path is not None]


class CorrectnessCase(_Strict):
    config_id: str = Field(min_length=1)
    dtype: str = Field(min_length=1)
    seed: int
    shapes: dict[str, Shape] = Field(min_length=1)
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    nonfinite_outputs: bool = Field(False, description="NaN/inf left in outputs (poison).")
    message: str = ""

    @model_validator(mode="after")
    def _nonfinite_never_passes(self) -> Self:
        if self.passed and self.nonfinite_outputs:
            raise ValueError(f"{self.config_id}: a case with non-finite outputs cannot pass")
        return self


class CorrectnessReport(StageReport):
    FILE_NAME: ClassVar[str] = "correctness.json"

    stage: Literal[Stage.HOST_BUILDER] = Stage.HOST_BUILDER
    verdict: CorrectnessVerdict
    ran_on_gpu: bool
    gpu: str | None = None
    cases: list[CorrectnessCase] = Field(default_factory=list)

    MIN_SEEDS: ClassVar[int] = 2

    @model_validator(mode="after")
    def _verdict_matches_cases(self) -> Self:
        if not self.ran_on_gpu:
            if self.verdict is not CorrectnessVerdict.BLOCKED or self.cases:
                raise ValueError("without a GPU run the only verdict is BLOCKED, with no cases")
        elif self.gpu is None:
            raise ValueError("a GPU run must name its GPU")
        failed = [case.config_id for case in self.cases if not case.passed]
        if self.verdict is CorrectnessVerdict.ALL_PASS:
            if not self.cases or failed:
                raise ValueError(f"ALL_PASS with no cases or failed cases {failed}")
            if len({case.seed for case in self.cases}) < self.MIN_SEEDS:
                raise ValueError(f"ALL_PASS needs at least {self.MIN_SEEDS} distinct seeds")
        if self.verdict is CorrectnessVerdict.FAIL and not failed:
            raise ValueError("FAIL without a failed case")
        if self.verdict is not CorrectnessVerdict.ALL_PASS:
            self._require_reason()
        return self

    def gpu_statement(self) -> str:
        """A plain sentence on whether anything ran on a GPU."""
        if not self.ran_on_gpu:
            return "Nothing was run on a GPU: correctness is unproven."
        return f"Correctness ran on {self.gpu}: {len(self.cases)} cases."


# --- E perf validator --------------------------------------------------------------


class PerfRow(_Strict):
    """One configuration, port and baseline interleaved on the same GPU."""

    config_id: str = Field(min_length=1)
    variant: str = Field(min_length=1)
    dtype: str = Field(min_length=1)
    shapes: dict[str, Shape] = Field(min_length=1)
    port_us: float = Field(gt=0, description="Median CUPTI device time of the port.")
    baseline_us: float = Field(gt=0, description="Median CUPTI device time of the baseline.")
    baseline_backend: ReferenceBackend
    repetitions: int = Field(ge=1)
    port_launches: int | None = Field(None, ge=0)
    baseline_launches: int | None = Field(None, ge=0)
    ratio_interval: Band | None = Field(
        None, description="The bootstrap 95 % interval of port / baseline."
    )
    aa_band: Band | None = Field(
        None,
        description="The bootstrap 95 % interval of the A/A control (the baseline against "
        "itself) on this configuration.",
    )
    cap_hit: bool = Field(
        False, description="Repetitions stopped at the cap before every median was within ±0.5 %."
    )

    @property
    def ratio(self) -> float:
        return self.port_us / self.baseline_us

    @property
    def outside_aa_band(self) -> bool:
        """The ratio lies outside what identical kernels measure here: for stage F (launch
        attributes, parameter layout, cubin metadata), whatever the geomean says."""
        return outside_band(self.ratio, self.aa_band, self.ratio_interval)


class MeasurementEnvironment(_Strict):
    gpu: str = Field(min_length=1)
    driver: str = Field(min_length=1)
    clocks: str = Field(min_length=1)
    toolchain: dict[str, str] = Field(min_length=1)


def geomean_ratio(rows: list[PerfRow]) -> float | None:
    return statistics.geometric_mean(row.ratio for row in rows) if rows else None


def geomean_line(geomean: float | None, count: int) -> str:
    """The one authoritative sentence about speed; printed exactly like this everywhere."""
    if geomean is None:
        return "geomean port/baseline: not measured"
    return (
        f"geomean port/baseline = {geomean:.4f} over {count} configurations "
        f"(CUPTI device time, limit {PERF_RATIO_LIMIT:.2f})"
    )


class PerfReport(StageReport):
    FILE_NAME: ClassVar[str] = "perf.json"

    stage: Literal[Stage.PERF_VALIDATOR] = Stage.PERF_VALIDATOR
    verdict: PerfVerdict
    timing: Literal["cupti_device_time"] = "cupti_device_time"
    l2_flush_bytes: int | None = Field(None, gt=0)
    warmup_iterations: int = Field(0, ge=0)
    interleaved: bool = False
    rows: list[PerfRow] = Field(default_factory=list)
    environment: MeasurementEnvironment | None = None
    geomean_ratio: float | None = None
    geomean_interval: Band | None = Field(
        None, description="The bootstrap 95 % interval of the geomean."
    )
    geomean_line: str

    @classmethod
    def verdict_for(cls, rows: list[PerfRow]) -> PerfVerdict:
        """DONE or INVESTIGATE, as the numbers say: INVESTIGATE when the geomean is over
        the limit or any configuration lies outside its A/A band (a geomean can hide
        one configuration's difference; stage F must see it)."""
        geomean = geomean_ratio(rows)
        if geomean is None:
            raise ValueError("no rows: nothing to judge")
        if geomean > PERF_RATIO_LIMIT or any(row.outside_aa_band for row in rows):
            return PerfVerdict.INVESTIGATE
        return PerfVerdict.DONE

    @property
    def stage_f_configurations(self) -> list[str]:
        """The configurations outside their A/A band."""
        return [row.config_id for row in self.rows if row.outside_aa_band]

    @classmethod
    def geomean_fields(cls, rows: list[PerfRow]) -> dict[str, float | str | None]:
        """The derived fields a writer passes along with its rows."""
        geomean = geomean_ratio(rows)
        return {"geomean_ratio": geomean, "geomean_line": geomean_line(geomean, len(rows))}

    @model_validator(mode="after")
    def _numbers_back_the_verdict(self) -> Self:
        _require_unique("perf config id", [row.config_id for row in self.rows])
        expected = geomean_ratio(self.rows)
        stored = self.geomean_ratio
        if (expected is None) != (stored is None) or (
            expected is not None and stored is not None and not math.isclose(expected, stored)
        ):
            raise ValueError(f"geomean_ratio {stored} does not match the rows ({expected})")
        if self.geomean_line != geomean_line(expected, len(self.rows)):
            raise ValueError("geomean_line does not match the rows")
        if self.geomean_interval is not None and not self.rows:
            raise ValueError("a geomean interval without rows")
        if self.rows:
            self._protocol_was_followed()
        if self.verdict is PerfVerdict.BLOCKED:
            self._require_reason()
        elif self.verdict is PerfVerdict.DONE and self.verdict_for(self.rows) is not self.verdict:
            raise ValueError(f"verdict {self.verdict} contradicts geomean {expected}")
        # INVESTIGATE where the rows now say DONE is a run judged by the stricter A/A
        # rule of its day (the point ratio against the band): it hides nothing.
        return self

    def _protocol_was_followed(self) -> None:
        if self.environment is None or self.l2_flush_bytes is None:
            raise ValueError("measured rows need the environment and the L2 flush size")
        if not self.interleaved or self.warmup_iterations < 1:
            raise ValueError("measurements must be interleaved and warmed up")


# --- C IR-diff analyst ---------------------------------------------------------------


class FindingSeverity(StrEnum):
    CRITICAL = "critical"
    WARN = "warn"
    EQUIVALENT = "equivalent"
    NOISE = "noise"


class RootCause(StrEnum):
    KERNEL_BUG = "kernel_bug"
    DSL_LIMITATION = "dsl_limitation"
    COMPILER_BUG = "compiler_bug"
    SEMANTIC_EQUIVALENCE = "semantic_equivalence"


class DiffFinding(_Strict):
    severity: FindingSeverity
    category: str = Field(min_length=1)
    detail: str = Field(min_length=1)
    root_cause: RootCause
    owner: FixOwner | None = None
    fix: str = ""


class VariantDiff(_Strict):
    variant: str = Field(min_length=1)
    level: SamenessLevel
    reference_ir: RunPath
    generated_ir: RunPath
    findings: list[DiffFinding] = Field(default_factory=list)

    @model_validator(mode="after")
    def _level_matches_findings(self) -> Self:
        critical = any(f.severity is FindingSeverity.CRITICAL for f in self.findings)
        if critical != (self.level is SamenessLevel.DIFFERENT):
            raise ValueError(f"{self.variant}: level {self.level} but critical={critical}")
        return self


_LEVEL_ORDER: Final = list(SamenessLevel)


class DiffAnalysisReport(StageReport):
    FILE_NAME: ClassVar[str] = "ir_diff.json"

    stage: Literal[Stage.IR_DIFF_ANALYST] = Stage.IR_DIFF_ANALYST
    verdict: DiffVerdict
    owner: FixOwner | None = None
    variants: list[VariantDiff] = Field(default_factory=list)

    def level(self) -> SamenessLevel | None:
        """The worst level over all variants: a port is as same as its least-same variant."""
        if not self.variants:
            return None
        return max((v.level for v in self.variants), key=_LEVEL_ORDER.index)

    def findings(self) -> list[DiffFinding]:
        return [finding for variant in self.variants for finding in variant.findings]

    @model_validator(mode="after")
    def _verdict_matches_findings(self) -> Self:
        if (self.owner is not None) != (self.verdict is DiffVerdict.FAIL_FIXABLE):
            raise ValueError("an owner is named exactly when the verdict is FAIL_FIXABLE")
        if self.verdict is DiffVerdict.BLOCKED:
            self._require_reason()
            return self
        if not self.variants:
            raise ValueError(f"{self.verdict} without any variant compared")
        severities = {finding.severity for finding in self.findings()}
        if self.verdict is DiffVerdict.PASS and severities & {
            FindingSeverity.CRITICAL,
            FindingSeverity.WARN,
        }:
            raise ValueError("PASS with critical or warning findings")
        if self.verdict is DiffVerdict.PASS_WITH_NOTES and FindingSeverity.CRITICAL in severities:
            raise ValueError("PASS_WITH_NOTES with critical findings")
        if self.verdict is DiffVerdict.FAIL_COMPILER_BUG and not any(
            finding.root_cause is RootCause.COMPILER_BUG for finding in self.findings()
        ):
            raise ValueError("FAIL_COMPILER_BUG without a compiler-bug finding")
        if self.verdict is DiffVerdict.FAIL_FIXABLE and not any(
            finding.owner is self.owner and finding.fix for finding in self.findings()
        ):
            raise ValueError(f"FAIL_FIXABLE names no fix owned by {self.owner}")
        return self

    def routing_class(self) -> str | None:
        return None if self.owner is None else self.owner.value

    def artifact_paths(self) -> list[str]:
        return [p for v in self.variants for p in (v.reference_ir, v.generated_ir)]


# --- F residual-perf investigator -------------------------------------------------------


class CauseSide(StrEnum):
    DEVICE = "device"
    HOST = "host"


class PerfCause(_Strict):
    side: CauseSide
    category: str = Field(min_length=1, description="memory-op family, launch count, ...")
    evidence: str = Field(min_length=1)
    fix: str = ""


class InvestigationReport(StageReport):
    FILE_NAME: ClassVar[str] = "investigation.json"

    stage: Literal[Stage.PERF_INVESTIGATOR] = Stage.PERF_INVESTIGATOR
    verdict: InvestigationVerdict
    causes: list[PerfCause] = Field(default_factory=list)
    port_launches_per_call: int | None = Field(None, ge=0)
    baseline_launches_per_call: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _fixable_names_fixes(self) -> Self:
        if self.verdict is InvestigationVerdict.FIXABLE:
            if not self.causes or not all(cause.fix for cause in self.causes):
                raise ValueError("FIXABLE needs causes, each with its fix")
        elif self.verdict is InvestigationVerdict.BLOCKED:
            self._require_reason()
        return self


# --- final gate ------------------------------------------------------------------------


class GateCheck(_Strict):
    name: str = Field(min_length=1)
    passed: bool
    detail: str = ""


Headline = dict[str, str | float | int | None]


class GateReport(StageReport):
    FILE_NAME: ClassVar[str] = "gate.json"

    stage: Literal[Stage.FINAL_GATE] = Stage.FINAL_GATE
    verdict: GateVerdict
    outcome: Outcome
    checks: list[GateCheck] = Field(min_length=1)
    reached_gpu_boundary: bool = Field(
        False,
        description="Everything up to the GPU passed and correctness is BLOCKED env.",
    )
    headline: Headline = Field(default_factory=dict)

    @model_validator(mode="after")
    def _verdict_is_all_checks(self) -> Self:
        all_passed = all(check.passed for check in self.checks)
        if (self.verdict is GateVerdict.PASS) != all_passed:
            raise ValueError("the gate passes exactly when every check passes")
        if (self.verdict is GateVerdict.AWAITING_GPU) != (
            self.reached_gpu_boundary and not all_passed
        ):
            raise ValueError("AWAITING_GPU is exactly a run that stopped at the GPU boundary")
        if self.verdict is GateVerdict.PASS and self.outcome is not Outcome.COMPLETE:
            raise ValueError("a stopped run cannot pass the gate")
        return self

    def failures(self) -> list[GateCheck]:
        return [check for check in self.checks if not check.passed]


# --- registry and disk I/O --------------------------------------------------------------

PRIMARY_REPORT: Final[Mapping[Stage, type[StageReport]]] = {
    Stage.PREFLIGHT: PreflightReport,
    Stage.ANALYZER: AnalysisReport,
    Stage.KERNEL_WRITER: KernelWriterReport,
    Stage.HOST_BUILDER: HostBuildReport,
    Stage.PERF_VALIDATOR: PerfReport,
    Stage.IR_DIFF_ANALYST: DiffAnalysisReport,
    Stage.PERF_INVESTIGATOR: InvestigationReport,
    Stage.FINAL_GATE: GateReport,
}
"""The report whose verdict is the stage's verdict."""

EXTRA_REPORTS: Final[Mapping[Stage, tuple[type[StageReport], ...]]] = {
    Stage.HOST_BUILDER: (CorrectnessReport,),
}
"""Reports a stage may write besides its primary one."""


class ReportError(Exception):
    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path.name}: {message}")
        self.path = path


class ReportMissing(ReportError):
    pass


class ReportInvalid(ReportError):
    pass


ReportT = TypeVar("ReportT", bound=StageReport)


def save_report(report: StageReport, layout: RunLayout) -> Path:
    """Write the report as the latest of its kind and into the history of its run."""
    text = report.model_dump_json(indent=2) + "\n"
    path = layout.report_path(report.FILE_NAME)
    write_text_atomic(path, text)
    write_text_atomic(layout.history_path(report.FILE_NAME, report.attempt), text)
    return path


def load_report(model: type[ReportT], layout: RunLayout) -> ReportT:
    """Read and validate the latest report of one kind; raise ReportMissing/ReportInvalid."""
    path = layout.report_path(model.FILE_NAME)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportMissing(path, "missing") from None
    except OSError as exc:
        raise ReportInvalid(path, f"unreadable: {exc}") from exc
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ReportInvalid(path, f"does not match {model.__name__}: {errors}") from exc


def _require_unique(what: str, values: list[str]) -> None:
    duplicates = sorted({value for value in values if values.count(value) > 1})
    if duplicates:
        raise ValueError(f"duplicate {what}: {duplicates}")
