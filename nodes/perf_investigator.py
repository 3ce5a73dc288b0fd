"""Stage F, the residual-perf investigator: diagnostic only, for a port that is
correct but slower than its baseline.

It reads what was measured (the perf report's per-configuration CUPTI device
times and launch counts) and what the IR diff found, and splits the causes:

- host side: more kernels launched per call than the baseline (a copy, a
  `contiguous()`, a conversion in the wrapper, a second kernel); a ratio that
  is the same on every configuration while launch counts are unknown (a fixed
  proportional overhead, typically a wrapper copy); an autotuned reference
  whose per-configuration choice the port does not follow;
- device side: IR differences in the memory-op family, the codegen or the
  hints; slow configurations that all dispatch to one variant.

FIXABLE when at least one cause has a fix; ALIGNED when there is no gap, or
the device code is identical and the launch counts equal (nothing on the port
side differs); BLOCKED when nothing was measured or the gap stays unexplained.
The verdict is computed here; an LLM may only add prose to the notes.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from schemas.pipeline import Stage
from schemas.reports import (
    AnalysisReport,
    CauseSide,
    DiffAnalysisReport,
    DiffFinding,
    FindingSeverity,
    InvestigationReport,
    LaunchPath,
    PerfCause,
    PerfReport,
    PerfRow,
    ReportError,
    ReportT,
    load_report,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState, ReportMeta, StageResult
from schemas.verdicts import (
    PERF_RATIO_LIMIT,
    InvestigationVerdict,
    PerfVerdict,
    SamenessLevel,
)
from toolchain.llm import optional_commentary

UNIFORM_SPREAD: Final = 1.03
"""Ratios within 3 % of each other on every configuration count as uniform."""

MEMORY_OP_CATEGORIES: Final = frozenset(
    {
        "memory_op_family",
        "memory_ordering",
        "tma",
        "view_setup",
        "pointer_assume",
        "scalar_assume_on_runtime_dim",
        "layout_attrs",
        "assume_bounds",
    }
)
HINT_CATEGORIES: Final = frozenset({"optimization_hints", "latency_hint"})
SAME_DEVICE_CODE: Final = frozenset({SamenessLevel.EXACT, SamenessLevel.SASS_IDENTICAL})
_COMMENTARY_SYSTEM: Final = (
    "You explain why a GPU kernel port is slower than its reference in two or three plain "
    "sentences, from the evidence given. The verdict is already decided; do not change it."
)


class InvestigationStop(Exception):
    """Nothing to investigate; the report is BLOCKED for this reason."""


@dataclass
class Evidence:
    causes: list[PerfCause] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    device_ruled_out: bool = False
    launches_equal: bool = False


def run(state: PipelineState) -> StageResult:
    report = investigate(state)
    tokens, cost = 0, 0.0
    if state.options.llm:
        note, usage = optional_commentary(_COMMENTARY_SYSTEM, _question(report))
        if note:
            report = report.model_copy(update={"notes": [*report.notes, note]})
        tokens, cost = usage.total_tokens, usage.cost_usd
    return StageResult(report, llm_tokens=tokens, llm_cost_usd=cost)


def investigate(state: PipelineState) -> InvestigationReport:
    layout = state.layout()
    meta = state.report_meta(Stage.PERF_INVESTIGATOR)
    try:
        perf = _measured(state, layout)
    except InvestigationStop as stop:
        return InvestigationReport(**meta, verdict=InvestigationVerdict.BLOCKED, summary=str(stop))
    diff = _optional(DiffAnalysisReport, state, layout)
    analysis = _optional(AnalysisReport, state, layout)
    evidence = Evidence()
    _device_side(perf.rows, diff, evidence)
    _host_side(perf.rows, evidence)
    _autotune(perf.rows, analysis, evidence)
    return _decide(meta, perf, evidence)


# -- inputs ------------------------------------------------------------------------------


def _measured(state: PipelineState, layout: RunLayout) -> PerfReport:
    try:
        perf = load_report(PerfReport, layout)
    except ReportError as exc:
        raise InvestigationStop(f"no measurement to investigate: {exc}") from None
    if perf.run_id != state.run_id:
        raise InvestigationStop("no measurement to investigate: perf.json belongs to another run")
    if perf.verdict is PerfVerdict.BLOCKED or not perf.rows:
        raise InvestigationStop(f"nothing was measured: {perf.summary or perf.verdict}")
    return perf


def _optional(model: type[ReportT], state: PipelineState, layout: RunLayout) -> ReportT | None:
    try:
        report = load_report(model, layout)
    except ReportError:
        return None
    return report if report.run_id == state.run_id else None


# -- device side -------------------------------------------------------------------------


def _device_family(category: str) -> str:
    if category in MEMORY_OP_CATEGORIES:
        return "memory-op family"
    if category in HINT_CATEGORIES:
        return "hints"
    return "codegen"


def _device_side(rows: list[PerfRow], diff: DiffAnalysisReport | None, evidence: Evidence) -> None:
    if diff is None or not diff.variants:
        evidence.notes.append("no IR diff of this run: the device side was not examined")
        _variant_concentration(rows, set(), evidence)
        return
    if all(variant.level in SAME_DEVICE_CODE for variant in diff.variants):
        evidence.device_ruled_out = True
        levels = ", ".join(f"{v.variant}: {v.level.value}" for v in diff.variants)
        evidence.notes.append(f"device code matches the reference ({levels})")
        return
    explained: set[str] = set()
    for variant in diff.variants:
        for finding in variant.findings:
            significant = finding.severity in (FindingSeverity.CRITICAL, FindingSeverity.WARN)
            if significant and _device_cause(variant.variant, finding, evidence):
                explained.add(variant.variant)
    _variant_concentration(rows, explained, evidence)


def _device_cause(variant: str, finding: DiffFinding, evidence: Evidence) -> bool:
    described = f"variant {variant}: {finding.category}: {finding.detail}"
    if not finding.fix:
        evidence.notes.append(f"device difference no port change removes: {described}")
        return False
    evidence.causes.append(
        PerfCause(
            side=CauseSide.DEVICE,
            category=_device_family(finding.category),
            evidence=f"{described} ({finding.severity.value} in the IR diff)",
            fix=finding.fix,
        )
    )
    return True


def _variant_concentration(rows: list[PerfRow], explained: set[str], evidence: Evidence) -> None:
    """Slow configurations that all dispatch to some variants while the others keep
    up point at those variants' code."""
    by_variant: dict[str, list[float]] = {}
    for row in rows:
        by_variant.setdefault(row.variant, []).append(row.ratio)
    if len(by_variant) < 2:
        return
    slow = {
        v
        for v, ratios in by_variant.items()
        if statistics.geometric_mean(ratios) > PERF_RATIO_LIMIT
    }
    if not slow or slow == set(by_variant):
        return
    for variant in sorted(slow - explained):
        mean = statistics.geometric_mean(by_variant[variant])
        evidence.causes.append(
            PerfCause(
                side=CauseSide.DEVICE,
                category="codegen",
                evidence=f"configurations of variant {variant} run at {mean:.3f}x the baseline "
                f"while {', '.join(sorted(set(by_variant) - slow))} keep(s) within "
                f"{PERF_RATIO_LIMIT:.2f}",
                fix=f"compare variant {variant}'s IR and SASS with its reference "
                "(`tileport ir diff`, `tileport ir sass`) and reproduce its form",
            )
        )


# -- host side ---------------------------------------------------------------------------


def _host_side(rows: list[PerfRow], evidence: Evidence) -> None:
    counted = [r for r in rows if r.port_launches is not None and r.baseline_launches is not None]
    extra = [r for r in counted if (r.port_launches or 0) > (r.baseline_launches or 0)]
    fewer = [r for r in counted if (r.port_launches or 0) < (r.baseline_launches or 0)]
    evidence.launches_equal = (
        bool(counted) and len(counted) == len(rows) and not extra and not fewer
    )
    if extra:
        first = extra[0]
        evidence.causes.append(
            PerfCause(
                side=CauseSide.HOST,
                category="launch count",
                evidence=f"the port launches {first.port_launches} kernel(s) per call, the "
                f"baseline {first.baseline_launches} (CUPTI), on {len(extra)} of {len(rows)} "
                f"configuration(s): {', '.join(r.config_id for r in extra[:5])}",
                fix="remove the extra launch: a copy, contiguous() or dtype conversion in the "
                "wrapper, or a second kernel in the launcher",
            )
        )
    if fewer:
        evidence.notes.append(
            f"the port launches fewer kernels than the baseline on {len(fewer)} configuration(s)"
        )
    if len(counted) < len(rows):
        evidence.notes.append(
            f"launch counts missing on {len(rows) - len(counted)} configuration(s): extra "
            "launches cannot be ruled out there"
        )
    _uniform_ratio(rows, counted, evidence)


def _uniform_ratio(rows: list[PerfRow], counted: list[PerfRow], evidence: Evidence) -> None:
    """The same slowdown everywhere, with launches not counted: the signature of a
    wrapper copy (its kernel scales with the data, so the ratio does not move)."""
    ratios = [row.ratio for row in rows]
    if len(rows) < 2 or min(ratios) <= PERF_RATIO_LIMIT:
        return
    spread = max(ratios) / min(ratios)
    if spread > UNIFORM_SPREAD:
        return
    shown = f"{min(ratios):.3f} to {max(ratios):.3f} on all {len(rows)} configurations"
    if counted:
        evidence.notes.append(f"uniform ratio ({shown}) with launch counts recorded")
        return
    evidence.causes.append(
        PerfCause(
            side=CauseSide.HOST,
            category="wrapper copies",
            evidence=f"a uniform ratio ({shown}) and no launch counts: a per-call overhead "
            "proportional to the data, as a copy in the wrapper makes",
            fix="count CUPTI kernels per call; remove copies, contiguous() and conversions "
            "from the wrapper and pass the caller's strides through",
        )
    )


def _autotune(rows: list[PerfRow], analysis: AnalysisReport | None, evidence: Evidence) -> None:
    contract = analysis.analysis if analysis is not None else None
    if contract is None or contract.launch_path is not LaunchPath.AUTOTUNED:
        return
    slow = [row for row in rows if row.ratio > PERF_RATIO_LIMIT]
    if not slow or evidence.causes:
        return
    space = len(contract.autotune.space) if contract.autotune else 0
    key = ", ".join(contract.autotune.key) if contract.autotune else "?"
    evidence.causes.append(
        PerfCause(
            side=CauseSide.HOST,
            category="autotune",
            evidence=f"the reference autotunes over {space} candidate(s) keyed on {key}; "
            f"{len(slow)} configuration(s) are slow: {', '.join(r.config_id for r in slow[:5])}",
            fix="make the port's host dispatch pick, per autotune key, the candidate the "
            "reference's autotuner picks",
        )
    )


# -- the verdict -------------------------------------------------------------------------


def _launches_per_call(rows: list[PerfRow], port: bool) -> int | None:
    counts = [row.port_launches if port else row.baseline_launches for row in rows]
    known = [count for count in counts if count is not None]
    return Counter(known).most_common(1)[0][0] if known else None


def _decide(meta: ReportMeta, perf: PerfReport, evidence: Evidence) -> InvestigationReport:
    geomean = perf.geomean_line

    def report(verdict: InvestigationVerdict, summary: str) -> InvestigationReport:
        return InvestigationReport(
            **meta,
            verdict=verdict,
            summary=summary,
            causes=evidence.causes,
            port_launches_per_call=_launches_per_call(perf.rows, port=True),
            baseline_launches_per_call=_launches_per_call(perf.rows, port=False),
            notes=[geomean, *evidence.notes],
        )

    if evidence.causes:
        sides = " and ".join(sorted({cause.side.value for cause in evidence.causes}))
        first = evidence.causes[0]
        return report(
            InvestigationVerdict.FIXABLE,
            f"{len(evidence.causes)} cause(s) on the {sides} side; first: "
            f"{first.category}: {first.fix}",
        )
    if perf.verdict is PerfVerdict.DONE:
        return report(InvestigationVerdict.ALIGNED, f"no residual gap: {geomean}")
    if evidence.device_ruled_out and evidence.launches_equal:
        return report(
            InvestigationVerdict.ALIGNED,
            "same device code and same launches as the baseline: nothing on the port side "
            f"differs; re-measure ({geomean})",
        )
    missing = []
    if not evidence.device_ruled_out:
        missing.append("the device side is not explained (no IR diff or no fixable difference)")
    if not evidence.launches_equal:
        missing.append("launch counts are missing or differ without a fix")
    return report(
        InvestigationVerdict.BLOCKED, f"gap not explained: {'; '.join(missing)} ({geomean})"
    )


def _question(report: InvestigationReport) -> str:
    lines = [f"Verdict: {report.verdict} — {report.summary}", *report.notes]
    lines += [f"- {c.side.value} {c.category}: {c.evidence}" for c in report.causes]
    return "\n".join(lines)
