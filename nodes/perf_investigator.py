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

Apart from that device-time investigation, `investigate_host_overhead` reads one
GPU run's `gpu_run.json` alone and explains why the checked wrapper costs more
host time per call than `ct.launch` (results-book target (e)): the Python
wrapper's share (wrapper minus bare cffi), the launcher's extra driver calls
(the CUPTI trace of one warm call of each), the launcher's residual (bare cffi
minus `ct.launch`) and a list's device table written on every call.
`tileport investigate RUN_DIR... [--write]` runs it on result folders.
"""

from __future__ import annotations

import re
import statistics
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from nodes.host_builder.binding import BindingError
from nodes.host_builder.launched_code import (
    LaunchedCodeError,
    LaunchedCompile,
    RunPort,
    compile_as_launched,
    load_run_port,
)
from nodes.host_builder.rust_entry import RustSourceError
from nodes.perf_validator.bootstrap import median_interval
from nodes.perf_validator.measure import reestimated_run
from schemas.gpu import GpuRunReport, HostOverhead, PerfDetail, band_text
from schemas.model_file import ModelFileError, read_model
from schemas.pipeline import Stage
from schemas.port_spec import PortSpecError
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
from schemas.run_layout import RunLayout, write_text_atomic
from schemas.sass import SassComparison
from schemas.state import PipelineState, ReportMeta, StageResult
from schemas.verdicts import (
    PERF_RATIO_LIMIT,
    InvestigationVerdict,
    PerfVerdict,
    SamenessLevel,
)
from tileir.sass import compare_cubins, compare_listings
from toolchain.cubin_elf import CubinFormatError, compare_cubin_elf
from toolchain.jit_cubins import CUBINS_DIR, kept_port_cubins, port_cubins, reference_cubins
from toolchain.llm import optional_commentary
from toolchain.rust_export import RustExporter
from toolchain.tools import ToolError, cuobjdump_sass

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
        note, usage = optional_commentary(
            _COMMENTARY_SYSTEM, _question(report), spent=state.llm_spent()
        )
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
    _aa_band_notes(perf.rows, evidence)
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


OUTSIDE_BAND_CHECKS: Final = (
    "compare what the two launches carry besides the code: the parameter layout, the "
    "launch attributes (cluster dims, shared-memory carve-out) and the cubin metadata"
)


def _aa_band_notes(rows: list[PerfRow], evidence: Evidence) -> None:
    """One note per configuration whose ratio lies outside its own A/A band."""
    for row in rows:
        if row.outside_aa_band and row.aa_band is not None:
            low, high = row.aa_band
            evidence.notes.append(
                f"{row.config_id}: port/baseline {row.ratio:.4f} is outside its A/A band "
                f"{low:.4f} to {high:.4f}; {OUTSIDE_BAND_CHECKS}"
            )


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
    outside = perf.stage_f_configurations
    if outside:
        # Same code and launches cannot explain a ratio identical kernels never give.
        return report(
            InvestigationVerdict.BLOCKED,
            f"outside their A/A band: {', '.join(outside)}; {OUTSIDE_BAND_CHECKS} ({geomean})",
        )
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


# == host overhead per call, from one GPU run ============================================
#
# Separate from the device-time investigation above: it reads only what a GPU run
# measured on the host (`gpu_run.json`'s host_overhead rows, with the CUPTI trace
# of one warm call's driver calls in their notes) and explains, figure by figure,
# why the checked wrapper costs more per call than `ct.launch`.

GRAPH_PARITY: Final = 0.10
"""Graph replay within 10 % of the reference's is at parity."""

_TRACE_LINE: Final = re.compile(r"^driver calls of one warm (port|ct\.launch) call: (\d+): (.*)$")
_LIST_COPY: Final = "cuMemcpyHtoDAsync"
_LIST_CAPTURE_REFUSED: Final = "a list's table cannot be written while the stream is captured"
_PORT_GRAPH_NOTE: Final = "port_graph_replay_us:"
_SUFFIXES: Final = ("_v2", "_v3", "_ptsz", "_ptds")
_SAME_CALL: Final = {"cuLaunchKernelEx": "cuLaunchKernel"}
"""Driver entry points that do the same thing, counted as one name when compared."""


class HostInputError(ValueError):
    """A run folder without a valid gpu_run.json; the message says which and why."""


def driver_call_name(name: str) -> str:
    """A driver call's name without its ABI suffix (`_v2`, `_ptsz`), with
    `cuLaunchKernelEx` counted as `cuLaunchKernel`: the name calls are compared by."""
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    return _SAME_CALL.get(name, name)


@dataclass(frozen=True)
class DriverTrace:
    """The driver calls of one warm call, as the CUPTI trace listed them: the count it
    stated, and the calls by compared name (`driver_call_name`) in first-seen order."""

    total: int
    calls: Counter[str]
    order: tuple[str, ...]


def driver_traces(notes: list[str]) -> tuple[DriverTrace | None, DriverTrace | None]:
    """(port, ct.launch) from a host_overhead row's notes; None where a line is absent."""
    found: dict[str, DriverTrace] = {}
    for note in notes:
        match = _TRACE_LINE.match(note.strip())
        if match is None:
            continue
        names = [driver_call_name(n.strip()) for n in match.group(3).split(",") if n.strip()]
        found[match.group(1)] = DriverTrace(
            total=int(match.group(2)), calls=Counter(names), order=tuple(dict.fromkeys(names))
        )
    return found.get("port"), found.get("ct.launch")


def _us(value: float) -> str:
    return f"{value:.2f} µs"


def _counted(calls: Counter[str], order: tuple[str, ...]) -> str:
    return ", ".join(f"{calls[name]} × {name}" for name in order if calls[name])


def _times(count: int) -> str:
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


def _driver_call_fix(name: str, port: DriverTrace, reference: DriverTrace) -> str:
    count, theirs = port.calls[name], reference.calls[name]
    if name == "cuPointerGetAttributes":
        return (
            f"the launcher's device check asks the driver about every array's data pointer "
            f"({count} per call): check each distinct pointer once per call and cache the "
            "verified allocation ranges per context (one query per allocation, with its range "
            "start and size), so that a warm call makes none"
        )
    if name == "cuCtxGetCurrent":
        return (
            f"cutile's launch path reads the current context {_times(count)} per call, "
            f"ct.launch {_times(theirs) if theirs else 'not at all'}: read it once and pass it "
            "along"
        )
    if name == "cuDeviceGetAttribute":
        return (
            f"a device attribute is read on every call ({count} ×; e.g. the SM count a "
            "persistent grid is sized by): read it once per device and cache it"
        )
    if name == "cuStreamIsCapturing":
        return "ask whether the stream is capturing only when a list table must be written"
    if name.startswith(_LIST_COPY):
        return "write a list's table only when its rows change (see list table)"
    return f"make the {count} × {name} per call once per device or allocation, or drop it"


@dataclass
class _HostFindings:
    causes: list[PerfCause] = field(default_factory=list)
    headlines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, cause: PerfCause, headline: str) -> None:
        self.causes.append(cause)
        self.headlines.append(headline)


def _python_wrapper(where: str, row: HostOverhead, found: _HostFindings) -> None:
    wrapper, cffi, launch = row.port_wrapper_us, row.port_cffi_us, row.reference_launch_us
    if wrapper is None or cffi is None or launch is None or wrapper <= cffi:
        return
    python, gap = wrapper - cffi, wrapper - launch
    if cffi <= launch:
        share = (
            f"more than the whole {_us(gap)} by which the wrapper trails ct.launch "
            f"({_us(launch)}): the port's bare call is no slower than ct.launch"
        )
    else:
        share = f"{python / gap:.0%} of the wrapper's {_us(gap)} over ct.launch's {_us(launch)}"
    parts = ""
    if row.port_key_us is not None and row.port_c_call_us is not None:
        parts = (
            f"; timed apart, the repeated-call key takes {_us(row.port_key_us)} and the C "
            f"function alone {_us(row.port_c_call_us)} (the bare cffi call's other "
            f"{_us(cffi - row.port_c_call_us)} is torch's current-stream lookup)"
        )
    found.add(
        PerfCause(
            side=CauseSide.HOST,
            category="python wrapper",
            evidence=f"{where}: the checked wrapper call costs {_us(wrapper)}, the bare cffi "
            f"call with prepared arguments {_us(cffi)}: {_us(python)} per call is Python "
            f"(the repeated-call key over every tensor's facts, the stream lookup, the cache "
            f"look-up), {share}{parts}",
            fix="cut the checked call's Python work: build the repeated-call key from fewer "
            "attribute reads (one data_ptr() and the shape and stride tuples per tensor, dtype "
            "and device compared by identity), skip the stream lookup when the caller passes "
            "a stream, and call the prepared cffi function directly; beyond that, a "
            "C-extension fast path that builds the key and makes the call in C",
        ),
        f"python wrapper {_us(python)}",
    )


def _driver_calls(
    where: str, row: HostOverhead, port: DriverTrace, reference: DriverTrace, found: _HostFindings
) -> bool:
    """The port's driver calls that ct.launch does not make; True when a cause was named."""
    extra = port.calls - reference.calls
    if not extra:
        return False
    theirs = reference.calls - port.calls
    shown = _counted(extra, port.order)
    cffi, launch = row.port_cffi_us, row.reference_launch_us
    evidence = (
        f"{where}: one warm port call makes {port.total} driver calls, one ct.launch call "
        f"{reference.total} (CUPTI trace); the port's extra: {shown}"
    )
    if theirs:
        evidence += f"; ct.launch's own: {_counted(theirs, reference.order)}"
    if cffi is not None and launch is not None and cffi <= launch:
        found.notes.append(
            f"{evidence}; the bare cffi call ({_us(cffi)}) is no slower than ct.launch "
            f"({_us(launch)}) all the same: not a cause of the gap here"
        )
        return False
    if cffi is not None and launch is not None:
        evidence += f"; bare cffi {_us(cffi)} vs ct.launch {_us(launch)} per call"
    fixes = [_driver_call_fix(name, port, reference) for name in port.order if extra[name]]
    found.add(
        PerfCause(
            side=CauseSide.HOST,
            category="launcher driver calls",
            evidence=evidence,
            fix="; ".join(fixes),
        ),
        f"launcher driver calls {port.total} vs {reference.total}",
    )
    return True


def _launcher_residual(
    where: str, operator: str, row: HostOverhead, extra_calls: int, found: _HostFindings
) -> None:
    cffi, launch = row.port_cffi_us, row.reference_launch_us
    if cffi is None or launch is None or cffi <= launch:
        return
    residual = cffi - launch
    if extra_calls:
        part = (
            f"; the {extra_calls} extra driver call(s) above are part of it (not timed one by "
            "one), the rest is"
        )
    else:
        part = "; with no extra driver call to explain it, it is"
    found.add(
        PerfCause(
            side=CauseSide.HOST,
            category="launcher residual",
            evidence=f"{where}: the bare cffi call with prepared arguments costs {_us(cffi)}, "
            f"ct.launch {_us(launch)}: {_us(residual)} per call in the launcher itself, with "
            f"Python out of the way{part} the launcher's Rust-side cost per call (descriptor "
            "checks, the device check, the compiled entry's lookup, cutile's launch packet)",
            fix=f"profile a loop of bare `cutile_{operator}` calls with prepared arguments "
            "(perf record -g, or a CUPTI trace with host timestamps) and move per-call "
            "Rust-side work out of the warm path",
        ),
        f"launcher residual {_us(residual)}",
    )


def _list_copies(trace: DriverTrace) -> list[str]:
    """The host-to-device copies of one warm call (how a list reaches the device)."""
    return [name for name in trace.order if name.startswith(_LIST_COPY)]


def _list_table(
    where: str,
    row: HostOverhead,
    port: DriverTrace,
    reference: DriverTrace | None,
    found: _HostFindings,
) -> None:
    copies = _list_copies(port)
    if not copies:
        return
    written = _counted(port.calls, tuple(copies))
    if port.calls["cuStreamIsCapturing"]:
        written += ", after cuStreamIsCapturing"
    also = reference is not None and bool(_list_copies(reference))
    evidence = f"{where}: each port call writes a list's device table ({written}), " + (
        "as ct.launch also does" if also else "which ct.launch does not"
    )
    if any(_LIST_CAPTURE_REFUSED in note for note in row.notes):
        evidence += (
            "; the port's CUDA graph capture is refused for it (\"a list's table cannot be "
            'written while the stream is captured")'
        )
    found.add(
        PerfCause(
            side=CauseSide.HOST,
            category="list table",
            evidence=evidence,
            fix="keep a list's device table across calls (the wrapper already keeps its "
            "allocation for repeated calls on the same tensors and stream) and copy the rows "
            "only when they differ from the last ones written to that table on that stream; a "
            "repeated call then makes no copy and can be captured into a CUDA graph",
        ),
        "list table",
    )


def _graph_note(where: str, row: HostOverhead) -> str:
    port, reference = row.port_graph_replay_us, row.reference_graph_replay_us
    if port is not None and reference is not None:
        figures = f"port {_us(port)} vs ct.launch's graph {_us(reference)} per replay"
        if abs(port - reference) <= GRAPH_PARITY * reference:
            return (
                f"{where}: under CUDA graph replay the host overhead is at parity ({figures}, "
                f"within {GRAPH_PARITY:.0%}): graph replay is the recommended path for "
                "launch-bound use"
            )
        if port < reference:
            return f"{where}: under CUDA graph replay the port is faster ({figures})"
        return (
            f"{where}: under CUDA graph replay the port is not at parity ({figures}, "
            f"{port / reference - 1:+.0%})"
        )
    reason = next(
        (n for n in row.notes if n.startswith(_PORT_GRAPH_NOTE)), f"{_PORT_GRAPH_NOTE} not measured"
    )
    first_line = reason.removeprefix(_PORT_GRAPH_NOTE).strip().splitlines()[0]
    first_line = first_line.split("; ")[0][:240]
    theirs = "" if reference is None else f" (ct.launch's graph replays in {_us(reference)})"
    return f"{where}: the port's CUDA graph replay was not measured{theirs}: {first_line}"


def _host_row(operator: str, row: HostOverhead, found: _HostFindings) -> None:
    """The causes of one configuration whose wrapper trails ct.launch."""
    where = f"{row.config_id} ({row.calls} calls)"
    faster = row.wrapper_faster_rounds()
    if faster is not None:
        found.notes.append(
            f"{where}: the wrapper's calls took less time than ct.launch's in {faster[0]} of "
            f"{faster[1]} interleaved rounds"
        )
    port, reference = driver_traces(row.notes)
    _python_wrapper(where, row, found)
    extra_calls = 0
    if port is not None and reference is not None:
        if _driver_calls(where, row, port, reference, found):
            extra_calls = sum((port.calls - reference.calls).values())
    else:
        found.notes.append(
            f"{where}: no driver-call trace of one warm call of both: the launcher's driver "
            "calls were not compared"
        )
    if row.port_cffi_us is None:
        found.notes.append(
            f"{where}: no bare cffi figure: the wrapper's Python cost cannot be told apart "
            "from the launcher's"
        )
    _launcher_residual(where, operator, row, extra_calls, found)
    if port is not None:
        _list_table(where, row, port, reference, found)


def _kernel_launches(run: GpuRunReport, port: bool) -> int | None:
    counts = [(row.port if port else row.reference).launches_per_call for row in run.perf]
    whole = [int(count) for count in counts if count == int(count)]
    return Counter(whole).most_common(1)[0][0] if whole else None


def investigate_host_overhead(
    run: GpuRunReport, *, run_id: str | None = None, attempt: int = 1
) -> InvestigationReport:
    """Stage F on the host cost per call of one GPU run: FIXABLE when the wrapper is
    slower than ct.launch and causes with fixes are found, ALIGNED when it is no
    slower, BLOCKED when nothing was measured or nothing splits the gap.

    `run_id` and `attempt` tie the report to the run's perf.json; the operator's
    name and 1 when there is none."""
    found = _HostFindings()

    def report(verdict: InvestigationVerdict, summary: str) -> InvestigationReport:
        return InvestigationReport(
            run_id=run_id or run.operator,
            attempt=attempt,
            verdict=verdict,
            summary=summary,
            causes=found.causes,
            port_launches_per_call=_kernel_launches(run, port=True),
            baseline_launches_per_call=_kernel_launches(run, port=False),
            notes=found.notes,
        )

    if not run.ran_on_gpu:
        return report(InvestigationVerdict.BLOCKED, f"nothing ran on a GPU: {run.statement}")
    if run.perf:
        found.notes.append(device_time_note(run))
    measured = [
        row
        for row in run.host_overhead
        if row.port_wrapper_us is not None and row.reference_launch_us is not None
    ]
    if not measured:
        return report(
            InvestigationVerdict.BLOCKED,
            "the host cost per call was not measured: no host_overhead row has both the "
            "wrapper's and ct.launch's µs per call",
        )
    trailing: list[tuple[float, str]] = []
    for row in measured:
        wrapper, launch = row.port_wrapper_us or 0.0, row.reference_launch_us or 0.0
        figures = f"wrapper {_us(wrapper)} vs ct.launch {_us(launch)} per call"
        if wrapper > launch:
            trailing.append(
                (wrapper - launch, f"{figures} (+{_us(wrapper - launch)}) on {row.config_id}")
            )
            _host_row(run.operator, row, found)
        else:
            found.notes.append(f"{row.config_id}: {figures}: the wrapper is no slower")
        found.notes.append(_graph_note(f"{row.config_id} ({row.calls} calls)", row))
    if not trailing:
        return report(
            InvestigationVerdict.ALIGNED,
            f"the wrapper is no slower than ct.launch on {len(measured)} configuration(s)",
        )
    worst = max(trailing)[1]
    if not found.causes:
        return report(
            InvestigationVerdict.BLOCKED,
            f"{worst}, and nothing splits the gap: no bare cffi figure and no driver call the "
            "port makes beyond ct.launch's",
        )
    causes = "; ".join(dict.fromkeys(found.headlines))
    return report(InvestigationVerdict.FIXABLE, f"{worst}: {causes}")


SAME_CODE_BAND: Final = (0.99, 1.01)
"""Where two runs of the same device code land: the noise band of a SASS-identical port."""


def device_time_note(run: GpuRunReport) -> str:
    """The device-time side of a run, against its own A/A control (the reference
    timed again as its own contender): how far the port is from the reference,
    and how far the reference is from itself."""
    ratios = [row.ratio for row in run.perf]
    controls = [row.control_ratio for row in run.perf if row.control_ratio is not None]
    launches = f"{_kernel_launches(run, True)}/{_kernel_launches(run, False)}"
    text = (
        f"device time: port/reference geomean {statistics.geometric_mean(ratios):.4f} over "
        f"{len(ratios)} configuration(s) ({min(ratios):.4f} to {max(ratios):.4f}), kernels "
        f"per call port/reference {launches}"
    )
    if controls:
        text += (
            f"; A/A control (reference/reference) {statistics.geometric_mean(controls):.4f} "
            f"({min(controls):.4f} to {max(controls):.4f})"
        )
    low, high = SAME_CODE_BAND
    inside = all(low <= ratio <= high for ratio in ratios)
    where = "every ratio inside" if inside else "a ratio outside"
    return f"{text}: {where} the {low:.2f}-{high:.2f} band of identical code"


REFERENCE_EXPORTS = Path("generated") / "reference"
"""Where a conversion's run directory keeps each configuration's reference export
(`<variant>__<config>.mlir`), the code its port was proven against."""
ENTRY_SYMBOL = re.compile(r"entry @([A-Za-z0-9_]+)")


def exported_entry(run_dir: Path, config_id: str) -> str | None:
    """The entry symbol of the reference export of `config_id` in a conversion's run
    directory; None when it has none."""
    for path in sorted((run_dir / REFERENCE_EXPORTS).glob(f"*__{config_id}.mlir")):
        if path.name.endswith(".loc.mlir"):
            continue
        found = ENTRY_SYMBOL.search(path.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(1)
    return None


def _symbol_difference(launched: str, proven: str) -> str:
    """The parts of two mangled entry symbols that differ (each fact of a launch is a
    `_`-separated part: array dtype and rank, divisibility, constants)."""
    ours, theirs = launched.split("_"), proven.split("_")
    pairs = zip(ours, theirs, strict=False)
    start = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    if start is None:
        return f"one is a prefix of the other ({len(ours)} against {len(theirs)} parts)"
    changed = [
        f"`{a}` where the export has `{b}`"
        for a, b in zip(ours[start:], theirs[start:], strict=False)
        if a != b
    ]
    return f"{len(changed)} part(s) differ from part {start}: " + ", ".join(changed[:6])


def outside_band(run: GpuRunReport) -> Iterator[tuple[PerfDetail, str]]:
    """Each timed configuration outside its A/A band, with the label its findings start
    with (the results book files them under it)."""
    for detail in run.perf:
        if detail.outside_aa_band:
            yield detail, f"{detail.config_id} (port/ref {detail.ratio:.4f})"


REFERENCE_SPECIALISATION: Final = "reference specialisation"


def reference_specialisation(run: GpuRunReport, run_dir: Path) -> tuple[list[PerfCause], list[str]]:
    """For each timed configuration outside its A/A band: did the cuTile Python kernel run
    as the specialisation the port was proven against? CUPTI names a launch by its entry
    symbol, which encodes every fact the launch specialised on; the conversion's reference
    export of that configuration has the symbol of the code the port's SASS was compared
    with. Another symbol is a cause: the two sides ran different code. The same symbol
    clears the specialisation: what differs comes after it (each JIT's compile of it,
    the launch, the placement)."""
    causes: list[PerfCause] = []
    notes: list[str] = []
    for detail, where in outside_band(run):
        proven = exported_entry(run_dir, detail.config_id)
        launched = detail.reference.kernels
        if not launched:
            notes.append(f"{where}: the run kept no kernel names; the reference is unchecked")
        elif proven is None:
            notes.append(f"{where}: the run `{run_dir.name}` holds no reference export of it")
        elif launched[0] == proven:
            notes.append(
                f"{where}: the cuTile Python kernel ran as the export the port was proven "
                f"against (entry {proven[:48]}...): one Tile IR specialisation on both sides, "
                "so the gap lies after it: each JIT's own tileiras compile (options, the "
                "cubin), the launch (grid, parameters, attributes) or the machine"
            )
        else:
            causes.append(
                PerfCause(
                    side=CauseSide.DEVICE,
                    category=REFERENCE_SPECIALISATION,
                    evidence=f"{where}: the cuTile Python kernel ran as {launched[0][:60]}..., "
                    f"not as the export the port was proven against: "
                    f"{_symbol_difference(launched[0], proven)}",
                    fix="give the configuration's arrays the facts of the recorded launch (or "
                    "record this launch and prove the port against it), so both sides run "
                    "one specialisation",
                )
            )
    return causes, notes


RUNTIME_CUBINS: Final = "runtime cubins"
LAUNCHER_SPECIALISATION: Final = "launcher specialisation"
# Causes found in files beside gpu_run.json (a conversion's exports, kept cubins).
CAUSES_FROM_FILES: Final = frozenset(
    {REFERENCE_SPECIALISATION, RUNTIME_CUBINS, LAUNCHER_SPECIALISATION}
)


def runtime_cubins(
    run: GpuRunReport, folder: Path, run_dir: Path | None = None
) -> tuple[list[PerfCause], list[str]]:
    """For each timed configuration outside its A/A band, in a run that kept the cubins
    both JITs compiled (`gpu-run --keep-cubins`, toolchain.jit_cubins): is the machine
    code that ran the same? With the conversion's run directory, the port's cubin for
    the configuration is rebuilt here as cutile-rs's launcher compiles it
    (`host_builder.launched_code`): a match names the launcher's own specialisation as
    the cause. Different SASS otherwise is a cause of its own; the same SASS clears
    the compile."""
    if not (folder / CUBINS_DIR).is_dir():
        return [], []
    references = reference_cubins(folder)
    listings = {cubin: cuobjdump_sass(cubin) for cubin in kept_port_cubins(folder)}
    ports = port_cubins(listings)
    target = f"sm_{(run.environment.compute_capability or '').replace('.', '')}"
    port, unavailable = _run_port(run_dir)
    causes: list[PerfCause] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tileport-cubins-") as scratch, ExitStack() as stack:
        exporter: RustExporter | None = None
        for detail, where in outside_band(run):
            candidates = [c for k in detail.port.kernels for c in ports.get(k, [])]
            blob = next((references[k] for k in detail.reference.kernels if k in references), None)
            if not candidates or blob is None:
                side = "port's" if not candidates else "reference's"
                notes.append(f"{where}: the run kept no cubin of the {side} kernel")
                continue
            reference = Path(scratch) / f"{detail.config_id}.reference.cubin"
            reference.write_bytes(blob)
            launched: LaunchedCompile | None = None
            if port is not None:
                exporter = exporter or stack.enter_context(RustExporter())
                try:
                    resolved = port.configuration(detail.config_id)
                    launched = compile_as_launched(port, resolved, target, Path(scratch), exporter)
                except (LaunchedCodeError, BindingError, ToolError, OSError) as exc:
                    unavailable = str(exc)
            if launched is None and unavailable:
                notes.append(
                    f"{where}: the launcher's compile could not be rebuilt here: " + unavailable
                )
            chosen, rebuilt = _port_cubin(candidates, listings, reference, launched)
            found = compare_cubins(reference, chosen, target)
            if found.identical:
                notes.append(
                    f"{where}: the cubins both JITs compiled on the GPU host have identical "
                    f"SASS ({found.reference_instructions} instructions); beyond it, "
                    + _beyond_sass(reference, chosen)
                )
            elif rebuilt and launched is not None:
                causes.append(_launcher_cause(where, found, launched))
            else:
                causes.append(
                    PerfCause(
                        side=CauseSide.DEVICE,
                        category=RUNTIME_CUBINS,
                        evidence=f"{where}: the cubin cuTile Python compiled and the one "
                        f"cutile-rs compiled differ in {found.differing_lines} SASS line(s) "
                        f"({found.reference_instructions} against "
                        f"{found.generated_instructions} instructions; first: "
                        f"{'; '.join(found.first_differences[:2])})",
                        fix="find which input of cutile-rs's JIT differs from the proof's "
                        "export (its bytecode: keep it beside the cubin) and state the "
                        "reference's facts there",
                    )
                )
    return causes, notes


def _beyond_sass(reference: Path, port: Path) -> str:
    """What the two cubins hold beside their SASS (toolchain.cubin_elf)."""
    try:
        return compare_cubin_elf(reference, port).summary()
    except (CubinFormatError, OSError) as exc:
        return f"their ELF could not be read: {exc}"


def _port_cubin(
    candidates: list[Path],
    listings: dict[Path, str],
    reference: Path,
    launched: LaunchedCompile | None,
) -> tuple[Path, bool]:
    """The kept port cubin of one configuration, and whether it is the one rebuilt as
    launched. The launcher compiles a cubin per specialisation of an entry: the one
    the rebuild matches is this configuration's, else the one nearest the reference."""
    if launched is not None:
        rebuilt = cuobjdump_sass(launched.cubin)
        for candidate in candidates:
            if compare_listings(rebuilt, listings[candidate])[0]:
                return candidate, True
    listing = cuobjdump_sass(reference)
    nearest = min(candidates, key=lambda c: compare_listings(listing, listings[c])[1])
    return nearest, False


def _run_port(run_dir: Path | None) -> tuple[RunPort | None, str]:
    """The conversion's port, or why it cannot be read ('' without a run directory)."""
    if run_dir is None:
        return None, ""
    try:
        return load_run_port(run_dir), ""
    except (LaunchedCodeError, BindingError, RustSourceError, PortSpecError, OSError) as exc:
        return None, str(exc)


def _launcher_cause(where: str, found: SassComparison, launched: LaunchedCompile) -> PerfCause:
    hints = ", ".join(f"{name} {divisor}" for name, divisor in launched.hints.items())
    return PerfCause(
        side=CauseSide.DEVICE,
        category=LAUNCHER_SPECIALISATION,
        evidence=f"{where}: cutile-rs's launcher compiled {launched.entry} assuming each "
        f"integer and pointer argument divisible by what its value is ({hints}); rebuilt so "
        "on the build host, the port is the cubin that ran, instruction for instruction, "
        f"and that differs from the reference's in {found.differing_lines} SASS line(s) "
        f"({found.generated_instructions} against {found.reference_instructions} "
        "instructions), while the proven export (the reference's facts only) is "
        "SASS-identical to the reference",
        fix="upstream (docs/UPSTREAM_GAPS.md, G17): cutile-rs specialises every integer "
        "scalar and raw pointer of an entry on its runtime divisibility, with no option to "
        "state only the kernel's own facts; until it has one, launch the proven cubin "
        "through a launch path of the port's own",
    )


def launch_attributes(run: GpuRunReport) -> tuple[list[PerfCause], list[str]]:
    """For each timed configuration outside its A/A band: were the port's kernels launched
    as the reference's? CUPTI records, per kernel, its grid, block, cluster, registers,
    shared memory and carve-out, cache configuration and launch type
    (`TimingColumn.launch`). A field that differs is a device cause; the same fields
    clear the launch attributes of the gap."""
    causes: list[PerfCause] = []
    notes: list[str] = []
    for detail, where in outside_band(run):
        port, reference = detail.port.launch, detail.reference.launch
        if not port or not reference:
            notes.append(f"{where}: the run kept no launch attributes; the launch is unchecked")
            continue
        differences = _launch_differences(port, reference)
        if not differences:
            notes.append(
                f"{where}: the port's kernels were launched as the reference's (same grid, "
                "block, cluster, registers, shared memory and carve-out, cache configuration "
                "and launch type in CUPTI's records)"
            )
            continue
        causes.append(
            PerfCause(
                side=CauseSide.DEVICE,
                category="launch attributes",
                evidence=f"{where}: {'; '.join(differences)}",
                fix="launch the port with the reference's attributes (launch configuration, "
                "function attributes such as the shared-memory carve-out)",
            )
        )
    return causes, notes


MODULE_PLACEMENT: Final = "module placement"


def module_placement(run: GpuRunReport) -> tuple[list[PerfCause], list[str]]:
    """For each timed configuration outside its A/A band: does the time follow where the
    code sits? Timed across modules (`PerfDetail.placements` > 1), `_across_modules`
    decides; timed from one module per side, the placement controls do
    (`PerfDetail.relocated`: the reference's code loaded into a second module;
    `PerfDetail.port_relocated`: the port's library loaded again, its code in modules
    of its own), as the A/A control runs one module twice and cannot see it. Either
    copy landing apart (the reference's outside the A/A band, the port's apart from
    the port) names the cause: code, launch and buffers equal, only the module moved.
    Neither moving clears it."""
    causes: list[PerfCause] = []
    notes: list[str] = []
    for detail, where in outside_band(run):
        if detail.placements > 1:
            cause, note = _across_modules(detail, where)
            causes += [cause] if cause is not None else []
            notes += [note] if note is not None else []
            continue
        reference, port = detail.relocated_ratio, detail.port_relocated_ratio
        if reference is None and port is None:
            notes.append(f"{where}: the run has no placement control; placement is unchecked")
            continue
        figures = []
        if reference is not None:
            figures.append(
                f"the reference's code in a second module gives relocated/ref {reference:.4f}"
                f"{band_text(detail.relocated_interval)}"
                + (" (outside the A/A band)" if detail.placement_moves else "")
            )
        if port is not None:
            figures.append(
                f"the port's code in a second module port_relocated/ref {port:.4f}"
                f"{band_text(detail.port_relocated_interval)}"
                + (" (apart from the port)" if detail.port_follows_its_module else "")
            )
        found = "; ".join(figures)
        if not (detail.placement_moves or detail.port_follows_its_module):
            notes.append(f"{where}: {found}: moving the code does not move the time")
            continue
        causes.append(
            PerfCause(
                side=CauseSide.DEVICE,
                category=MODULE_PLACEMENT,
                evidence=f"{where}: {found}, the A/A band{band_text(detail.aa_band)}: "
                "the same code launched the same way on the same buffers changes its time "
                "with the module it was loaded into, so where the code sits in device "
                "memory moves this configuration, and each side's code sits in a module "
                "of its own",
                fix="none in the port: judge the configuration against the spread of "
                "placements (both sides' copies), not against one module run twice",
            )
        )
    return causes, notes


def _across_modules(detail: PerfDetail, where: str) -> tuple[PerfCause | None, str | None]:
    """A configuration timed across modules, outside its A/A band: the cause is module
    placement when the reference's own code, module by module (its modules and the
    control's), spans the port's ratio, and its fastest and slowest module differ by
    more than their medians' intervals: the same code moved is as far from itself as
    the port is from it. Otherwise placement does not account for the gap."""
    reference_range, port_range = detail.reference_code_range, detail.port_code_range
    assert reference_range is not None  # timed across modules
    modules = detail.reference_code_modules
    slowest, fastest = max(modules, key=statistics.median), min(modules, key=statistics.median)
    apart = median_interval(slowest).low > median_interval(fastest).high
    spans = reference_range[0] <= detail.ratio <= reference_range[1]
    found = (
        f"the reference's code from {len(modules)} modules runs at "
        f"{reference_range[0]:.4f} to {reference_range[1]:.4f} of the reference"
        + ("" if apart else " (within its modules' noise)")
        + (
            ""
            if port_range is None
            else f", the port's from {detail.placements} at {port_range[0]:.4f} to "
            f"{port_range[1]:.4f}"
        )
    )
    if not (apart and spans):
        return None, f"{where}: {found}: where the code sits does not account for the gap"
    cause = PerfCause(
        side=CauseSide.DEVICE,
        category=MODULE_PLACEMENT,
        evidence=f"{where}: {found}; the A/A band{band_text(detail.aa_band)}: the same "
        "code launched the same way on the same buffers changes its time with the module "
        "it was loaded into, as far as the port is from the reference; each side's median "
        "pools its modules, and this configuration's share of them decides its ratio",
        fix="none in the port: more modules per side (gpu-run --placements) narrow what "
        "placement leaves in one configuration's ratio",
    )
    return cause, None


def _launch_differences(port: list[dict[str, int]], reference: list[dict[str, int]]) -> list[str]:
    if len(port) != len(reference):
        return [f"{len(port)} kernel(s) per call against the reference's {len(reference)}"]
    found = []
    for index, (mine, theirs) in enumerate(zip(port, reference, strict=True)):
        for name in sorted(mine.keys() & theirs.keys()):
            if mine[name] != theirs[name]:
                kernel = f"kernel {index + 1}: " if len(port) > 1 else ""
                found.append(f"{kernel}{name} {mine[name]} against the reference's {theirs[name]}")
    return found


# -- the command line: `tileport investigate` ----------------------------------------------


def investigate_folder(folder: Path, runs: Path | None = None) -> InvestigationReport:
    """The host investigation of one gpu-run result folder; its perf.json, when valid,
    gives the run id and attempt. With `runs` (the folder of the conversions' run
    directories, one per operator), each configuration outside its A/A band is checked
    against the reference export its port was proven against
    (`reference_specialisation`). Every such configuration's launch attributes are
    checked (`launch_attributes`), and its cubins where the run kept them
    (`runtime_cubins`)."""
    path = folder / GpuRunReport.FILE_NAME
    if not path.is_file():
        raise HostInputError(f"{folder}: no {GpuRunReport.FILE_NAME} in it")
    try:
        # Judged again from the kept samples, as the results book reads it.
        run = reestimated_run(read_model(path, GpuRunReport))
    except ModelFileError as exc:
        raise HostInputError(str(exc)) from exc
    run_id, attempt = None, 1
    try:
        perf = PerfReport.model_validate_json(
            (folder / PerfReport.FILE_NAME).read_text(encoding="utf-8")
        )
        run_id, attempt = perf.run_id, perf.attempt
    except (OSError, UnicodeDecodeError, ValidationError):
        pass
    report = investigate_run(run, run_id=run_id, attempt=attempt)
    causes, notes = runtime_cubins(run, folder, runs / run.operator if runs else None)
    if runs is not None:
        found = reference_specialisation(run, runs / run.operator)
        causes, notes = causes + found[0], notes + found[1]
    return report.model_copy(
        update={"causes": [*report.causes, *causes], "notes": [*report.notes, *notes]}
    )


LIST_WRITTEN_IN_THE_CALL: Final = "list written in the reference's call"


def list_written_in_the_call(run: GpuRunReport) -> tuple[list[PerfCause], list[str]]:
    """For each configuration where the port is slower outside its A/A band: does
    `ct.launch` copy a list's data to the device in every call while the port's warm
    call copies nothing (the driver-call traces of the host measurement)? The copy runs
    in the timed call, after the L2 flush and just before the reference's kernel, so
    that kernel reads its list from the L2; the port's table, written once, was
    flushed and is read from device memory. Timing conditions differ, not code."""
    traces = [driver_traces(row.notes) for row in run.host_overhead]
    copied = [
        reference
        for port, reference in traces
        if port is not None
        and reference is not None
        and not _list_copies(port)
        and _list_copies(reference)
    ]
    if not copied:
        return [], []
    copy = _list_copies(copied[0])[0]
    causes = [
        PerfCause(
            side=CauseSide.DEVICE,
            category=LIST_WRITTEN_IN_THE_CALL,
            evidence=f"{where}: one warm ct.launch call copies its list to the device "
            f"({copy}, before its kernel, after the L2 flush) and the port's warm call "
            "copies nothing (its table was written when its rows last changed): the "
            "reference's kernel reads its list from the L2, the port's reads its table "
            "from device memory after the flush",
            fix="none in the kernel: the flush leaves only the port's table cold; a port "
            "writing its table in every call would match, at the host cost of a copy per "
            "call (target (e))",
        )
        for detail, where in outside_band(run)
        if detail.ratio > 1
    ]
    return causes, []


def investigate_run(run: GpuRunReport, *, run_id: str | None, attempt: int) -> InvestigationReport:
    """What one GPU run's figures alone say: the host overhead's investigation with the
    launch attributes, the placement and the list copies of every configuration outside
    its A/A band."""
    report = investigate_host_overhead(run, run_id=run_id, attempt=attempt)
    causes, notes = launch_attributes(run)
    for found in (module_placement(run), list_written_in_the_call(run)):
        causes, notes = causes + found[0], notes + found[1]
    return report.model_copy(
        update={"causes": [*report.causes, *causes], "notes": [*report.notes, *notes]}
    )


def write_investigation(report: InvestigationReport, folder: Path) -> Path:
    path = folder / InvestigationReport.FILE_NAME
    write_text_atomic(path, report.model_dump_json(indent=2) + "\n")
    return path


def describe_investigation(label: str, report: InvestigationReport) -> str:
    """One paragraph: the verdict and summary, then each cause with its figures and fix."""
    lines = [f"{label}: {report.verdict.value}: {report.summary}"]
    for cause in report.causes:
        lines.append(f"  - {cause.side.value} {cause.category}: {cause.evidence}")
        lines.append(f"    fix: {cause.fix}")
    lines += [f"  note: {note}" for note in report.notes]
    return "\n".join(lines)
