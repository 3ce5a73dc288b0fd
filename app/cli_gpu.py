"""`tileport gpu-run BUNDLE` and `tileport gpu-bundle SPEC`: the GPU job bundle.

`gpu-bundle` builds a bundle on the build machine; `gpu-run` runs one on a GPU
host (correctness, then perf) and writes its reports. On a GPU host without
this package, `python3 BUNDLE/run.py` does the same as `gpu-run`. `results-book`
gathers the folders gpu-run wrote, one kernel each, into one checked book;
`investigate` explains, per folder, why the wrapper costs more per call than
ct.launch (stage F on the host side).
`gpu-run --upload URL` then sends the results to the service whose run the
bundle belongs to (`POST /v1/conversions/ID/gpu-results`, token from --token or
TILEPORT_API_TOKEN), which finishes the run from them.
Exit codes of gpu-run: 0 correctness ALL_PASS, 1 FAIL, 2 BLOCKED (nothing ran on
a GPU), 3 the bundle is damaged or invalid, 4 the results were written but the
upload failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from schemas.exit_codes import ExitCode, exit_code_epilog

RESULTS_BOOK_DESCRIPTION = """\
Read the folders `tileport gpu-run` wrote (one kernel each: gpu_run.json, and
correctness.json when present) and write a results book to DIR: NAME.json (every
case and timing column, per-kernel and overall geomeans of port / cuTile Python,
the machine and toolchain), NAME.md (one row per kernel, the overall geomean,
the targets with pass/fail) and NAME.svg (a bar chart of each kernel's geomean).

Targets: (a) every configuration correct; (b) overall geomean <= 1.00; (c) no
kernel above 1.05; (d) SASS-identical kernels within 0.99-1.01; (e) the wrapper's
host cost per call no worse than ct.launch's, where measured.

Exit codes: 0 the book was written (whatever the targets say), 2 bad input (a
folder without a valid gpu_run.json, two runs of one kernel, a bad NAME, or DIR
not writable)."""

RESULTS_BOOK_EPILOG = """\
example:
  tileport results-book bench/results/h200-2026-11-29-softmax \\
      bench/results/h200-2026-11-29-vector_add --name h200-2026-11-29 --out bench/results"""


INVESTIGATE_DESCRIPTION = """\
Stage F on the host side: for each folder `tileport gpu-run` wrote, read
gpu_run.json's host cost per call (the checked wrapper, the bare cffi call with
prepared arguments, ct.launch, CUDA graph replay, and the CUPTI trace of one
warm call's driver calls) and name why the wrapper costs more per call than
ct.launch: the Python wrapper (wrapper - bare cffi), the launcher's extra driver
calls, the launcher's residual (bare cffi - ct.launch), a list's device table
written on every call. Each cause quotes its figures and says how to fix it.
With --runs, also the device side of each configuration outside its A/A band:
whether the cuTile Python kernel ran as the specialisation its port was proven
against (CUPTI's kernel name against the reference export's entry symbol).

Verdicts: FIXABLE (the wrapper is slower and causes with fixes were found),
ALIGNED (the wrapper is no slower than ct.launch), BLOCKED (nothing measured, or
nothing splits the gap). Prints one paragraph per folder; with --write, also
writes investigation.json into it, which results-book then shows under target (e).

Exit codes: 0 every folder was investigated (whatever the verdicts), 2 a folder
without a valid gpu_run.json (nothing is written then)."""

INVESTIGATE_EPILOG = """\
example:
  tileport investigate bench/results/h200-2026-11-29-*/ --write"""


def _gpu_run(args: argparse.Namespace) -> int:
    from nodes.correctness.runner import run_from_args

    return run_from_args(args)


GPU_BUNDLE_EXITS = {
    ExitCode.OK: "the bundle was written; with --runs, a bundle for at least one run (each "
    "run skipped is listed on stderr with where it stopped)",
    ExitCode.FAILED: "with --runs: no run could be bundled (none stopped at the GPU boundary, "
    "or none of their ports binds)",
    ExitCode.BAD_INPUT: "bad input: SPEC and --runs both or neither, an invalid spec, two "
    "runs of one operator, a path that cannot be read or written",
    ExitCode.STAGE_FAILED: "the host builder's work failed: the port does not bind, the "
    "library does not build, or the bundle cannot be made",
}


def _gpu_bundle(args: argparse.Namespace) -> int:
    from nodes.host_builder.bundle import build_from_args

    if (args.spec is None) == (args.runs is None):
        print("gpu bundle: give a SPEC or --runs RUN_DIR..., not both", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.archive is not None and args.runs is None:
        print("gpu bundle: --archive goes with --runs", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.runs is not None:
        return _batch_bundles(args)
    return build_from_args(args)


def _batch_bundles(args: argparse.Namespace) -> int:
    import json
    import tempfile

    from nodes.host_builder.batch import (
        BatchError,
        BundleBuildError,
        LibraryBuildError,
        NoRunBundled,
        build_batch,
        write_archive,
    )

    try:
        with tempfile.TemporaryDirectory(prefix="tileport-batch-") as scratch:
            batch = build_batch(
                args.runs, args.out, Path(scratch) / "kernels_rs", time_all_configs=args.time_all
            )
        members = write_archive(args.out, args.archive) if args.archive is not None else []
    except NoRunBundled as error:
        print(f"gpu bundle: {error}", file=sys.stderr)
        return ExitCode.FAILED
    except (BatchError, OSError) as error:
        print(f"gpu bundle: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except (BundleBuildError, LibraryBuildError) as error:
        print(f"gpu bundle: {error}", file=sys.stderr)
        return ExitCode.STAGE_FAILED
    for bundle in batch.bundles:
        print(json.dumps({"bundle": str(bundle.root), "operator": bundle.manifest.operator}))
    for run in batch.skipped:
        print(f"gpu bundle: skipped {run.run_dir}: {run.reason}", file=sys.stderr)
    if args.archive is not None:
        print(json.dumps({"archive": str(args.archive), "members": len(members)}))
    return ExitCode.OK


def _results_book(args: argparse.Namespace) -> int:
    from nodes.perf_validator.results_book import BookInputError, build_book, write_book

    try:
        book = build_book(args.run_dirs, args.name)
        paths = write_book(book, args.out)
    except BookInputError as exc:
        print(f"results-book: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except OSError as exc:
        print(f"results-book: cannot write to {args.out}: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    for path in paths:
        print(f"wrote {path}")
    print(f"overall: {book.overall.geomean_line}")
    for target in book.targets:
        missing = f"; kernels missing it: {', '.join(target.missing)}" if target.missing else ""
        result = "PASS" if target.passed else "FAIL"
        print(f"target ({target.id}) {target.description}: {result}{missing} ({target.detail})")
    return ExitCode.OK


def _investigate(args: argparse.Namespace) -> int:
    from nodes.perf_investigator import (
        HostInputError,
        describe_investigation,
        investigate_folder,
        write_investigation,
    )

    reports = []
    failed = False
    for folder in args.run_dirs:
        try:
            reports.append((folder, investigate_folder(folder, args.runs)))
        except HostInputError as exc:
            print(f"investigate: {exc}", file=sys.stderr)
            failed = True
    if failed:
        return ExitCode.BAD_INPUT
    for index, (folder, report) in enumerate(reports):
        if index:
            print()
        print(describe_investigation(str(folder), report))
        if args.write:
            try:
                print(f"wrote {write_investigation(report, folder)}")
            except OSError as exc:
                print(f"investigate: cannot write into {folder}: {exc}", file=sys.stderr)
                return ExitCode.BAD_INPUT
    return ExitCode.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from nodes.correctness.runner import add_arguments
    from nodes.host_builder.bundle import add_build_arguments

    run = subparsers.add_parser(
        "gpu-run",
        help="run a GPU job bundle: correctness, then perf",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(run)
    run.set_defaults(handler=_gpu_run)
    bundle = subparsers.add_parser(
        "gpu-bundle",
        help="build the GPU job bundle of an operator in the library",
        description="Build the GPU job bundle of SPEC's operator, or with --runs one bundle "
        "per run stopped at the GPU boundary, all sharing one library (runs stopped "
        "elsewhere are skipped and listed with where they stopped).",
        epilog=exit_code_epilog(GPU_BUNDLE_EXITS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_build_arguments(bundle)
    bundle.add_argument(
        "--archive",
        type=Path,
        metavar="FILE.tar.xz",
        help="with --runs: also pack OUT and bench/run_bundles.py into FILE for a GPU host "
        "without a checkout (there: tar -xJf FILE && python3 bench/run_bundles.py "
        "OUT_NAME/* --out RESULTS)",
    )
    bundle.set_defaults(handler=_gpu_bundle)
    book = subparsers.add_parser(
        "results-book",
        help="gather gpu-run result folders into one book (JSON, markdown, SVG chart)",
        description=RESULTS_BOOK_DESCRIPTION,
        epilog=RESULTS_BOOK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    book.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="a gpu-run output folder"
    )
    book.add_argument("--name", required=True, help="the book's file name, without extension")
    book.add_argument("--out", required=True, type=Path, metavar="DIR", help="where to write it")
    book.set_defaults(handler=_results_book)
    investigate = subparsers.add_parser(
        "investigate",
        help="stage F on gpu-run result folders: why the wrapper costs more per call "
        "than ct.launch",
        description=INVESTIGATE_DESCRIPTION,
        epilog=INVESTIGATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    investigate.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="a gpu-run output folder"
    )
    investigate.add_argument(
        "--write", action="store_true", help="write investigation.json into each folder"
    )
    investigate.add_argument(
        "--runs",
        type=Path,
        metavar="DIR",
        default=None,
        help="the conversions' run directories (DIR/<operator>, as tileport convert --out "
        "wrote them): each configuration outside its A/A band is checked against the "
        "reference export its port was proven against",
    )
    investigate.set_defaults(handler=_investigate)
