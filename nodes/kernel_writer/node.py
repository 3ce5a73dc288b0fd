"""Stage B as a pipeline node: `run(state) -> StageResult`.

Ports the run's spec into the run directory's `generated/` (kernel.rs,
port_report.json, per-configuration IR) and reports the verdict with the
evidence the final gate and the IR-diff analyst read: the IR of each variant
at `generated/<variant>.mlir`, the rustc log, and the two self-checks. Where
the lifter's port is not COMPILED and the run allows the LLM, the fallback
(`llm_fallback`) writes kernel.rs; the report says who wrote it and records
the fallback's attempts, tokens and cost.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from nodes.kernel_writer.llm_fallback import run_fallback
from nodes.kernel_writer.stage import port_kernel
from schemas.kernel_writer import PortReport
from schemas.llm import LlmFallbackRecord, LlmStatus, TokenUsage
from schemas.pipeline import Stage
from schemas.port_spec import PortSpecError, load_port_spec
from schemas.reports import (
    AnalysisReport,
    KernelAnalysis,
    KernelWriterReport,
    ReportError,
    WriterKind,
    load_report,
)
from schemas.run_layout import RunLayout, write_text_atomic
from schemas.state import PipelineState, StageResult
from schemas.verdicts import KernelWriterVerdict


def _relative(layout: RunLayout, path: Path) -> str:
    return str(path.relative_to(layout.root))


def _variant_irs(report: PortReport, layout: RunLayout, spec_path: Path) -> dict[str, str]:
    """One generated IR per variant, at the layout's place for it: the IR of the
    variant's representative configuration when it was checked, else its first."""
    spec = load_port_spec(spec_path)
    out: dict[str, str] = {}
    for variant in spec.variants:
        checks = [c for c in report.checks if c.variant == variant.name and c.generated_ir]
        if not checks:
            continue
        wanted = f"{variant.name}__{spec.representative(variant).name}"
        chosen = next((c for c in checks if c.config == wanted), checks[0])
        assert chosen.generated_ir is not None
        target = layout.generated_ir(variant.name)
        shutil.copyfile(layout.generated_dir / chosen.generated_ir, target)
        out[variant.name] = _relative(layout, target)
    return out


def _analysis(layout: RunLayout) -> KernelAnalysis | None:
    try:
        return load_report(AnalysisReport, layout).analysis
    except ReportError:
        return None


def _log_lines(report: PortReport, record: LlmFallbackRecord | None) -> list[str]:
    lines = [f"verdict: {report.verdict}", f"summary: {report.summary}"]
    lines += [f"rustc: {report.rustc_log}"] if report.rustc_log else []
    if record is not None:
        lines.append(f"llm fallback: {record.status} ({record.model}) {record.reason}".rstrip())
        for attempt in record.attempts:
            outcome = attempt.outcome
            verdict = outcome.verdict or outcome.step.value
            first = outcome.feedback.splitlines()[0] if outcome.feedback else ""
            lines.append(
                f"llm attempt {attempt.number}: {verdict}, {attempt.usage.total_tokens} tokens, "
                f"{attempt.retries} repeat(s), {attempt.seconds:.1f} s {first}".rstrip()
            )
    return lines


def write_stage(state: PipelineState) -> StageResult:
    """Port the spec; where the lifter stops and the run allows it, the LLM fallback."""
    layout = state.layout()
    meta = state.report_meta(Stage.KERNEL_WRITER)
    spec_path = Path(state.spec_path)
    try:
        lifter = port_kernel(spec_path, layout.generated_dir)
    except PortSpecError as err:
        invalid = KernelWriterReport(
            **meta,
            verdict=KernelWriterVerdict.BLOCKED,
            summary=f"the port spec is invalid: {err}",
        )
        return StageResult(invalid)
    report, record = lifter, None
    if lifter.verdict is not KernelWriterVerdict.COMPILED and state.options.llm:
        fallback = run_fallback(
            spec_path, layout.generated_dir, lifter, _analysis(layout), spent=state.llm_spent()
        )
        report, record = fallback.report, fallback.record
    log = layout.stage_log(Stage.KERNEL_WRITER, meta["attempt"])
    write_text_atomic(log, "\n".join(_log_lines(report, record)) + "\n")
    compiled = report.verdict is KernelWriterVerdict.COMPILED
    by_llm = record is not None and record.status is LlmStatus.SUCCEEDED
    summary = report.summary
    if record is not None and not by_llm:
        summary += f"; LLM fallback {record.status}: {record.reason}"
    notes = [f"generic {g.name} ({g.kind}): {g.how}" for g in report.generics]
    if by_llm and record is not None:
        notes.append(
            f"entries written by the LLM ({record.model}): {', '.join(record.llm_entries)}"
        )
    written = KernelWriterReport(
        **meta,
        verdict=report.verdict,
        writer=WriterKind.LLM if by_llm else WriterKind.LIFTER,
        summary=summary,
        kernel_rs=_relative(layout, layout.kernel_rs) if report.kernel_rs else None,
        generated_ir=_variant_irs(report, layout, spec_path) if report.kernel_rs else {},
        build_log=_relative(layout, log),
        pipeline_check_passed=report.rustc_check is True,
        ir_self_check_passed=compiled or (report.exact and report.sass_identical),
        unsupported_constructs=[f"{b.op} at {b.location}: {b.missing}" for b in lifter.blocked],
        llm_attempts=len(record.attempts) if record is not None else 0,
        llm=record,
        notes=notes,
    )
    usage = record.usage if record is not None else TokenUsage()
    model = record.model if record is not None and usage.total_tokens else None
    return StageResult(
        written, llm_tokens=usage.total_tokens, llm_cost_usd=usage.cost_usd, llm_model=model
    )


def run(state: PipelineState) -> StageResult:
    return write_stage(state)
