"""`tileport tilegym`: deliver ports as TileGym's own cutile-rs backend.

`add OP` writes the op's cutile-rs files into a TileGym checkout and prints the
change as a git patch; `test` runs TileGym's test file of each added op with
the cutile-rs backend on a GPU host; `sweep` calls each added op through
`tilegym.ops` on drawn shapes and dtypes, the cutile backend as the oracle; `book`
reads sweep reports into the results book of the delivered backend.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from nodes.tilegym_backend.book import add_book_arguments, book_command
from nodes.tilegym_backend.call_cost import add_call_cost_arguments, call_cost_command
from nodes.tilegym_backend.stage import add_op
from nodes.tilegym_backend.sweep import add_sweep_arguments, sweep_command
from nodes.tilegym_backend.test_run import add_test_arguments, build_crate, test_command
from schemas.launch_capture import LaunchRecordError, distinct_launches, read_launch_records
from schemas.tilegym_backend import AddOutcome

USAGE_ERROR = 2
REFUSED = 1


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser(
        "tilegym",
        help="add a port to TileGym's cutile-rs backend; run TileGym's tests on it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = group.add_subparsers(dest="tilegym_command", required=True, metavar="COMMAND")

    add = sub.add_parser(
        "add",
        help="write an op's cutile-rs kernel, FFI, wrapper and test backend into a checkout",
        description="Port every recorded kernel of OP (as TileGym names it: relu) from the "
        "checkout's own cutile module and, when all are COMPILED, write "
        "src/tilegym/ops/cutile_rs/<op>_kernel/{kernel.rs,ffi.rs}, the crate's `mod <op>`, "
        'the wrapper <op>.py and its import, and "cutile-rs" in the op\'s test backends. '
        "Prints `git diff` against HEAD on stdout. Files with local changes are never "
        "overwritten; a second run changes nothing. Exit 1 when the op is refused (the "
        "reason and each kernel's verdict on stderr).",
    )
    add.add_argument("op", metavar="OP")
    add.add_argument("--tilegym", required=True, type=Path, metavar="CHECKOUT")
    add.add_argument(
        "--launches",
        required=True,
        type=Path,
        action="append",
        help="recorded launches (tileport capture); give it again to merge several files, "
        "each distinct launch once",
    )
    add.add_argument(
        "--signatures",
        type=Path,
        help="entry symbols and hints (default: signatures.jsonl beside each LAUNCHES; the "
        "records' own symbols and hints are read too)",
    )
    add.add_argument(
        "--work",
        type=Path,
        help="keep specs and ports here, a folder per op; a port made from the same spec "
        "text is reused (default: a temporary folder)",
    )
    add.add_argument("--json", action="store_true", help="print the result as JSON")
    add.set_defaults(handler=add_command)

    build = sub.add_parser(
        "build",
        help="build the checkout's cutile_kernels crate (build machine), for `test --no-build`",
        description="cargo build --release of src/tilegym/ops/cutile_rs/cutile_kernels, where "
        "TileGym's loader finds the library; the log goes to --log. Prints the library's path. "
        "Exit 1 when the build fails.",
    )
    build.add_argument("--tilegym", required=True, type=Path, metavar="CHECKOUT")
    build.add_argument("--log", type=Path, default=Path("cargo-build.log"))
    build.set_defaults(handler=build_command)

    test = sub.add_parser(
        "test",
        help="run TileGym's test file of each added op with backend cutile-rs (GPU host)",
        description="Build the checkout's cutile_kernels crate, run tests/ops/**/test_<op>.py "
        "-k cutile_rs with CUTILE_RS_AUTOBUILD=0 for each op (default: every op whose wrapper "
        "tileport wrote) and write tilegym-tests-<date>.json and .md into --out. "
        "Exit 4 without a GPU (nothing run), 1 when a test failed.",
    )
    add_test_arguments(test)
    test.set_defaults(handler=test_command)

    sweep = sub.add_parser(
        "sweep",
        help="call each added op through tilegym.ops on drawn calls, cutile as the oracle "
        "(GPU host)",
        description="Draw --calls calls per op from what its cutile implementation accepts "
        "(2-D inputs of extents 1 to 4096, ragged and unaligned; float32, float16, bfloat16; "
        "every mode its source compares), run each with the cutile backend and then with "
        "cutile-rs on the same inputs, and write tilegym-sweep-<date>.json and .md into --out: "
        "served (bitwise equal), mismatch, refused, each backend's per-call time (CUDA "
        "events around the tilegym.ops call, median of --reps) and, where cupti-python "
        "imports, its device time (CUPTI: the summed durations of the kernels one call "
        "launched, median of --reps). --plan prints the draws only. "
        "Exit 4 without a GPU, 1 when a call was refused or differed. The library is the one "
        "`tilegym build` made (python3 -m nodes.tilegym_backend.sweep where tileport is not "
        "installed).",
    )
    add_sweep_arguments(sweep)
    sweep.set_defaults(handler=sweep_command)

    cost = sub.add_parser(
        "call-cost",
        help="where a tilegym.ops call's host time goes, per backend (GPU host)",
        description="Call each added op (default: every op tileport added) --calls times "
        "back to back on a float32 input of --shape with each backend, then take the "
        "cutile-rs call apart (the written module's _launch alone, the C symbol alone, the "
        "tensor descriptors alone), and write tilegym-call-cost-<date>.json and .md into "
        "--out: host and stream time per call. Exit 4 without a GPU "
        "(python3 -m nodes.tilegym_backend.call_cost where tileport is not installed).",
    )
    add_call_cost_arguments(cost)
    cost.set_defaults(handler=call_cost_command)

    book = sub.add_parser(
        "book",
        help="the results book of the delivered backend, from sweep reports (no GPU needed)",
        description="Read one or more tilegym-sweep-*.json reports (an op and seed once; each "
        "with device times) and write NAME.json and NAME.md into DIR: per op and over all "
        "ops, calls served, mismatched and refused, and over the served calls the geomean "
        "of cutile-rs / cutile device time and of cutile-rs / cutile per-call time through "
        "tilegym.ops, each with its 95 % bootstrap interval and its worst call; the "
        "machine and the commands. Targets, PASS or FAIL: 0 mismatches; the device-time "
        "geomean's interval includes or is below 1.01; the per-call geomean at most 1.00. "
        "Exit 0 when the book is written, whatever the targets say; 2 on bad input.",
    )
    add_book_arguments(book)
    book.set_defaults(handler=book_command)


def add_command(args: argparse.Namespace) -> int:
    try:
        records = distinct_launches([read_launch_records(path) for path in args.launches])
    except (LaunchRecordError, OSError) as error:
        print(f"tileport tilegym add: {error}", file=sys.stderr)
        return USAGE_ERROR
    signatures = (
        [args.signatures]
        if args.signatures
        else [path.parent / "signatures.jsonl" for path in args.launches]
    )
    signatures += args.launches  # a record names its own entry symbol and hints
    checkout = args.tilegym.resolve()
    if args.work:
        result = add_op(checkout, args.op, records, signatures, args.work.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="tileport-tilegym-") as work:
            result = add_op(checkout, args.op, records, signatures, Path(work))
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        for kernel in result.kernels:
            print(f"{kernel.kernel}: {kernel.verdict} ({kernel.summary})", file=sys.stderr)
        if result.outcome is AddOutcome.REFUSED:
            print(f"refused: {result.reason}", file=sys.stderr)
        elif result.outcome is AddOutcome.UNCHANGED:
            print(f"{args.op}: already in {checkout}; nothing changed", file=sys.stderr)
        else:
            print(f"{args.op}: wrote {', '.join(result.changed)}", file=sys.stderr)
        sys.stdout.write(result.patch)
    return REFUSED if result.outcome is AddOutcome.REFUSED else 0


def build_command(args: argparse.Namespace) -> int:
    checkout = args.tilegym.resolve()
    try:
        library = build_crate(checkout, args.log)
    except (RuntimeError, OSError) as error:
        print(f"tileport tilegym build: {error}", file=sys.stderr)
        return REFUSED
    print(library)
    return 0
