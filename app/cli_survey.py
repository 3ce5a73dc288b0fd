"""`tileport survey`: the whole path on every kernel of recorded launches, one row each.

    tileport survey LAUNCHES.jsonl --source-root ROOT --out DIR [--kernel NAME]...
                    [--signatures FILE] [--through port|convert|bundle] [--time-all]

For each kernel the records name: its spec (the spec writer, as `tileport specs`,
into DIR/specs), its port (stage B, as `tileport port-kernel`, into
DIR/ports/<spec>), for a COMPILED port the pipeline without a GPU (as `tileport
convert --no-gpu`, into DIR/runs/<spec>), then one GPU job of every run at the GPU
boundary (as `tileport gpu-bundle --runs --archive`: DIR/bundles and
DIR/bundles.tar.xz). `--through` stops each kernel after that stage. One line per
kernel as it finishes; at the end DIR/survey.json and DIR/survey.md: per kernel the
furthest stage reached, its verdict and its one line of why, and the totals.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from app.cli_specs import LaunchSelectionError, add_record_arguments, read_selected_records
from graph.runner import run_pipeline
from nodes.host_builder.batch import where_it_stopped
from nodes.spec_writer.writer import (
    KernelLaunches,
    WrittenSpec,
    group_by_kernel,
    read_signature_hints,
)
from nodes.survey import (
    StageOutcome,
    bundle_outcomes,
    port_outcome,
    raised,
    write_kernel_specs,
    write_survey,
)
from schemas.exit_codes import ExitCode, exit_code_epilog
from schemas.pipeline import RunOptions
from schemas.port_spec import operator_name
from schemas.survey import (
    BundleVerdict,
    KernelRow,
    SpecsVerdict,
    SurveyLayout,
    SurveyReport,
    SurveyStage,
)

EXIT_MEANINGS = {
    ExitCode.OK: "every kernel got through --through: its port COMPILED, its run at the GPU "
    "boundary, or its run bundled",
    ExitCode.FAILED: "some kernel did not (its row says where it stopped and why), or the "
    "records name no kernel",
    ExitCode.BAD_INPUT: "LAUNCHES or the signatures unreadable or malformed, --source-root "
    "not a folder, a --kernel no record names, or DIR not writable; nothing is surveyed",
}
THROUGH = (SurveyStage.PORT, SurveyStage.CONVERT, SurveyStage.BUNDLE)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    survey = commands.add_parser(
        "survey",
        help="specs, port, convert without a GPU and bundle every recorded kernel; one row "
        "per kernel: where it stopped and why",
        description=__doc__,
        epilog=exit_code_epilog(EXIT_MEANINGS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_record_arguments(survey, "survey")
    survey.add_argument("--out", required=True, type=Path, metavar="DIR")
    survey.add_argument(
        "--through",
        choices=[stage.value for stage in THROUGH],
        default=SurveyStage.BUNDLE.value,
        help="the last stage: port (no cargo build), convert (up to the GPU boundary) or "
        "bundle (default)",
    )
    survey.add_argument(
        "--time-all",
        action="store_true",
        help="the GPU job times every configuration, the test ones too",
    )
    survey.set_defaults(handler=survey_command)


def survey_command(args: argparse.Namespace) -> int:
    signatures = args.signatures or args.launches.parent / "signatures.jsonl"
    try:
        records, selected = read_selected_records(args.launches, args.kernel)
        hints = read_signature_hints(signatures)
    except LaunchSelectionError as error:
        return _bad_input(str(error))
    except (OSError, ValueError) as error:
        return _bad_input(f"cannot read the signatures {signatures}: {error}")
    if not args.source_root.is_dir():
        return _bad_input(f"the source root {args.source_root} is not a folder")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return _bad_input(f"cannot create {args.out}: {error.strerror}")
    layout = SurveyLayout(args.out)
    through = SurveyStage(args.through)
    kernels = group_by_kernel(selected)
    print(f"survey of {len(kernels)} kernel(s) through {through} into {layout.root}", flush=True)
    specs, missing = write_kernel_specs(
        records,
        [(launches.file, launches.kernel) for launches in kernels],
        args.source_root,
        layout.specs,
        hints,
    )
    print(f"specs: {len(specs)} written, {len(missing)} without one", flush=True)
    options = RunOptions(no_gpu=True, time_all_configs=args.time_all)
    rows: list[KernelRow] = []
    for index, launches in enumerate(kernels, start=1):
        key = (launches.file, launches.kernel)
        spec = specs.get(key)
        if spec is None:
            row = _no_spec(launches, missing[key])
        else:
            row = _survey_kernel(launches, spec, layout, through, options)
        rows.append(row)
        print(f"[{index}/{len(kernels)}] {row_line(row)}", flush=True)
    archive = None
    if through is SurveyStage.BUNDLE:
        rows, archive = _bundle(rows, layout, time_all_configs=args.time_all)
    report = SurveyReport.of(command_line(args), through, rows, archive)
    try:
        written = write_survey(report, layout)
    except OSError as error:
        print(f"tileport survey: cannot write the survey: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(report.totals.line())
    print(f"wrote {', '.join(str(path) for path in written)}")
    code = ExitCode.OK if report.every_kernel_through else ExitCode.FAILED
    print(f"exit {int(code)}: {EXIT_MEANINGS[code]}")
    return code


def _bad_input(message: str) -> int:
    print(f"tileport survey: {message}", file=sys.stderr)
    return ExitCode.BAD_INPUT


def _no_spec(launches: KernelLaunches, why: str) -> KernelRow:
    return KernelRow(
        kernel=launches.kernel,
        file=launches.file,
        stage=SurveyStage.SPECS,
        verdict=SpecsVerdict.NO_SPEC,
        detail=why,
    )


def _survey_kernel(
    launches: KernelLaunches,
    spec: WrittenSpec,
    layout: SurveyLayout,
    through: SurveyStage,
    options: RunOptions,
) -> KernelRow:
    """The kernel's port and, when it is COMPILED and the survey goes further, its
    conversion without a GPU."""
    started = time.monotonic()
    name = operator_name(spec.path)
    ported = port_outcome(spec.path, layout.port_dir(name))
    row = KernelRow(
        kernel=launches.kernel,
        file=launches.file,
        spec=name,
        stage=SurveyStage.PORT,
        verdict=ported.verdict,
        detail=ported.detail,
    )
    if row.passed(SurveyStage.PORT) and through is not SurveyStage.PORT:
        converted = convert_outcome(spec.path, layout.run_dir(name), options)
        row = _moved_on(row, SurveyStage.CONVERT, converted)
    return row.model_copy(update={"seconds": round(time.monotonic() - started, 1)})


def _moved_on(row: KernelRow, stage: SurveyStage, outcome: StageOutcome) -> KernelRow:
    """`row` once the kernel went through `stage` too."""
    return row.model_copy(
        update={"stage": stage, "verdict": outcome.verdict, "detail": outcome.detail}
    )


def convert_outcome(spec: Path, run_dir: Path, options: RunOptions) -> StageOutcome:
    """The pipeline on `spec` without a GPU, as `tileport convert --no-gpu` runs it:
    the gate's verdict (AWAITING_GPU at the GPU boundary) and, short of it, the stage
    the run stopped after with that stage's summary."""
    try:
        summary = run_pipeline(spec, run_dir, options=options)
        stopped = where_it_stopped(run_dir.resolve())
    except Exception as error:  # one kernel's failure never stops the survey
        return raised(error)
    if stopped is not None:
        return StageOutcome(summary.gate_verdict, stopped)
    level = summary.headline.get("level")
    return StageOutcome(
        summary.gate_verdict, f"awaiting a GPU; {level}" if level else "awaiting a GPU"
    )


def _bundle(
    rows: Sequence[KernelRow], layout: SurveyLayout, *, time_all_configs: bool
) -> tuple[list[KernelRow], str | None]:
    """The rows with every run at the GPU boundary bundled (or why not), and the
    archive when some run was bundled."""
    runs = {
        row.spec: layout.run_dir(row.spec)
        for row in rows
        if row.spec is not None and row.passed(SurveyStage.CONVERT)
    }
    if not runs:
        return list(rows), None
    print(f"bundling {len(runs)} run(s) at the GPU boundary into {layout.bundles}", flush=True)
    started = time.monotonic()
    outcomes = bundle_outcomes(runs, layout, time_all_configs=time_all_configs)
    print(f"bundle: {time.monotonic() - started:.1f} s", flush=True)
    bundled: list[KernelRow] = []
    for row in rows:
        outcome = outcomes.get(row.spec) if row.spec is not None else None
        if outcome is not None:
            row = _moved_on(row, SurveyStage.BUNDLE, outcome)
            print(row_line(row), flush=True)
        bundled.append(row)
    some = any(row.verdict == BundleVerdict.BUNDLED for row in bundled)
    return bundled, str(layout.archive) if some else None


def row_line(row: KernelRow) -> str:
    return (
        f"{row.kernel} ({row.file}): {row.stage} {row.verdict} ({row.seconds:.1f} s): {row.detail}"
    )


def command_line(args: argparse.Namespace) -> str:
    """The command as given, options in one order."""
    words = ["tileport", "survey", str(args.launches), "--source-root", str(args.source_root)]
    words += ["--out", str(args.out)]
    for name in args.kernel or ():
        words += ["--kernel", name]
    if args.signatures is not None:
        words += ["--signatures", str(args.signatures)]
    words += ["--through", args.through]
    if args.time_all:
        words.append("--time-all")
    return shlex.join(words)
