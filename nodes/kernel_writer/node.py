"""Stage B as a pipeline node: `run(state) -> StageResult`.

Ports the run's spec into the run directory's `generated/` (kernel.rs,
port_report.json, per-configuration IR) and reports the verdict with the
evidence the final gate and the IR-diff analyst read: the IR of each variant
at `generated/<variant>.mlir`, the rustc log, and the two self-checks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from nodes.kernel_writer.stage import port_kernel
from schemas.kernel_writer import PortReport
from schemas.pipeline import Stage
from schemas.port_spec import PortSpecError, load_port_spec
from schemas.reports import KernelWriterReport
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


def write_stage(state: PipelineState) -> KernelWriterReport:
    layout = state.layout()
    meta = state.report_meta(Stage.KERNEL_WRITER)
    spec_path = Path(state.spec_path)
    try:
        report = port_kernel(spec_path, layout.generated_dir)
    except PortSpecError as err:
        return KernelWriterReport(
            **meta,
            verdict=KernelWriterVerdict.BLOCKED,
            summary=f"the port spec is invalid: {err}",
        )
    log = layout.stage_log(Stage.KERNEL_WRITER, meta["attempt"])
    lines = [f"verdict: {report.verdict}", f"summary: {report.summary}"]
    lines += [f"rustc: {report.rustc_log}"] if report.rustc_log else []
    write_text_atomic(log, "\n".join(lines) + "\n")
    compiled = report.verdict is KernelWriterVerdict.COMPILED
    return KernelWriterReport(
        **meta,
        verdict=report.verdict,
        summary=report.summary,
        kernel_rs=_relative(layout, layout.kernel_rs) if report.kernel_rs else None,
        generated_ir=_variant_irs(report, layout, spec_path) if report.kernel_rs else {},
        build_log=_relative(layout, log),
        pipeline_check_passed=report.rustc_check is True,
        ir_self_check_passed=compiled or (report.exact and report.sass_identical),
        unsupported_constructs=[f"{b.op} at {b.location}: {b.missing}" for b in report.blocked],
        notes=[f"generic {g.name} ({g.kind}): {g.how}" for g in report.generics],
    )


def run(state: PipelineState) -> StageResult:
    return StageResult(write_stage(state))
