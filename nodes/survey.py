"""The survey's stages that need no pipeline graph (`tileport survey` runs the
conversion itself: app/cli_survey.py): a spec for every selected kernel, stage B on
each spec, one GPU job of every run at the GPU boundary; and the survey written out.

A kernel's failure is its own: whatever a stage raises for one kernel becomes that
kernel's outcome, and the survey goes on with the others."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nodes.host_builder.batch import Batch, NoRunBundled, build_batch, write_archive
from nodes.kernel_writer.stage import port_kernel
from nodes.spec_writer.writer import WrittenSpec, outside_source_root, write_specs
from schemas.launch_capture import LaunchRecord
from schemas.survey import RAISED, BundleVerdict, SurveyLayout, SurveyReport
from schemas.verdicts import KernelWriterVerdict

KernelKey = tuple[str, str]
"""A kernel as the records name it: (its file, its name)."""


@dataclass(frozen=True)
class StageOutcome:
    """What one stage said of one kernel: its verdict and its one line."""

    verdict: str
    detail: str


def raised(error: Exception) -> StageOutcome:
    return StageOutcome(RAISED, f"{type(error).__name__}: {error}")


def write_kernel_specs(
    records: Sequence[LaunchRecord],
    kernels: Collection[KernelKey],
    source_root: Path,
    out: Path,
    signature_hints: dict[str, str],
) -> tuple[dict[KernelKey, WrittenSpec], dict[KernelKey, str]]:
    """The spec of each of `kernels` written into `out`, and why each other one has none
    (its file outside `source_root` included). One call of the spec writer for all, so
    that kernels of one name in two modules get the distinct spec names `tileport specs`
    gives them; every record still gives a stage its producer launches."""
    selected = [record for record in records if (record.file, record.kernel) in kernels]
    inside, outside = outside_source_root(selected, source_root)
    inside_kernels = {(record.file, record.kernel) for record in inside}
    try:
        written, problems = write_specs(
            records, source_root, out, signature_hints, kernels=inside_kernels
        )
    except Exception as error:  # the spec writer stopped for every kernel: each says why
        reason = f"the spec writer raised {raised(error).detail}"
        written, problems = [], [f"{file}::{kernel}: {reason}" for file, kernel in inside_kernels]
    specs = {(spec.file, spec.kernel): spec for spec in written}
    # The spec writer names a kernel without a spec as `FILE::KERNEL: why`.
    lines = [*problems, *outside]
    missing = {}
    for file, kernel in kernels:
        if (file, kernel) in specs:
            continue
        prefix = f"{file}::{kernel}: "
        missing[(file, kernel)] = next(
            (line.removeprefix(prefix) for line in lines if line.startswith(prefix)),
            "the spec writer wrote no spec and gave no reason",
        )
    return specs, missing


def port_outcome(spec: Path, out: Path) -> StageOutcome:
    """Stage B on `spec` into `out`: COMPILED with the sameness it proved, or the
    verdict with the report's summary (a BLOCKED one names the op and where it is)."""
    try:
        report = port_kernel(spec, out)
    except Exception as error:  # one kernel's failure never stops the survey
        return raised(error)
    if report.verdict is KernelWriterVerdict.COMPILED:
        return StageOutcome(report.verdict, report.level_line() or report.summary)
    return StageOutcome(report.verdict, report.summary)


def bundle_outcomes(
    runs: Mapping[str, Path], layout: SurveyLayout, *, time_all_configs: bool
) -> dict[str, StageOutcome]:
    """One GPU job of the runs at the GPU boundary, by operator, as `tileport gpu-bundle
    --runs --archive` makes it: one library for all (built in a scratch workspace), a
    bundle per run under `layout.bundles`, packed into `layout.archive`. Each run is
    BUNDLED, SKIPPED with why its port could not join, or FAILED with why the batch
    failed."""
    # The archive packs the whole folder: a bundle left by an earlier survey stays out.
    shutil.rmtree(layout.bundles, ignore_errors=True)
    try:
        with tempfile.TemporaryDirectory(prefix="tileport-survey-") as scratch:
            batch = build_batch(
                list(runs.values()),
                layout.bundles,
                Path(scratch) / "kernels_rs",
                time_all_configs=time_all_configs,
            )
        write_archive(layout.bundles, layout.archive)
    except NoRunBundled as error:
        batch = Batch([], error.skipped)
    except Exception as error:  # the batch failed for every run in it
        failed = StageOutcome(BundleVerdict.FAILED, raised(error).detail)
        return {operator: failed for operator in runs}
    skipped = {run.run_dir: run.reason for run in batch.skipped}
    outcomes = {}
    for operator, run_dir in runs.items():
        reason = skipped.get(run_dir.resolve())
        outcomes[operator] = (
            StageOutcome(BundleVerdict.SKIPPED, reason)
            if reason is not None
            else StageOutcome(BundleVerdict.BUNDLED, f"bundle {layout.bundles / operator}")
        )
    return outcomes


def survey_markdown(report: SurveyReport) -> str:
    lines = [
        f"# Survey through {report.through}",
        "",
        f"    {report.command}",
        "",
        "| kernel | file | stage | verdict | detail | s |",
        "|---|---|---|---|---|---:|",
    ]
    lines += [
        f"| {_cell(row.kernel)} | {_cell(row.file)} | {row.stage} | {row.verdict} | "
        f"{_cell(row.detail)} | {row.seconds:.1f} |"
        for row in report.rows
    ]
    lines += ["", f"Totals: {report.totals.line()}."]
    if report.archive is not None:
        lines.append(f"GPU job archive: {report.archive}.")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """`text` as one markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def write_survey(report: SurveyReport, layout: SurveyLayout) -> list[Path]:
    layout.report.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    layout.markdown.write_text(survey_markdown(report), encoding="utf-8")
    return [layout.report, layout.markdown]
