"""The results book: several GPU runs, one kernel each, read together and checked
against the project's targets.

`build_book` reads each run folder a `tileport gpu-run` wrote (`gpu_run.json`,
`correctness.json` when it is there, for each case's pass/fail and errors, and
`investigation.json`, stage F's host-side investigation of `tileport
investigate`, when it is there);
`write_book` writes `<name>.json`, `<name>.md` (the table `book_markdown` makes)
and `<name>.svg` (the chart `book_svg` draws, by hand: no plotting library).

The targets: (a) every configuration correct, (b) the geomean of port/reference
over all timed configurations at most 1.00 (where it has an interval: not shown
above 1.00, its low end at most 1.00), (c) no kernel's geomean above 1.05,
(d) SASS-identical kernels within 0.99-1.01, (e) the Python wrapper's host cost
per call no worse than `ct.launch`'s, where measured, (f) parity: the overall
geomean's 95 % interval inside 0.995-1.005; for each kernel missing (e), the
book shows its investigation's verdict and causes.
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from xml.sax.saxutils import escape

from pydantic import BaseModel

from nodes.perf_validator.bootstrap import TARGET_HALF_WIDTH, Interval
from nodes.perf_validator.measure import geomean_band, reestimated_run
from schemas.gpu import CaseDetail, GpuEnvironment, GpuRunReport, PerfDetail, band_text
from schemas.model_file import ModelFileError, read_model
from schemas.reports import (
    CorrectnessCase,
    CorrectnessReport,
    InvestigationReport,
    geomean_line,
)
from schemas.results_book import (
    BookCase,
    BookOverall,
    BookTiming,
    KernelEntry,
    MachineRecord,
    ResultsBook,
    TargetCheck,
)
from schemas.run_layout import RunPathError, safe_name, write_text_atomic
from schemas.verdicts import PERF_RATIO_LIMIT
from toolchain.env import KERNELS_RS

OVERALL_LIMIT = 1.00
PARITY_BAND = (0.995, 1.005)
KERNEL_LIMIT = PERF_RATIO_LIMIT
SASS_BAND = (0.99, 1.01)

M = TypeVar("M", bound=BaseModel)


class BookInputError(ValueError):
    """A run folder (or book name) the book cannot use; the message says which and why."""


# --- reading the runs --------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    folder: Path
    report: GpuRunReport
    correctness: CorrectnessReport | None
    investigation: InvestigationReport | None = None


def _load(path: Path, model: type[M]) -> M:
    try:
        return read_model(path, model)
    except ModelFileError as exc:
        raise BookInputError(str(exc)) from exc


def _load_run(folder: Path) -> _Run:
    """One run folder; `correctness.json` and `investigation.json` are optional, but must
    be valid when present (and the investigation must match the run's figures)."""
    if not folder.is_dir():
        raise BookInputError(f"{folder}: not a folder")
    report_path = folder / GpuRunReport.FILE_NAME
    if not report_path.is_file():
        raise BookInputError(f"{folder}: no {GpuRunReport.FILE_NAME} in it")
    # Judged again from the kept samples: one estimator across runs of any date.
    report = reestimated_run(_load(report_path, GpuRunReport))
    correctness_path = folder / CorrectnessReport.FILE_NAME
    correctness = _load(correctness_path, CorrectnessReport) if correctness_path.is_file() else None
    return _Run(folder, report, correctness, _investigation(folder, report))


def _investigation(folder: Path, report: GpuRunReport) -> InvestigationReport | None:
    """The folder's host-side investigation, refused when it was derived from other
    figures than gpu_run.json holds now (a run replaced after `tileport investigate`)."""
    path = folder / InvestigationReport.FILE_NAME
    if not path.is_file():
        return None
    found = _load(path, InvestigationReport)
    from nodes.perf_investigator import CAUSES_FROM_FILES, investigate_run

    current = investigate_run(report, run_id=found.run_id, attempt=found.attempt)
    derived = [c for c in found.causes if c.category not in CAUSES_FROM_FILES]
    if (found.verdict, found.summary, derived) != (
        current.verdict,
        current.summary,
        current.causes,
    ):
        raise BookInputError(
            f"{path}: does not match the figures of {GpuRunReport.FILE_NAME} beside it; run "
            f"`tileport investigate {folder} --write` again"
        )
    return found


# --- the book ----------------------------------------------------------------------------


def build_book(
    run_dirs: list[Path], name: str, *, sass_identical: Collection[str] | None = None
) -> ResultsBook:
    """Read the runs (one kernel each) and check them against the targets.

    `sass_identical` names the kernels held to target (d); None: every kernel (the
    ports in the library are all SASS-identical to their references)."""
    try:
        safe_name(name)
    except RunPathError as exc:
        raise BookInputError(f"book name: {exc}") from exc
    if not run_dirs:
        raise BookInputError("no run folders given")
    runs = [_load_run(folder) for folder in run_dirs]
    _refuse_duplicates(runs)
    kernels = [_kernel(run) for run in runs]
    held = [k.name for k in kernels if sass_identical is None or k.name in sass_identical]
    overall = _overall(kernels)
    return ResultsBook(
        name=name,
        machines=_machines(runs),
        crates=library_crates(),
        kernels=kernels,
        sass_identical_kernels=held,
        overall=overall,
        targets=check_targets(kernels, overall, held),
    )


CRATE_PREFIXES = ("cutile", "cuda-")


def library_crates(lock: Path = KERNELS_RS / "Cargo.lock") -> dict[str, str]:
    """name -> version of the cutile and CUDA crates the kernel library links."""
    try:
        packages = tomllib.loads(lock.read_text(encoding="utf-8")).get("package", [])
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    return {
        str(package["name"]): str(package["version"])
        for package in packages
        if str(package.get("name", "")).startswith(CRATE_PREFIXES)
    }


def _refuse_duplicates(runs: list[_Run]) -> None:
    # One row per kernel: two runs of one operator would leave the book ambiguous.
    seen: dict[str, Path] = {}
    for run in runs:
        operator = run.report.operator
        if operator in seen:
            raise BookInputError(
                f"{run.folder}: operator {operator} is already given by {seen[operator]}"
            )
        seen[operator] = run.folder


def _kernel(run: _Run) -> KernelEntry:
    report = run.report
    cases = _cases(report, run.correctness)
    failed = _failed_configurations(cases)
    checked = list(dict.fromkeys(case.config_id for case in cases))
    timings = _timings(report.perf, cases)
    ratios = [timing.ratio for timing in timings]
    return KernelEntry(
        name=report.operator,
        run=run.folder.name,
        ran_on_gpu=report.ran_on_gpu,
        statement=report.statement,
        correctness_verdict=report.correctness_verdict,
        perf_verdict=report.perf_verdict,
        case_source="correctness.json" if run.correctness else "gpu_run.json",
        cases=cases,
        seeds=sorted({case.seed for case in cases}),
        configurations_checked=len(checked),
        configurations_correct=len(checked) - len(failed),
        failed_configurations=failed,
        worst_max_abs_error=_worst(case.max_abs_error for case in cases),
        worst_max_rel_error=_worst(case.max_rel_error for case in cases),
        timings=timings,
        geomean_ratio=_geomean(ratios),
        geomean_interval=geomean_band([(t.port, t.reference) for t in timings]),
        min_ratio=min(ratios, default=None),
        max_ratio=max(ratios, default=None),
        control_geomean_ratio=_geomean([t.control_ratio for t in timings]),
        host_overhead=list(report.host_overhead),
        investigation=run.investigation,
        notes=list(report.notes),
    )


def _cases(report: GpuRunReport, correctness: CorrectnessReport | None) -> list[BookCase]:
    """The run's cases joined, by configuration and seed, with correctness.json's."""
    checked = {(c.config_id, c.seed): c for c in correctness.cases} if correctness else {}
    verdict = report.correctness_verdict
    rows = [
        _case(detail, checked.pop((detail.config_id, detail.seed), None), verdict)
        for detail in report.cases
    ]
    return rows + [_case(None, case, verdict) for case in checked.values()]


_CHECKED_FIELDS = {"config_id", "seed", "passed", "dtype", "shapes", "max_abs_error"}
_CHECKED_FIELDS |= {"max_rel_error", "atol", "rtol"}
_DETAIL_FIELDS = {"config_id", "seed", "ragged", "port_status", "matches_reference_kernel"}


def _case(detail: CaseDetail | None, checked: CorrectnessCase | None, verdict: str) -> BookCase:
    # Without correctness.json the only evidence of a pass is the run's own ALL_PASS.
    fields: dict[str, object] = {"passed": verdict == "ALL_PASS"}
    if checked is not None:
        fields |= checked.model_dump(include=_CHECKED_FIELDS)
    if detail is not None:
        fields |= detail.model_dump(include=_DETAIL_FIELDS)
        # A C status means the port refused the call, whatever else was recorded.
        fields["passed"] = bool(fields["passed"]) and detail.port_status is None
    return BookCase.model_validate(fields)


def _failed_configurations(cases: list[BookCase]) -> list[str]:
    return list(dict.fromkeys(case.config_id for case in cases if not case.passed))


def _timings(perf: list[PerfDetail], cases: list[BookCase]) -> list[BookTiming]:
    dtypes = {case.config_id: case.dtype for case in cases if case.dtype}
    return [
        BookTiming(
            config_id=row.config_id,
            dtype=dtypes.get(row.config_id),
            port=row.port,
            reference=row.reference,
            torch=row.torch,
            control=row.control,
            ratio=row.ratio,
            control_ratio=row.control_ratio,
            rounds=row.rounds,
            cap_hit=row.cap_hit,
            ratio_interval=row.ratio_interval,
            aa_band=row.aa_band,
        )
        for row in perf
    ]


def _geomean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.geometric_mean(present) if present else None


def _worst(values: Iterable[float | None]) -> float | None:
    return max((value for value in values if value is not None), default=None)


def _overall(kernels: list[KernelEntry]) -> BookOverall:
    ratios = [timing.ratio for kernel in kernels for timing in kernel.timings]
    geomean = _geomean(ratios)
    checked = sum(kernel.configurations_checked for kernel in kernels)
    correct = sum(kernel.configurations_correct for kernel in kernels)
    controls = [t.control_ratio for k in kernels for t in k.timings if t.control_ratio]
    return BookOverall(
        kernels=len(kernels),
        configurations_timed=len(ratios),
        geomean_ratio=geomean,
        geomean_interval=geomean_band(
            [(timing.port, timing.reference) for kernel in kernels for timing in kernel.timings]
        ),
        geomean_line=geomean_line(geomean, len(ratios)),
        control_geomean_ratio=_geomean(controls),
        control_spread=(min(controls), max(controls)) if controls else None,
        configurations_checked=checked,
        configurations_correct=correct,
        correct_fraction=correct / checked if checked else None,
    )


# --- the machines --------------------------------------------------------------------------


def _machines(runs: list[_Run]) -> list[MachineRecord]:
    """One record per distinct (GPU, driver); runs that never reached a GPU add none."""
    groups: dict[tuple[str | None, str | None], list[_Run]] = {}
    for run in runs:
        env = run.report.environment
        if env.gpu is not None or env.driver is not None:
            groups.setdefault((env.gpu, env.driver), []).append(run)
    return [_machine(group) for group in groups.values()]


def _machine(group: list[_Run]) -> MachineRecord:
    first = group[0].report.environment
    return MachineRecord(
        **first.model_dump(),
        kernels=[run.report.operator for run in group],
        differences=_differences(group),
    )


def _flat(env: GpuEnvironment) -> dict[str, str]:
    flat = {
        "compute_capability": str(env.compute_capability),
        "l2_bytes": str(env.l2_bytes),
        "num_sms": str(env.num_sms),
    }
    flat |= {f"clocks.{key}": value for key, value in env.clocks.items()}
    flat |= {f"versions.{key}": value for key, value in env.versions.items()}
    return flat


def _differences(group: list[_Run]) -> list[str]:
    flats = [(run.report.operator, _flat(run.report.environment)) for run in group]
    keys = dict.fromkeys(key for _, flat in flats for key in flat)
    lines = []
    for key in keys:
        values = [(operator, flat.get(key, "-")) for operator, flat in flats]
        if len({value for _, value in values}) > 1:
            lines.append(f"{key}: " + ", ".join(f"{op} {value}" for op, value in values))
    return lines


# --- the targets ---------------------------------------------------------------------------


def check_targets(
    kernels: list[KernelEntry], overall: BookOverall, sass_identical: Collection[str]
) -> list[TargetCheck]:
    """Targets (a) to (f), in that order, each with the kernels that miss it."""
    return [
        _target_correct(kernels, overall),
        _target_overall(kernels, overall),
        _target_per_kernel(kernels),
        _target_sass_band(kernels, sass_identical),
        _target_host(kernels),
        _target_parity(kernels, overall),
    ]


def _target_correct(kernels: list[KernelEntry], overall: BookOverall) -> TargetCheck:
    missing = [kernel.name for kernel in kernels if not kernel.correct]
    return TargetCheck(
        id="a",
        description="100% of configurations correct",
        passed=not missing,
        missing=missing,
        detail=f"{overall.configurations_correct}/{overall.configurations_checked} "
        "configurations correct; a kernel also misses it unless its run said ALL_PASS",
    )


def _untimed(kernels: list[KernelEntry]) -> list[str]:
    return [kernel.name for kernel in kernels if kernel.geomean_ratio is None]


def _over(kernels: list[KernelEntry], limit: float) -> list[str]:
    return [k.name for k in kernels if k.geomean_ratio is not None and k.geomean_ratio > limit]


def _target_overall(kernels: list[KernelEntry], overall: BookOverall) -> TargetCheck:
    untimed = _untimed(kernels)
    geomean = overall.geomean_ratio
    interval = overall.geomean_interval
    shown_at_most = interval[0] if interval is not None else geomean
    passed = shown_at_most is not None and shown_at_most <= OVERALL_LIMIT and not untimed
    shown = "not measured" if geomean is None else f"{geomean:.4f}"
    return TargetCheck(
        id="b",
        description=f"overall geomean port/reference <= {OVERALL_LIMIT:.2f}",
        passed=passed,
        missing=untimed + _over(kernels, OVERALL_LIMIT),
        detail=f"{shown}{band_text(interval)} over {overall.configurations_timed} "
        f"configurations; listed: kernels above {OVERALL_LIMIT:.2f} on their own, or not timed",
    )


def _target_parity(kernels: list[KernelEntry], overall: BookOverall) -> TargetCheck:
    low, high = PARITY_BAND
    interval = overall.geomean_interval
    untimed = _untimed(kernels)
    passed = interval is not None and low <= interval[0] and interval[1] <= high and not untimed
    shown = "no interval" if interval is None else f"{interval[0]:.4f} to {interval[1]:.4f}"
    return TargetCheck(
        id="f",
        description=f"overall geomean's 95 % interval inside {low:.3f}-{high:.3f}",
        passed=passed,
        missing=untimed,
        detail=f"{shown} over {overall.configurations_timed} configurations"
        + ("" if not untimed else "; listed: kernels not timed"),
    )


def _target_per_kernel(kernels: list[KernelEntry]) -> TargetCheck:
    missing = _untimed(kernels) + _over(kernels, KERNEL_LIMIT)
    return TargetCheck(
        id="c",
        description=f"no kernel's geomean above {KERNEL_LIMIT:.2f}",
        passed=not missing,
        missing=missing,
        detail="a kernel that was not timed misses it too",
    )


def _target_sass_band(kernels: list[KernelEntry], sass_identical: Collection[str]) -> TargetCheck:
    low, high = SASS_BAND
    held = [kernel for kernel in kernels if kernel.name in sass_identical]
    missing = [
        kernel.name
        for kernel in held
        if kernel.geomean_ratio is None or not low <= kernel.geomean_ratio <= high
    ]
    return TargetCheck(
        id="d",
        description=f"SASS-identical kernels within {low:.2f}-{high:.2f}",
        passed=not missing,
        missing=missing,
        detail=f"{len(held) - len(missing)}/{len(held)} SASS-identical kernels in the band",
    )


def _host_pairs(kernel: KernelEntry) -> list[tuple[float, float]]:
    """(wrapper µs, ct.launch µs) per configuration where both were measured."""
    return [
        (row.port_wrapper_us, row.reference_launch_us)
        for row in kernel.host_overhead
        if row.port_wrapper_us is not None and row.reference_launch_us is not None
    ]


def _faster_rounds(kernel: KernelEntry) -> str:
    """ "name: k/n rounds" for the configurations whose rounds were kept, else ""."""
    counted = [row.wrapper_faster_rounds() for row in kernel.host_overhead]
    shown = [f"{faster}/{rounds}" for faster, rounds in filter(None, counted)]
    return f"{kernel.name}: {', '.join(shown)} rounds" if shown else ""


def _target_host(kernels: list[KernelEntry]) -> TargetCheck:
    measured = [kernel for kernel in kernels if _host_pairs(kernel)]
    missing = [k.name for k in measured if any(w > r for w, r in _host_pairs(k))]
    unmeasured = [kernel.name for kernel in kernels if kernel not in measured]
    detail = f"measured for {len(measured)}/{len(kernels)} kernels"
    if unmeasured:
        detail += f"; not measured: {', '.join(unmeasured)}"
    if missing:
        investigated = [k for k in measured if k.name in missing and k.investigation]
        detail += (
            f"; {len(investigated)}/{len(missing)} kernels missing it have a host-side "
            "investigation"
        )
        rounds = [_faster_rounds(k) for k in measured if k.name in missing]
        if any(rounds):
            detail += "; the wrapper faster in " + ", ".join(r for r in rounds if r)
    return TargetCheck(
        id="e",
        description="wrapper µs per call no worse than ct.launch's",
        passed=bool(measured) and not missing,
        missing=missing,
        detail=detail,
    )


# --- writing it ----------------------------------------------------------------------------


def write_book(book: ResultsBook, out_dir: Path) -> list[Path]:
    """`<name>.json`, `<name>.svg` and `<name>.md` in `out_dir`; returns their paths."""
    texts = {
        f"{book.name}.json": book.model_dump_json(indent=2) + "\n",
        f"{book.name}.svg": book_svg(book),
        f"{book.name}.md": book_markdown(book),
    }
    paths = []
    for file_name, text in texts.items():
        path = out_dir / file_name
        write_text_atomic(path, text)
        paths.append(path)
    return paths


def _gpus(book: ResultsBook) -> str:
    names = list(dict.fromkeys(m.gpu for m in book.machines if m.gpu))
    return ", ".join(names) if names else "no GPU"


def _number(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machine_line(machine: MachineRecord) -> str:
    parts = [f"**{machine.gpu or 'unknown GPU'}**"]
    if machine.compute_capability:
        parts.append(f"compute capability {machine.compute_capability}")
    if machine.num_sms is not None:
        parts.append(f"{machine.num_sms} SMs")
    if machine.l2_bytes is not None:
        parts.append(f"L2 {machine.l2_bytes / 2**20:g} MiB")
    parts.append(f"driver {machine.driver or 'unknown'}")
    parts += [f"{key} {value}" for key, value in machine.clocks.items()]
    line = "- " + ", ".join(parts) + f" (kernels: {', '.join(machine.kernels)})"
    if machine.versions:
        versions = ", ".join(f"{key} {value}" for key, value in machine.versions.items())
        line += f"\n  - toolchain: {versions}"
    line += "".join(f"\n  - differs between runs: {diff}" for diff in machine.differences)
    return line


def _kernel_row(kernel: KernelEntry) -> str:
    correctness = (
        f"{kernel.correctness_verdict} "
        f"({kernel.configurations_correct}/{kernel.configurations_checked} configs)"
    )
    wrapper = (
        "<br>".join(
            f"{_number(h.port_wrapper_us, '.1f')} vs {_number(h.reference_launch_us, '.1f')}"
            for h in kernel.host_overhead
        )
        or "-"
    )
    graph = (
        "<br>".join(
            f"{_number(h.port_graph_replay_us, '.1f')} / "
            f"{_number(h.reference_graph_replay_us, '.1f')}"
            for h in kernel.host_overhead
        )
        or "-"
    )
    errors = f"{_number(kernel.worst_max_abs_error, '.3g')} / "
    errors += _number(kernel.worst_max_rel_error, ".3g")
    cells = [
        kernel.name,
        correctness,
        str(len(kernel.cases)),
        str(len(kernel.timings)),
        _number(kernel.geomean_ratio) + band_text(kernel.geomean_interval),
        _number(kernel.min_ratio),
        _number(kernel.max_ratio),
        _number(kernel.control_geomean_ratio),
        errors,
        wrapper,
        graph,
    ]
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


KERNEL_HEADER = (
    "| kernel | correctness | cases | configs timed | geomean port/ref (95 %) | min ratio | "
    "max ratio | control/ref (A/A) | worst abs / rel error | wrapper µs vs ct.launch µs | "
    "graph replay port / ref µs |"
)


def _stage_f_lines(book: ResultsBook) -> list[str]:
    """Each configuration whose port / reference lies outside its own A/A band: listed
    one by one, whatever its kernel's geomean, for stage F."""
    outside = [
        (kernel, timing, _findings(kernel, timing.config_id))
        for kernel in book.kernels
        for timing in kernel.timings
        if timing.outside_aa_band
    ]
    if not outside:
        return []
    rows = [
        f"- {kernel.name} / {timing.config_id}: port/ref {timing.ratio:.4f}"
        f"{band_text(timing.ratio_interval)}, A/A band{band_text(timing.aa_band)}"
        + "".join(f"\n  - {found}" for found in findings)
        for kernel, timing, findings in outside
    ]
    named = sum(any(f.startswith("cause: ") for f in findings) for _, _, findings in outside)
    return [
        "### Outside their A/A band (stage F)",
        "",
        "Port / reference where two identical kernels do not land: parameter layout, launch "
        "attributes (cluster dims, shared-memory carve-out), cubin metadata and the "
        "modules each side ran from to compare.",
        "",
        f"{len(outside)} configuration(s); stage F names a cause for {named}, none yet for "
        f"{len(outside) - named}.",
        "",
        *rows,
        "",
    ]


def _findings(kernel: KernelEntry, config_id: str) -> list[str]:
    """What stage F's investigation found on one configuration (`tileport investigate
    --runs`): its device-side causes and notes, which start with the configuration."""
    report = kernel.investigation
    if report is None:
        return []
    start = f"{config_id} ("
    causes = [f"cause: {c.evidence}" for c in report.causes if c.evidence.startswith(start)]
    return causes + [note for note in report.notes if note.startswith(start)]


def _control_line(overall: BookOverall) -> str:
    """The A/A control: the reference against itself, the size of the noise."""
    if overall.control_geomean_ratio is None or overall.control_spread is None:
        return "No A/A control was timed (the reference against itself)."
    low, high = overall.control_spread
    return (
        f"A/A control (the reference timed twice, as two contenders): geomean "
        f"{overall.control_geomean_ratio:.4f}, per configuration {low:.4f} to {high:.4f}: "
        "differences of this size are the protocol's noise, not the kernels'."
    )


def _precision_line(book: ResultsBook) -> str:
    """How many configurations pin every compared figure (port, reference, control)
    to the sampling target at 95 %, and how many the round cap stopped first (a run
    from before the estimator changed can miss the target without reaching its cap:
    its rounds were chosen on the samples' median)."""
    timings = [timing for kernel in book.kernels for timing in kernel.timings]
    pinned = sum(
        all(
            column.median_interval_us is not None
            and Interval(*column.median_interval_us).relative_half_width(column.median_us)
            <= TARGET_HALF_WIDTH
            for column in (timing.port, timing.reference, timing.control)
            if column is not None
        )
        for timing in timings
    )
    capped = sum(timing.cap_hit for timing in timings)
    return (
        f"Precision: {pinned} of {len(timings)} configurations have every compared "
        f"figure's 95 % interval within ±{TARGET_HALF_WIDTH:.1%}; the round cap stopped "
        f"{capped} first."
    )


def _placements_line(book: ResultsBook) -> str:
    """Which kernels were timed across modules per side (gpu-run --placements), which
    from one module each."""
    by_count: dict[int, list[str]] = {}
    for kernel in book.kernels:
        counts = [max(1, len(t.port.placement_samples())) for t in kernel.timings]
        if counts:
            by_count.setdefault(max(counts), []).append(kernel.name)
    parts = [
        f"{len(names)} kernel(s) from {count} module(s) per side"
        + (f" ({', '.join(names)})" if count > 1 else "")
        for count, names in sorted(by_count.items(), reverse=True)
    ]
    return (
        "Modules per side (each side's code loaded into that many modules, rotated by round): "
        + ("; ".join(parts) or "none timed")
        + "."
    )


def book_markdown(book: ResultsBook) -> str:
    """The book as markdown: machines, chart, one row per kernel, overall, targets."""
    overall = book.overall
    fraction = "-" if overall.correct_fraction is None else f"{overall.correct_fraction * 100:.1f}%"
    lines = [
        f"# Results book: {book.name}",
        "",
        "Machines:",
        "",
        *(_machine_line(machine) for machine in book.machines),
        *(
            ["- kernel library crates: " + ", ".join(f"{k} {v}" for k, v in book.crates.items())]
            if book.crates
            else []
        ),
        "",
        f"![geomean port / cuTile Python per kernel on {_gpus(book)}]({book.name}.svg)",
        "",
        KERNEL_HEADER,
        "|" + "---|" * 11,
        *(_kernel_row(kernel) for kernel in book.kernels),
        "",
        f"Overall: {overall.geomean_line}{band_text(overall.geomean_interval)}; "
        f"{overall.kernels} kernels, "
        f"{overall.configurations_correct}/{overall.configurations_checked} configurations "
        f"correct ({fraction}).",
        "",
        _control_line(overall),
        "",
        _placements_line(book),
        "",
        _precision_line(book),
        "",
        "Ratios are port / cuTile Python reference figures of CUPTI device time: per "
        "side the median of cycle means (a cycle: one sample from each of the side's "
        "modules; the samples' median for a side timed from one module), judged again "
        "from the kept samples, with bootstrap 95 % intervals; host figures are "
        "wall-clock µs per call.",
        "",
        "## Targets",
        "",
        "| target | result | kernels missing it | detail |",
        "|---|---|---|---|",
        *(
            f"| ({t.id}) {_cell(t.description)} | {'PASS' if t.passed else 'FAIL'} | "
            f"{_cell(', '.join(t.missing)) or '-'} | {_cell(t.detail)} |"
            for t in book.targets
        ),
        "",
        *_stage_f_lines(book),
        *_host_investigations(book),
    ]
    return "\n".join(lines)


def _host_investigations(book: ResultsBook) -> list[str]:
    """For each kernel missing target (e): its host-side investigation's verdict and the
    categories of its causes, or that it has none yet."""
    host = next(t for t in book.targets if t.id == "e")
    kernels = [kernel for kernel in book.kernels if kernel.name in host.missing]
    if not kernels:
        return []
    rows = []
    tally: dict[str, int] = {}
    for kernel in kernels:
        report = kernel.investigation
        pairs = ", ".join(
            f"{_number(h.port_wrapper_us, '.1f')} vs {_number(h.reference_launch_us, '.1f')}"
            for h in kernel.host_overhead
        )
        if report is None:
            found = f"not investigated (`tileport investigate {kernel.run} --write`)"
        else:
            categories = list(dict.fromkeys(cause.category for cause in report.causes))
            for category in categories:
                tally[category] = tally.get(category, 0) + 1
            found = f"{report.verdict.value}: {', '.join(categories) or 'no cause'}"
        rows.append(f"- {kernel.name} (wrapper vs ct.launch µs per call: {pairs}): {found}")
    lines = [
        "### Target (e): host-side investigations",
        "",
        "Stage F's `tileport investigate` on each kernel missing (e) (`investigation.json` "
        "in its folder has every cause with its figures and its fix):",
        "",
        *rows,
        "",
    ]
    if tally:
        counted = ", ".join(f"{category} in {count}" for category, count in tally.items())
        lines += [f"Causes over the {len(kernels)} kernels: {counted}.", ""]
    return lines


# --- the chart -----------------------------------------------------------------------------

_CHART_HEIGHT = 320
_TOP, _BOTTOM, _LEFT, _RIGHT = 48, 56, 64, 24
_SLOT = 96
_BAR_WIDTH = 48
_DASHED = ' stroke-dasharray="6 4"'


def _axis_range(ratios: list[float]) -> tuple[float, float]:
    # Ratios sit near 1.00: from zero every bar would look the same height.
    low = min([0.90, *(ratio - 0.02 for ratio in ratios)])
    high = max([1.10, *(ratio + 0.02 for ratio in ratios)])
    return low, high


def _bar_colour(ratio: float) -> str:
    if ratio <= OVERALL_LIMIT:
        return "#2e7d32"
    return "#f9a825" if ratio <= KERNEL_LIMIT else "#c62828"


def book_svg(book: ResultsBook) -> str:
    """A bar per timed kernel: its geomean port/reference, with lines at 1.00 (solid)
    and 0.95, 1.05 (dashed). The axis starts near the ratios, not at zero."""
    low, high = _axis_range([k.geomean_ratio for k in book.kernels if k.geomean_ratio])
    width = _LEFT + _RIGHT + _SLOT * max(len(book.kernels), 3)
    plot_height = _CHART_HEIGHT - _TOP - _BOTTOM

    def y(value: float) -> float:
        return _TOP + (high - value) / (high - low) * plot_height

    title = f"Geomean port / cuTile Python per kernel - {_gpus(book)}"
    bars: list[str] = []
    labels: list[str] = []
    for index, kernel in enumerate(book.kernels):
        centre = _LEFT + _SLOT * index + _SLOT / 2
        bar, label = _bar(kernel.name, kernel.geomean_ratio, centre, y)
        bars += bar
        labels += label
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_CHART_HEIGHT}" '
        f'viewBox="0 0 {width} {_CHART_HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{_CHART_HEIGHT}" fill="#ffffff"/>',
        f'<text x="{width / 2:.1f}" y="24" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{escape(title)}</text>',
        *bars,  # under the reference lines, so the lines stay visible
        *_axis(y, width, low, high),
        *labels,
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def _axis(y: Callable[[float], float], width: int, low: float, high: float) -> list[str]:
    right = width - _RIGHT
    lines = [
        f'<line x1="{_LEFT}" y1="{y(high):.1f}" x2="{_LEFT}" y2="{y(low):.1f}" stroke="#444"/>',
        f'<line x1="{_LEFT}" y1="{y(low):.1f}" x2="{right}" y2="{y(low):.1f}" stroke="#444"/>',
        f'<text x="{_LEFT - 6}" y="{y(high) + 4:.1f}" text-anchor="end">{high:.2f}</text>',
        f'<text x="{_LEFT - 6}" y="{y(low) + 4:.1f}" text-anchor="end">{low:.2f}</text>',
        f'<text x="{_LEFT}" y="{_CHART_HEIGHT - 8}" fill="#555">port / reference '
        f"(axis from {low:.2f})</text>",
    ]
    for value, dash in ((1.00, ""), (0.95, _DASHED), (1.05, _DASHED)):
        lines += [
            f'<line class="reference" x1="{_LEFT}" y1="{y(value):.1f}" x2="{right}" '
            f'y2="{y(value):.1f}" stroke="#333"{dash}/>',
            f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.2f}</text>',
        ]
    return lines


def _bar(
    name: str, ratio: float | None, centre: float, y: Callable[[float], float]
) -> tuple[list[str], list[str]]:
    """The bar (none when not timed) and its labels: the kernel's name and its value."""
    bottom = _CHART_HEIGHT - _BOTTOM
    labels = [
        f'<text x="{centre:.1f}" y="{bottom + 18}" text-anchor="middle">{escape(name)}</text>'
    ]
    if ratio is None:
        labels.append(
            f'<text x="{centre:.1f}" y="{bottom - 8}" text-anchor="middle" '
            'fill="#777">not timed</text>'
        )
        return [], labels
    top = y(ratio)
    bar = (
        f'<rect class="bar" x="{centre - _BAR_WIDTH / 2:.1f}" y="{top:.1f}" '
        f'width="{_BAR_WIDTH}" height="{bottom - top:.1f}" fill="{_bar_colour(ratio)}">'
        f"<title>{escape(name)}: {ratio:.4f}</title></rect>"
    )
    labels.append(
        f'<text x="{centre:.1f}" y="{top - 6:.1f}" text-anchor="middle" font-weight="bold" '
        f'stroke="#ffffff" stroke-width="3" paint-order="stroke">{ratio:.4f}</text>'
    )
    return [bar], labels
