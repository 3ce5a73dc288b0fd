"""Completing a run that stopped at the GPU boundary with what `tileport gpu-run`
wrote for its bundle on a GPU host.

`check_results` binds a result folder to the run's bundle: every report names the
bundle's run and attempt, `gpu_run.json` the bundle's operator and the sha256 of its
`manifest.json` (runners before that field existed are bound by run, attempt and
the toolchain below), the perf report's toolchain contains what the bundle was built
with, and every correctness case is a configuration of the bundle's spec under one
of its seeds. `completion_stage` is the host builder of that attempt, finished from
the folder: the host part it had already passed is kept, the correctness report is
the GPU's, and the folder is copied to `host/gpu/`, where the perf validator reads
it.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from nodes.correctness.runner import MANIFEST_FILE
from nodes.host_builder.stage import BUNDLE_DIR
from nodes.perf_validator.stage import gpu_results
from schemas.gpu import RESULT_FILES, BundleManifest, GpuRunReport
from schemas.pipeline import Stage
from schemas.port_spec import PortSpecError, load_port_spec
from schemas.reports import (
    CorrectnessReport,
    HostBuildReport,
    PerfReport,
    ReportError,
    StageReport,
    load_report,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState, StageResult
from schemas.verdicts import CorrectnessVerdict, FailureClass, HostBuildVerdict

StageFn = Callable[[PipelineState], StageResult]


class GpuResultsError(ValueError):
    """The folder is not a GPU run of this bundle; `problems` says why, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class GpuResults:
    """A result folder checked against the bundle it was made from."""

    folder: Path
    manifest: BundleManifest
    correctness: CorrectnessReport
    perf: PerfReport
    run: GpuRunReport

    @property
    def attempt(self) -> int:
        return self.manifest.attempt

    @property
    def ran_on_gpu(self) -> bool:
        return self.run.ran_on_gpu


def bundle_dir(layout: RunLayout) -> Path:
    """Where the host builder wrote the GPU job bundle of its latest attempt."""
    return layout.host_dir / BUNDLE_DIR


def _parse(folder: Path, problems: list[str]) -> dict[str, StageReport | GpuRunReport]:
    models: dict[str, type[StageReport] | type[GpuRunReport]] = {
        CorrectnessReport.FILE_NAME: CorrectnessReport,
        PerfReport.FILE_NAME: PerfReport,
        GpuRunReport.FILE_NAME: GpuRunReport,
    }
    parsed: dict[str, StageReport | GpuRunReport] = {}
    for name, model in models.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
            continue
        try:
            parsed[name] = model.model_validate_json(path.read_bytes())
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(file)"
            problems.append(f"{name}: {where}: {first['msg']}")
    return parsed


def _check_binding(
    manifest: BundleManifest,
    digest: str,
    correctness: CorrectnessReport,
    perf: PerfReport,
    run: GpuRunReport,
) -> list[str]:
    problems: list[str] = []
    for report in (correctness, perf):
        if (report.run_id, report.attempt) != (manifest.run_id, manifest.attempt):
            problems.append(
                f"{report.FILE_NAME} is for run {report.run_id} attempt {report.attempt}, the "
                f"bundle for run {manifest.run_id} attempt {manifest.attempt}"
            )
    if run.operator != manifest.operator:
        problems.append(f"gpu_run.json is for {run.operator}, the bundle for {manifest.operator}")
    if run.bundle_sha256 is not None and run.bundle_sha256 != digest:
        problems.append("gpu_run.json was made from another bundle (manifest sha256 differs)")
    if correctness.ran_on_gpu != run.ran_on_gpu:
        problems.append("correctness.json and gpu_run.json disagree on whether a GPU ran")
    if correctness.verdict.value != run.correctness_verdict:
        problems.append("correctness.json and gpu_run.json disagree on the correctness verdict")
    if perf.verdict.value != run.perf_verdict:
        problems.append("perf.json and gpu_run.json disagree on the perf verdict")
    if perf.environment is not None:
        toolchain = perf.environment.toolchain
        differing = sorted(k for k, v in manifest.built_on.items() if toolchain.get(k) != v)
        if differing:
            problems.append(
                "perf.json was measured with another build than the bundle's: "
                + ", ".join(
                    f"{k} {toolchain.get(k)!r} (bundle {manifest.built_on[k]!r})" for k in differing
                )
            )
    return problems


def _check_cases(
    bundle: Path, manifest: BundleManifest, correctness: CorrectnessReport
) -> list[str]:
    try:
        spec = load_port_spec(bundle / manifest.spec)
    except PortSpecError as error:
        return [f"the bundle's spec does not load: {error}"]
    configs = {config.name for config, _ in spec.all_configs()}
    unknown = sorted(
        {
            f"{c.config_id} seed {c.seed}"
            for c in correctness.cases
            if c.config_id not in configs or c.seed not in manifest.seeds
        }
    )
    if unknown:
        return [f"correctness.json has cases the bundle does not define: {', '.join(unknown)}"]
    return []


def check_results(bundle: Path, folder: Path) -> GpuResults:
    """The folder's reports, bound to `bundle`; GpuResultsError names every mismatch."""
    try:
        raw = (bundle / MANIFEST_FILE).read_bytes()
        manifest = BundleManifest.model_validate_json(raw)
    except (OSError, ValidationError) as error:
        raise GpuResultsError([f"the run has no valid bundle manifest: {error}"]) from None
    problems: list[str] = []
    unexpected = sorted(p.name for p in folder.iterdir() if p.name not in RESULT_FILES)
    if unexpected:
        problems.append(f"not files of a GPU run: {', '.join(unexpected)}")
    parsed = _parse(folder, problems)
    if problems:
        raise GpuResultsError(problems)
    correctness = parsed[CorrectnessReport.FILE_NAME]
    perf = parsed[PerfReport.FILE_NAME]
    run = parsed[GpuRunReport.FILE_NAME]
    assert isinstance(correctness, CorrectnessReport) and isinstance(perf, PerfReport)
    assert isinstance(run, GpuRunReport)
    digest = hashlib.sha256(raw).hexdigest()
    problems = _check_binding(manifest, digest, correctness, perf, run)
    problems += _check_cases(bundle, manifest, correctness)
    if problems:
        raise GpuResultsError(problems)
    return GpuResults(folder, manifest, correctness, perf, run)


def _verdict_of(correctness: CorrectnessReport) -> tuple[HostBuildVerdict, FailureClass | None]:
    if correctness.verdict is CorrectnessVerdict.ALL_PASS:
        return HostBuildVerdict.ALL_PASS, None
    if correctness.verdict is CorrectnessVerdict.BLOCKED:
        return HostBuildVerdict.BLOCKED, FailureClass.ENV
    return HostBuildVerdict.FAIL, FailureClass.KERNEL


def complete_host_build(state: PipelineState, results: GpuResults) -> StageResult:
    """The host build of the results' attempt, its correctness taken from the GPU run."""
    layout = state.layout()
    if results.manifest.run_id != state.run_id:
        raise GpuResultsError([f"the results are for run {results.manifest.run_id}"])
    try:
        previous = load_report(HostBuildReport, layout)
    except ReportError as error:
        raise GpuResultsError([f"no host build to complete: {error}"]) from None
    if (previous.run_id, previous.attempt) != (state.run_id, results.attempt) or not (
        previous.host_part_passed()
    ):
        raise GpuResultsError(
            [f"host_builder attempt {results.attempt} of this run did not pass its host part"]
        )
    target = gpu_results(layout)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in RESULT_FILES:
        if (results.folder / name).is_file():
            shutil.copyfile(results.folder / name, target / name)
    correctness = results.correctness
    verdict, klass = _verdict_of(correctness)
    summary = f"host part passed; correctness {correctness.verdict.value} from a GPU run: "
    summary += correctness.summary or correctness.gpu_statement()
    report = HostBuildReport.model_validate(
        {
            **previous.model_dump(mode="json"),
            "verdict": verdict,
            "verdict_class": klass,
            "summary": summary,
            "notes": [*previous.notes, f"GPU run of the bundle: {results.run.statement}"],
        }
    )
    return StageResult(report=report, extra_reports=(correctness,))


def completion_stage(results: GpuResults, real: StageFn) -> StageFn:
    """The host builder of a run completed from `results`: the attempt they belong to is
    finished from them; any later attempt (after a new kernel) is the real stage's."""

    def stage(state: PipelineState) -> StageResult:
        if state.next_attempt(Stage.HOST_BUILDER) != results.attempt:
            return real(state)
        return complete_host_build(state, results)

    return stage
