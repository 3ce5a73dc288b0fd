"""The kernel writer's port report (`port_report.json`), written by
`tileport port-kernel` and by stage B.

A port is COMPILED only when every checked configuration is at a COMPILED
level: its SASS identical to its reference's on sm_90 and sm_100, its IR
`exact` or not (`sass-identical`); the model refuses a COMPILED report that
says otherwise, whoever wrote kernel.rs (the lifter, or the LLM fallback).
"""

from __future__ import annotations

from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.verdicts import KernelWriterVerdict

REPORT_FILE = "port_report.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecoveredGeneric(_Strict):
    """A generic parameter of the Rust entries and how it was found."""

    name: str
    kind: Literal["dtype", "constant", "derived", "fact"]
    source: str = Field(description="The spec constant, array, or array fact it stands for.")
    how: str = Field(description="The evidence: differential export, dtype set, fact set.")


class LiteralEntry(_Strict):
    """An entry specialised to literal values because no generic could express it."""

    entry: str
    variant: str
    bindings: dict[str, str] = Field(description="Constant or dtype -> the literal it bakes in.")
    reason: str


class EntryInfo(_Strict):
    name: str
    variant: str
    dispatch: str = Field(description="The variant's dispatch condition, for the host stage.")
    generics: list[str] = Field(description="Generic parameters, in declaration order.")
    written_by: Literal["lifter", "llm"] = Field(
        "lifter", description="Who wrote the entry: the lifter, or the LLM fallback."
    )


class TargetCheck(_Strict):
    target: str
    sass_identical: bool
    instructions: int = 0
    differing_lines: int = 0
    first_differences: list[str] = Field(default_factory=list)
    assemblies: int = Field(1, description="tileiras runs per side (tileir.sass).")
    reference_variants: int = Field(
        1, description="Distinct listings the reference's runs gave on this target."
    )
    registers_only: bool = Field(
        False,
        description="Identical but for register choice, as the reference's own runs differ.",
    )


SamenessLevel = Literal["exact", "sass-identical", "equivalent", "different"]
REQUIRED_TARGETS: Final = ("sm_90", "sm_100")
COMPILED_LEVELS: Final = ("exact", "sass-identical")
# IR semantically the same, SASS not: COMPILED too, and the GPU decides (the gate
# passes it only when E measures every configuration inside its A/A band).
GPU_DECIDED_LEVELS: Final = ("equivalent",)
LEVEL_ORDER: Final = ("exact", "sass-identical", "equivalent", "different")


class ConfigCheck(_Strict):
    """One configuration compiled from kernel.rs and compared with its reference."""

    config: str
    variant: str
    entry: str
    generic_args: list[str]
    exact: bool
    ir_level: str = Field(description="exact / equivalent / different (SASS aside).")
    findings: list[str] = Field(default_factory=list, description="The IR diff's findings.")
    targets: list[TargetCheck] = Field(default_factory=list)
    required_targets: list[str] = Field(
        default_factory=lambda: list(REQUIRED_TARGETS),
        description="The GPUs the configuration must be SASS-identical on (the spec's targets).",
    )
    generated_ir: str | None = Field(None, description="The generated IR, relative to --out.")
    error: str | None = Field(None, description="Why the Rust export or a tool failed.")

    @property
    def sass_identical(self) -> bool:
        return bool(self.targets) and all(t.sass_identical for t in self.targets)

    level: SamenessLevel = Field(
        "different",
        description="The level of sameness (docs/PIPELINE.md): `exact` IR with identical SASS; "
        "`sass-identical`: cubins identical on every required target (sm_90 and sm_100 "
        "unless the spec names fewer) whatever the IR text; "
        "else the IR's level. Derived from the other fields.",
    )

    @model_validator(mode="after")
    def _derive_level(self) -> Self:
        object.__setattr__(self, "level", self._level())  # frozen: set once, here
        return self

    def _level(self) -> SamenessLevel:
        if self.error is not None:
            return "different"
        if self.sass_identical and set(self.required_targets) <= {t.target for t in self.targets}:
            return "exact" if self.exact else "sass-identical"
        return "equivalent" if self.ir_level == "equivalent" else "different"


class BlockedConstruct(_Strict):
    op: str
    location: str
    missing: str
    variant: str | None = None


class Timings(_Strict):
    reference_export_s: float = 0.0
    lift_s: float = 0.0
    verify_s: float = 0.0
    rustc_s: float = 0.0
    total_s: float = 0.0


class PortReport(_Strict):
    kernel: str
    spec: str
    verdict: KernelWriterVerdict
    summary: str
    kernel_rs: str | None = Field(None, description="Path of kernel.rs, relative to --out.")
    entries: list[EntryInfo] = Field(default_factory=list)
    generics: list[RecoveredGeneric] = Field(default_factory=list)
    literal_entries: list[LiteralEntry] = Field(default_factory=list)
    checks: list[ConfigCheck] = Field(default_factory=list)
    blocked: list[BlockedConstruct] = Field(default_factory=list)
    rustc_check: bool | None = Field(
        None, description="kernel.rs built with rustc against cutile (None: not run)."
    )
    rustc_log: str = Field("", description="rustc's errors and warnings, when any.")
    timings: Timings = Field(default_factory=Timings)
    llm_tokens: int = Field(
        0, description="Tokens the LLM fallback spent on this port; zero for a lifted port."
    )
    notes: list[str] = Field(default_factory=list)

    @property
    def exact(self) -> bool:
        return bool(self.checks) and all(c.exact for c in self.checks)

    @property
    def sass_identical(self) -> bool:
        return bool(self.checks) and all(c.sass_identical for c in self.checks)

    @property
    def level(self) -> SamenessLevel | None:
        """The port's level: its least same configuration's."""
        if not self.checks:
            return None
        return max((c.level for c in self.checks), key=LEVEL_ORDER.index)

    def level_line(self) -> str | None:
        """The sameness reached, in one phrase: `IR exact, SASS-identical sm_90/sm_100`,
        `IR exact on 5 of 7 configurations, SASS-identical sm_90/sm_100 on all 7`, or the
        count of each level when some configuration is neither."""
        if not self.checks:
            return None
        count = len(self.checks)
        levels = [check.level for check in self.checks]
        if any(level not in COMPILED_LEVELS for level in levels):
            tally = ", ".join(f"{levels.count(level)} {level}" for level in dict.fromkeys(levels))
            return f"IR level of {count} configurations: {tally}"
        common = set.intersection(
            *({t.target for t in check.targets if t.sass_identical} for check in self.checks)
        )
        ordered = [t for t in REQUIRED_TARGETS if t in common]
        targets = "/".join(ordered + sorted(common - set(ordered)))
        exact = levels.count("exact")
        if exact == count:
            return f"IR exact, SASS-identical {targets}"
        if exact == 0:
            return f"SASS-identical {targets} (IR text differs)"
        return (
            f"IR exact on {exact} of {count} configurations, "
            f"SASS-identical {targets} on all {count}"
        )

    @model_validator(mode="after")
    def _verdict_matches_checks(self) -> Self:
        if self.verdict is KernelWriterVerdict.COMPILED:
            if self.kernel_rs is None:
                raise ValueError("COMPILED without kernel.rs")
            allowed = (*COMPILED_LEVELS, *GPU_DECIDED_LEVELS)
            if not self.checks or any(c.level not in allowed for c in self.checks):
                raise ValueError(
                    "COMPILED needs every check exact, SASS-identical on "
                    + " and ".join(REQUIRED_TARGETS)
                    + " or equivalent"
                )
            if self.blocked:
                raise ValueError("COMPILED with blocked constructs")
            if self.rustc_check is not True:
                raise ValueError("COMPILED needs kernel.rs to build with rustc")
        if self.verdict is KernelWriterVerdict.BLOCKED and not self.blocked:
            raise ValueError("BLOCKED names no construct")
        return self
