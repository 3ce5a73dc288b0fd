"""Stage C, the IR-diff analyst: diagnostic only, it never edits code.

For every analysed variant it diffs the reference Tile IR against the kernel
writer's generated IR with the IR engine (`tileir.diff`), classifies each
difference (critical, warning, equivalent, noise; kernel bug, DSL limitation,
compiler bug, semantic equivalence), names the owner and the fix, and places
the variant at one level of sameness. Where both bytecodes are at hand, SASS
decides between `sass-identical` and `equivalent`, and exposes a compiler bug
when the IR is exact but the machine code is not.

Verdict, decided here and nowhere else (an LLM may add prose to the notes):
FAIL_FIXABLE owner kernel when a critical finding is the kernel's (a new
kernel also gets a new host build), else owner host; FAIL_COMPILER_BUG when
IR is exact but SASS differs; BLOCKED when a variant cannot be compared or
only an upstream construct differs; PASS_WITH_NOTES with warnings; PASS.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from schemas.ir_diff import DiffReport, Finding, Owner
from schemas.kernel_writer import REPORT_FILE as PORT_REPORT_FILE
from schemas.kernel_writer import PortReport
from schemas.pipeline import Stage
from schemas.reports import (
    AnalysisReport,
    CorrectnessReport,
    DiffAnalysisReport,
    DiffFinding,
    FindingSeverity,
    KernelWriterReport,
    ReportError,
    ReportT,
    RootCause,
    VariantDiff,
    load_report,
)
from schemas.run_layout import RunLayout
from schemas.sass import SassComparison
from schemas.state import PipelineState, ReportMeta, StageResult
from schemas.verdicts import CorrectnessVerdict, DiffVerdict, FixOwner, SamenessLevel
from tileir.diff import diff_texts
from tileir.lexer import IRSyntaxError
from tileir.sass import compare_bytecodes
from toolchain.llm import optional_commentary
from toolchain.tools import ToolError

SASS_TARGET: Final = "sm_90"
_OWNERS: Final = {Owner.KERNEL: FixOwner.KERNEL, Owner.HOST: FixOwner.HOST}
_COMMENTARY_SYSTEM: Final = (
    "You explain Tile IR differences between a reference GPU kernel and its port in two "
    "or three plain sentences. The verdict is already decided; do not restate or change it."
)

SassCompare = Callable[[Path, Path, str, Path], SassComparison]


class AnalystStop(Exception):
    """Nothing can be compared; the report is BLOCKED for this reason."""


@dataclass(frozen=True)
class SassEvidence:
    identical: bool
    detail: str


@dataclass(frozen=True)
class VariantResult:
    diff: VariantDiff
    compiler_bug: bool


def run(state: PipelineState) -> StageResult:
    report, tokens, cost = analyse(state)
    return StageResult(report, llm_tokens=tokens, llm_cost_usd=cost)


def analyse(
    state: PipelineState, *, sass: SassCompare = compare_bytecodes
) -> tuple[DiffAnalysisReport, int, float]:
    layout = state.layout()
    meta = state.report_meta(Stage.IR_DIFF_ANALYST)
    notes = [_trigger(state)]
    try:
        analysis, kernel = _inputs(state, layout)
    except AnalystStop as stop:
        report = DiffAnalysisReport(
            **meta, verdict=DiffVerdict.BLOCKED, summary=str(stop), notes=notes
        )
        return report, 0, 0.0
    port_report = _port_report(layout, kernel)
    results: list[VariantResult] = []
    uncompared: list[str] = []
    for name, reference in analysis:
        generated = kernel.generated_ir.get(name)
        if generated is None:
            uncompared.append(f"{name}: the kernel writer produced no IR for it")
            continue
        try:
            results.append(
                _compare_variant(name, reference, generated, layout, port_report, sass, notes)
            )
        except (OSError, IRSyntaxError, ToolError) as exc:
            uncompared.append(f"{name}: {exc}")
    correctness_failed = _correctness_failed(state, layout)
    report = _decide(meta, results, uncompared, correctness_failed, notes)
    tokens, cost = 0, 0.0
    if state.options.llm and report.variants:
        note, usage = optional_commentary(
            _COMMENTARY_SYSTEM, _commentary_question(report), spent=state.llm_spent()
        )
        if note:
            report = report.model_copy(update={"notes": [*report.notes, note]})
        tokens, cost = usage.total_tokens, usage.cost_usd
    return report, tokens, cost


# -- inputs ----------------------------------------------------------------------------


def _own(model: type[ReportT], state: PipelineState, layout: RunLayout) -> ReportT:
    try:
        report = load_report(model, layout)
    except ReportError as exc:
        raise AnalystStop(f"cannot compare: {exc}") from None
    if report.run_id != state.run_id:
        raise AnalystStop(f"cannot compare: {model.FILE_NAME} belongs to another run")
    return report


def _inputs(
    state: PipelineState, layout: RunLayout
) -> tuple[list[tuple[str, str]], KernelWriterReport]:
    analysis = _own(AnalysisReport, state, layout)
    kernel = _own(KernelWriterReport, state, layout)
    if analysis.analysis is None:
        raise AnalystStop("cannot compare: the analysis has no variants (it did not pass)")
    if not kernel.generated_ir:
        raise AnalystStop(f"cannot compare: the kernel writer ({kernel.verdict}) wrote no IR")
    variants = [(v.name, v.reference_ir) for v in analysis.analysis.variants]
    return variants, kernel


def _port_report(layout: RunLayout, kernel: KernelWriterReport) -> PortReport | None:
    """The kernel writer's own round-trip record, when it left one beside kernel.rs."""
    candidates = [layout.generated_dir / PORT_REPORT_FILE]
    if kernel.kernel_rs is not None:
        candidates.insert(0, layout.resolve(kernel.kernel_rs).parent / PORT_REPORT_FILE)
    for path in candidates:
        if path.is_file():
            try:
                return PortReport.model_validate_json(path.read_text())
            except ValueError:
                return None
    return None


def _trigger(state: PipelineState) -> str:
    if state.records:
        last = state.records[-1]
        qualifier = f" ({last.verdict_class})" if last.verdict_class else ""
        return f"entered after {last.stage.value} said {last.verdict}{qualifier}"
    return "entered with no earlier stage recorded"


def _correctness_failed(state: PipelineState, layout: RunLayout) -> bool:
    """True when the latest correctness run on a GPU had failing cases."""
    try:
        correctness = load_report(CorrectnessReport, layout)
    except ReportError:
        return False
    return (
        correctness.run_id == state.run_id
        and correctness.ran_on_gpu
        and correctness.verdict is CorrectnessVerdict.FAIL
    )


# -- one variant ---------------------------------------------------------------------------


def _parsable(text: str) -> str:
    """tileirdisasm may name a negative constant `%cst_-1_i32`; value names carry no
    meaning, so spell it in a form every IR reader accepts."""
    return text.replace("%cst_-", "%cst_m")


def _compare_variant(
    name: str,
    reference: str,
    generated: str,
    layout: RunLayout,
    port_report: PortReport | None,
    sass: SassCompare,
    notes: list[str],
) -> VariantResult:
    ref_path, gen_path = layout.resolve(reference), layout.resolve(generated)
    engine = diff_texts(_parsable(ref_path.read_text()), _parsable(gen_path.read_text()))
    findings = [_finding(f) for f in engine.findings]
    evidence = _sass_evidence(name, ref_path, gen_path, port_report, sass)
    if evidence is not None:
        notes.append(f"variant {name}: {evidence.detail}")
    compiler_bug = engine.exact and evidence is not None and not evidence.identical
    if compiler_bug:
        findings.append(
            DiffFinding(
                severity=FindingSeverity.WARN,
                category="sass_mismatch",
                detail="the IRs are exact but the SASS differs",
                root_cause=RootCause.COMPILER_BUG,
            )
        )
    level = _level(engine, findings, evidence)
    diff = VariantDiff(
        variant=name,
        level=level,
        reference_ir=reference,
        generated_ir=generated,
        findings=findings,
    )
    return VariantResult(diff=diff, compiler_bug=compiler_bug)


def _finding(found: Finding) -> DiffFinding:
    where = []
    if found.ref is not None:
        where.append(f"reference line {found.ref.line}")
    if found.gen is not None:
        where.append(f"generated line {found.gen.line}")
    located = f" ({', '.join(where)})" if where else ""
    owner = _OWNERS.get(found.owner)
    return DiffFinding(
        severity=FindingSeverity(found.severity.value),
        category=found.category,
        detail=f"{found.op}: {found.message}{located}",
        root_cause=RootCause(found.root_cause.value),
        owner=owner,
        fix=found.fix if owner is not None else "",
    )


def _level(
    engine: DiffReport, findings: Sequence[DiffFinding], sass: SassEvidence | None
) -> SamenessLevel:
    if any(f.severity is FindingSeverity.CRITICAL for f in findings):
        return SamenessLevel.DIFFERENT
    if engine.exact:
        return SamenessLevel.EXACT
    if sass is not None and sass.identical:
        return SamenessLevel.SASS_IDENTICAL
    return SamenessLevel.EQUIVALENT


def _sass_evidence(
    name: str,
    ref_ir: Path,
    gen_ir: Path,
    port_report: PortReport | None,
    sass: SassCompare,
) -> SassEvidence | None:
    ref_bytecode = ref_ir.with_suffix(".bytecode")
    for gen_bytecode in (
        gen_ir.with_suffix(".bytecode"),
        gen_ir.with_name(f"{gen_ir.stem}.{SASS_TARGET}.bytecode"),
    ):
        if ref_bytecode.is_file() and gen_bytecode.is_file():
            with tempfile.TemporaryDirectory(prefix="tileport-sass-") as work:
                result = sass(ref_bytecode, gen_bytecode, SASS_TARGET, Path(work))
            state = "identical" if result.identical else f"{result.differing_lines} lines differ"
            return SassEvidence(
                result.identical,
                f"SASS {SASS_TARGET} {state} ({result.reference_instructions} reference "
                "instructions, assembled here by tileiras)",
            )
    return _port_report_sass(name, port_report)


def _port_report_sass(name: str, port_report: PortReport | None) -> SassEvidence | None:
    if port_report is None:
        return None
    checks = [c for c in port_report.checks if c.variant == name and c.targets]
    if not checks:
        return None
    identical = all(check.sass_identical for check in checks)
    targets = sorted({t.target for check in checks for t in check.targets})
    state = "identical" if identical else "different"
    return SassEvidence(
        identical,
        f"SASS {state} on {', '.join(targets)} over {len(checks)} configuration(s) "
        "(the kernel writer's round-trip check)",
    )


# -- the verdict -----------------------------------------------------------------------------


def _decide(
    meta: ReportMeta,
    results: list[VariantResult],
    uncompared: list[str],
    correctness_failed: bool,
    notes: list[str],
) -> DiffAnalysisReport:
    variants = [result.diff for result in results]
    notes = [*notes, *(f"not compared: {line}" for line in uncompared)]

    def report(
        verdict: DiffVerdict, summary: str, owner: FixOwner | None = None
    ) -> DiffAnalysisReport:
        return DiffAnalysisReport(
            **meta, verdict=verdict, owner=owner, variants=variants, summary=summary, notes=notes
        )

    findings = [f for v in variants for f in v.findings]
    critical = [f for f in findings if f.severity is FindingSeverity.CRITICAL]
    owned = [f for f in critical if f.owner is not None and f.fix]
    if owned:
        # A kernel fix first: a new kernel is followed by a new host build anyway.
        owner = FixOwner.KERNEL if any(f.owner is FixOwner.KERNEL for f in owned) else FixOwner.HOST
        first = next(f for f in owned if f.owner is owner)
        summary = (
            f"{len(critical)} critical difference(s); for the {owner.value}: "
            f"{first.category}: {first.detail}; fix: {first.fix}"
        )
        return report(DiffVerdict.FAIL_FIXABLE, summary, owner)
    if uncompared or not variants:
        reason = "; ".join(uncompared) or "no variant to compare"
        return report(DiffVerdict.BLOCKED, f"cannot compare every variant: {reason}")
    if critical:
        first = critical[0]
        return report(
            DiffVerdict.BLOCKED,
            f"only upstream constructs differ ({first.category}: {first.detail}); no kernel "
            "or host change removes them: record an upstream gap",
        )
    buggy = [r.diff.variant for r in results if r.compiler_bug]
    if buggy:
        summary = f"IR exact but SASS differs for {', '.join(buggy)}: a compiler bug upstream"
        return report(DiffVerdict.FAIL_COMPILER_BUG, summary)
    if correctness_failed:
        return _host_suspected(meta, variants, notes)
    levels = ", ".join(f"{v.variant}: {v.level.value}" for v in variants)
    warnings = sum(f.severity is FindingSeverity.WARN for f in findings)
    if warnings:
        summary = f"no critical difference, {warnings} warning(s) ({levels})"
        return report(DiffVerdict.PASS_WITH_NOTES, summary)
    return report(DiffVerdict.PASS, f"no difference that matters ({levels})")


def _host_suspected(
    meta: ReportMeta, variants: list[VariantDiff], notes: list[str]
) -> DiffAnalysisReport:
    """Correctness failed on a GPU, yet the kernel's IR matches: the fault is on the host."""
    finding = DiffFinding(
        severity=FindingSeverity.WARN,
        category="host_side_fault",
        detail="correctness failed on a GPU although the kernel IR matches the reference",
        root_cause=RootCause.KERNEL_BUG,
        owner=FixOwner.HOST,
        fix="check the launcher and wrapper: grid, argument order, strides and dtypes passed",
    )
    first, *rest = variants
    first = VariantDiff.model_validate(
        {**first.model_dump(), "findings": [*first.model_dump()["findings"], finding.model_dump()]}
    )
    return DiffAnalysisReport(
        **meta,
        verdict=DiffVerdict.FAIL_FIXABLE,
        owner=FixOwner.HOST,
        variants=[first, *rest],
        notes=notes,
        summary="kernel IR matches the reference but correctness failed: fix the host side",
    )


def _commentary_question(report: DiffAnalysisReport) -> str:
    lines = [f"Verdict: {report.verdict} — {report.summary}"]
    for variant in report.variants:
        lines.append(f"Variant {variant.variant}: {variant.level.value}")
        lines += [f"- {f.severity.value} {f.category}: {f.detail}" for f in variant.findings[:20]]
    return "\n".join(lines)
