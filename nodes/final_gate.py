"""The final gate: checks the whole output contract of a run, verdicts included.

A report only counts if it is on disk, validates against its schema, belongs
to this run and to the latest execution of its stage, and says the verdict
the run recorded. A port passes only along the full chain: preflight PASS,
analysis PASS, kernel COMPILED, host build and correctness ALL_PASS on a GPU
for the latest kernel, then a DONE perf verdict measured after that. A perf
verdict does not count unless correctness passed first, so a failing
correctness verdict can never pass the gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.kernel_writer import GPU_DECIDED_LEVELS, PortReport
from schemas.kernel_writer import REPORT_FILE as PORT_REPORT_FILE
from schemas.pipeline import Outcome, Stage, StageRecord
from schemas.reports import (
    PRIMARY_REPORT,
    AnalysisReport,
    CorrectnessReport,
    DiffAnalysisReport,
    GateCheck,
    GateReport,
    Headline,
    HostBuildReport,
    KernelWriterReport,
    PerfReport,
    ReportError,
    ReportT,
    StageReport,
    load_report,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState, StageResult
from schemas.verdicts import (
    AnalyzerVerdict,
    CorrectnessVerdict,
    FailureClass,
    GateVerdict,
    HostBuildVerdict,
    KernelWriterVerdict,
    PerfVerdict,
    PreflightVerdict,
)


@dataclass
class _Audit:
    """The reports of this run that passed the per-report checks, and all checks so far."""

    state: PipelineState
    layout: RunLayout
    reports: dict[Stage, StageReport] = field(default_factory=dict)
    correctness: CorrectnessReport | None = None
    checks: list[GateCheck] = field(default_factory=list)

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.checks.append(GateCheck(name=name, passed=passed, detail=detail))
        return passed

    def report(self, stage: Stage) -> StageReport | None:
        return self.reports.get(stage)


def run_final_gate(state: PipelineState) -> StageResult:
    audit = _Audit(state=state, layout=state.layout())
    _check_outcome(audit)
    _load_stage_reports(audit)
    _check_delivery_chain(audit)
    failures = [check for check in audit.checks if not check.passed]
    boundary = _reached_gpu_boundary(audit)
    if not failures:
        verdict, summary = GateVerdict.PASS, "every check passed"
    elif boundary:
        verdict = GateVerdict.AWAITING_GPU
        summary = (
            "awaiting a GPU: every check that needs no GPU passed; correctness and "
            "performance are still to be shown by a GPU run of the bundle"
        )
    else:
        verdict = GateVerdict.FAIL
        summary = f"{len(failures)} of {len(audit.checks)} checks not met: " + "; ".join(
            f"{check.name} ({check.detail})" if check.detail else check.name for check in failures
        )
    report = GateReport(
        run_id=state.run_id,
        attempt=state.next_attempt(Stage.FINAL_GATE),
        verdict=verdict,
        outcome=state.outcome or Outcome.STOP,
        checks=audit.checks,
        reached_gpu_boundary=boundary,
        headline=_headline(audit, len(failures), boundary),
        summary=summary,
    )
    return StageResult(report=report)


def _check_outcome(audit: _Audit) -> None:
    outcome = audit.state.outcome
    last = _last_routed(audit.state)
    where = f" after {last.stage.value} said {last.verdict}" if last else ""
    audit.check(
        "run completed",
        outcome is Outcome.COMPLETE,
        f"the routed run ended in {outcome.value if outcome else 'nothing'}{where}",
    )


def _last_routed(state: PipelineState) -> StageRecord | None:
    routed = [record for record in state.records if record.stage is not Stage.FINAL_GATE]
    return routed[-1] if routed else None


def _load_stage_reports(audit: _Audit) -> None:
    """Load the primary report of every stage that ran, and D's correctness report."""
    ran = [s for s in dict.fromkeys(r.stage for r in audit.state.records) if s in PRIMARY_REPORT]
    for stage in ran:
        if stage is Stage.FINAL_GATE:
            continue
        report = _load_own(audit, PRIMARY_REPORT[stage], stage)
        if report is not None:
            audit.reports[stage] = report
    if Stage.HOST_BUILDER in ran:
        audit.correctness = _load_own(audit, CorrectnessReport, Stage.HOST_BUILDER)


def _load_own(audit: _Audit, model: type[ReportT], stage: Stage) -> ReportT | None:
    """The report if it is valid, from this run, from the latest attempt, and agrees
    with the verdict the run recorded; one gate check either way."""
    name = f"report {model.FILE_NAME}"
    state = audit.state
    try:
        report = load_report(model, audit.layout)
    except ReportError as exc:
        audit.check(name, False, str(exc))
        return None
    latest = state.attempts_of(stage)
    problems: list[str] = []
    if report.run_id != state.run_id:
        problems.append(f"belongs to run {report.run_id}, not this run {state.run_id}")
    elif report.attempt != latest:
        problems.append(f"is from attempt {report.attempt}, the latest is {latest}")
    if model is PRIMARY_REPORT[stage] and report.verdict != state.verdicts.get(stage):
        problems.append(f"says {report.verdict}, the run recorded {state.verdicts.get(stage)}")
    missing = [p for p in report.artifact_paths() if not audit.layout.resolve(p).is_file()]
    if missing:
        problems.append(f"names missing files {missing}")
    if problems:
        audit.check(name, False, "; ".join(problems))
        return None
    audit.check(name, True, f"{report.verdict}, attempt {report.attempt}")
    return report


def _last_index(audit: _Audit, stage: Stage) -> int:
    indices = [i for i, r in enumerate(audit.state.records) if r.stage is stage]
    return indices[-1] if indices else -1


def _check_delivery_chain(audit: _Audit) -> None:
    _check_verdict(audit, Stage.PREFLIGHT, PreflightVerdict.PASS)
    analysis_ok = _check_verdict(audit, Stage.ANALYZER, AnalyzerVerdict.PASS)
    kernel_ok = _check_verdict(audit, Stage.KERNEL_WRITER, KernelWriterVerdict.COMPILED)
    if analysis_ok and kernel_ok:
        _check_variants_covered(audit)
    _check_verdict(audit, Stage.HOST_BUILDER, HostBuildVerdict.ALL_PASS)
    correctness_ok = _check_correctness(audit)
    _check_performance(audit, correctness_ok)
    if kernel_ok:
        _check_equivalent_port(audit)


def _check_equivalent_port(audit: _Audit) -> None:
    """A port whose IR only means the same (its SASS differs) passes only when the
    GPU measured every configuration inside its A/A band: what identical code
    measures there."""
    port = _port_report(audit)
    if port is None or port.level not in GPU_DECIDED_LEVELS:
        return
    name = "equivalent port inside its A/A band on every configuration"
    perf = audit.report(Stage.PERF_VALIDATOR)
    if not isinstance(perf, PerfReport) or not perf.rows:
        audit.check(name, False, "no GPU measurement yet: the SASS differs, so the GPU decides")
        return
    unbanded = [row.config_id for row in perf.rows if row.aa_band is None]
    outside = perf.stage_f_configurations
    if unbanded or outside:
        detail = f"outside: {outside}" if outside else f"no A/A band for {unbanded}"
        audit.check(name, False, detail)
        return
    audit.check(name, True, f"{len(perf.rows)} configuration(s) inside their A/A band")


def _check_verdict(audit: _Audit, stage: Stage, wanted: str) -> bool:
    name = f"{stage.value} {wanted}"
    report = audit.report(stage)
    if report is None:
        ran = stage in audit.state.verdicts
        return audit.check(name, False, "no valid report" if ran else "did not run")
    return audit.check(name, report.verdict == wanted, f"verdict {report.verdict}")


def _check_variants_covered(audit: _Audit) -> None:
    analysis = audit.report(Stage.ANALYZER)
    kernel = audit.report(Stage.KERNEL_WRITER)
    if not isinstance(analysis, AnalysisReport) or not isinstance(kernel, KernelWriterReport):
        return
    wanted = set(analysis.analysis.variant_names()) if analysis.analysis else set()
    missing = sorted(wanted - set(kernel.generated_ir))
    audit.check(
        "kernel covers every variant",
        not missing,
        f"no generated IR for {missing}" if missing else f"{len(wanted)} variant(s)",
    )


def _check_correctness(audit: _Audit) -> bool:
    name = "correctness ALL_PASS on a GPU"
    correctness = audit.correctness
    host = audit.report(Stage.HOST_BUILDER)
    if correctness is None:
        return audit.check(name, False, "no valid correctness report from the latest build")
    if correctness.verdict is not CorrectnessVerdict.ALL_PASS:
        return audit.check(name, False, f"{correctness.verdict}: {correctness.gpu_statement()}")
    if isinstance(host, HostBuildReport) and host.verdict is not HostBuildVerdict.ALL_PASS:
        detail = f"correctness passed but the host build says {host.verdict}"
        return audit.check(name, False, detail)
    if _last_index(audit, Stage.HOST_BUILDER) < _last_index(audit, Stage.KERNEL_WRITER):
        return audit.check(name, False, "it ran against an earlier kernel than the latest one")
    return audit.check(name, True, correctness.gpu_statement())


def _check_performance(audit: _Audit, correctness_ok: bool) -> None:
    name = f"performance {PerfVerdict.DONE}"
    perf = audit.report(Stage.PERF_VALIDATOR)
    if not correctness_ok:
        seen = f" (its {perf.verdict} is not counted)" if perf else ""
        audit.check(name, False, f"correctness did not pass first{seen}")
    elif perf is None:
        audit.check(name, False, "no valid perf report")
    elif _last_index(audit, Stage.PERF_VALIDATOR) < _last_index(audit, Stage.HOST_BUILDER):
        audit.check(name, False, "measured before the latest host build")
    else:
        line = perf.geomean_line if isinstance(perf, PerfReport) else ""
        audit.check(name, perf.verdict == PerfVerdict.DONE, f"{perf.verdict}: {line}")


def _reached_gpu_boundary(audit: _Audit) -> bool:
    """Everything that needs no GPU passed, and correctness is blocked on the GPU alone."""
    host = audit.report(Stage.HOST_BUILDER)
    correctness = audit.correctness
    upstream = [
        (Stage.PREFLIGHT, PreflightVerdict.PASS),
        (Stage.ANALYZER, AnalyzerVerdict.PASS),
        (Stage.KERNEL_WRITER, KernelWriterVerdict.COMPILED),
    ]
    upstream_ok = all(
        (r := audit.report(stage)) is not None and r.verdict == wanted for stage, wanted in upstream
    )
    return (
        upstream_ok
        and isinstance(host, HostBuildReport)
        and host.host_part_passed()
        and host.verdict is HostBuildVerdict.BLOCKED
        and host.verdict_class is FailureClass.ENV
        and correctness is not None
        and not correctness.ran_on_gpu
    )


def _headline(audit: _Audit, failures: int, awaiting_gpu: bool) -> Headline:
    """The run in a few fields. At the GPU boundary the checks a GPU run decides
    are pending, not failed: the headline counts them as such."""
    state = audit.state
    headline: Headline = {"outcome": state.outcome.value if state.outcome else None}
    if awaiting_gpu:
        headline["gpu_checks_pending"] = failures
    else:
        headline["gate_failures"] = failures
    last = _last_routed(state)
    if state.outcome is Outcome.STOP and last is not None and not awaiting_gpu:
        headline["stopped_after"] = f"{last.stage.value}: {last.verdict}"
    if audit.correctness is not None:
        # At the boundary the verdict is only "not run yet"; the statement says so.
        if not awaiting_gpu:
            headline["correctness"] = audit.correctness.verdict.value
        headline["gpu"] = audit.correctness.gpu_statement()
    perf = audit.report(Stage.PERF_VALIDATOR)
    if isinstance(perf, PerfReport):
        headline["perf_verdict"] = perf.verdict.value
        headline["geomean_line"] = perf.geomean_line
        headline["geomean_ratio"] = perf.geomean_ratio
    diff = audit.report(Stage.IR_DIFF_ANALYST)
    if isinstance(diff, DiffAnalysisReport) and (level := diff.level()) is not None:
        headline["ir_sameness"] = level.value
    if (line := _writer_level(audit)) is not None:
        headline["level"] = line
    return headline


def _writer_level(audit: _Audit) -> str | None:
    """The level the kernel writer proved per configuration (its port_report.json)."""
    port = _port_report(audit)
    return port.level_line() if port is not None else None


def _port_report(audit: _Audit) -> PortReport | None:
    if not isinstance(audit.report(Stage.KERNEL_WRITER), KernelWriterReport):
        return None
    path = audit.layout.generated_dir / PORT_REPORT_FILE
    try:
        return PortReport.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
