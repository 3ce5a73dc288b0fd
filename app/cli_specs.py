"""`tileport specs`: port specs from recorded launches of a kernel library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nodes.spec_writer.writer import (
    WrittenSpec,
    outside_source_root,
    read_signature_hints,
    write_specs,
)
from schemas.exit_codes import ExitCode, exit_code_epilog
from schemas.launch_capture import LaunchRecord, LaunchRecordError, read_launch_records
from toolchain.source_tree import SourceTreeError

EXIT_MEANINGS = {
    ExitCode.OK: "a spec for every selected kernel whose file lies under --source-root "
    "(kernels outside it are listed as skipped)",
    ExitCode.FAILED: "some kernel got no spec (each is listed with the reason): a kernel "
    "under --source-root whose spec could not be written, a kernel named by --kernel "
    "whatever the reason, or no kernel at all",
    ExitCode.BAD_INPUT: "LAUNCHES unreadable or malformed, --source-root not a folder, or a "
    "--kernel no record names; nothing is written",
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    specs = commands.add_parser(
        "specs",
        help="write one port spec per kernel from recorded launches",
        description="Write one port spec per @ct.kernel named in LAUNCHES (JSON lines from "
        "`tileport capture`) into --out; the kernels are read from the unmodified library "
        "under --source-root. A kernel whose recorded file lies outside --source-root is "
        "skipped and listed with the reason. Each spec names the source root by its "
        "absolute path, so a copy of it elsewhere still finds the library. Hints come from "
        "the records, or from a signatures.jsonl beside LAUNCHES.",
        epilog=exit_code_epilog(EXIT_MEANINGS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_record_arguments(specs, "write specs for")
    specs.add_argument("--out", required=True, type=Path, help="folder for <name>.port.yaml")
    specs.add_argument(
        "--classes",
        action="store_true",
        help="add a test configuration per specialisation class the records lack (every "
        "float element type, ragged extents), each kept only if the reference compiles it "
        "(needs the sandbox): the port is then proven for them",
    )
    specs.add_argument(
        "--unit-extents",
        action="store_true",
        help="with --classes, also a variant per extent of 1 (a one-row or one-column "
        "launch compiles a kernel of its own: the extent is a shape constant), proven on "
        "each kept configuration with that extent made 1; not yet the default, since a "
        "unit variant the kernel writer cannot prove fails the whole port",
    )
    specs.add_argument(
        "--relative-source-root",
        action="store_true",
        help="name the source root relative to --out instead, for specs that travel with "
        "the library (a service's SOURCE_ROOT takes no absolute path)",
    )
    specs.set_defaults(handler=specs_command)


def add_record_arguments(parser: argparse.ArgumentParser, selecting: str) -> None:
    """What a command reading recorded launches takes: the records, the library they
    name, a kernel selection (`selecting` says what is done to the selected kernels)
    and the entry symbols and hints (`read_selected_records`)."""
    parser.add_argument("launches", type=Path, metavar="LAUNCHES.jsonl")
    parser.add_argument("--source-root", required=True, type=Path, help="e.g. tilegym/src")
    parser.add_argument(
        "--kernel",
        action="append",
        metavar="NAME",
        help=f"{selecting} the kernels of this name only (repeatable; default: every "
        "kernel in LAUNCHES)",
    )
    parser.add_argument(
        "--signatures",
        type=Path,
        metavar="FILE",
        help="entry symbols and hints (default: signatures.jsonl beside LAUNCHES)",
    )


class LaunchSelectionError(ValueError):
    """The records cannot be read, or a kernel asked for is not in them."""


def read_selected_records(
    launches: Path, kernels: Sequence[str] | None
) -> tuple[list[LaunchRecord], list[LaunchRecord]]:
    """Every record of `launches`, and those of the `kernels` named (all when None)."""
    try:
        records = read_launch_records(launches)
    except LaunchRecordError as error:
        raise LaunchSelectionError(str(error)) from None
    except OSError as error:
        raise LaunchSelectionError(f"cannot read {launches}: {error.strerror}") from None
    unknown = sorted(set(kernels or ()) - {record.kernel for record in records})
    if unknown:
        recorded = ", ".join(sorted({record.kernel for record in records})) or "none"
        raise LaunchSelectionError(
            f"no record of kernel {', '.join(unknown)} in {launches} (its kernels: {recorded})"
        )
    return records, [r for r in records if kernels is None or r.kernel in kernels]


def specs_command(args: argparse.Namespace) -> int:
    try:
        records, selected = read_selected_records(args.launches, args.kernel)
    except LaunchSelectionError as error:
        print(f"tileport specs: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.unit_extents and not args.classes:
        print("tileport specs: --unit-extents adds to --classes; give both", file=sys.stderr)
        return ExitCode.BAD_INPUT
    inside, skipped = outside_source_root(selected, args.source_root)
    signatures = args.signatures or args.launches.parent / "signatures.jsonl"
    try:
        written, problems = write_specs(
            records,
            args.source_root,
            args.out,
            read_signature_hints(signatures),
            widen=args.classes,
            unit_extents=args.unit_extents,
            relative_source_root=args.relative_source_root,
            kernels={(record.file, record.kernel) for record in inside},
        )
    except SourceTreeError as error:
        print(f"tileport specs: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    _print_written(written)
    for problem in problems:
        print(f"no spec: {problem}", file=sys.stderr)
    for reason in skipped:
        print(f"skipped: {reason}", file=sys.stderr)
    print(
        f"wrote {len(written)} spec(s) to {args.out}; {len(problems)} kernel(s) without one, "
        f"{len(skipped)} skipped",
        file=sys.stderr,
    )
    return exit_code(written, problems, skipped, named=args.kernel is not None)


def exit_code(
    written: list[WrittenSpec], problems: list[str], skipped: list[str], *, named: bool
) -> ExitCode:
    """FAILED when a kernel the user asked for got no spec: any kernel under the
    source root whose spec failed, a kernel named by --kernel even when its file is
    outside the root, or nothing written at all. Kernels outside the root that were
    only in the records, not named, are skipped without failing the command."""
    if problems or not written or (named and skipped):
        return ExitCode.FAILED
    return ExitCode.OK


def _print_written(written: list[WrittenSpec]) -> None:
    for spec in written:
        grid = " (grid picked per configuration)" if spec.grid_literal else ""
        print(
            f"{spec.path}: {spec.module}::{spec.kernel}, {spec.records} launch(es), "
            f"{spec.variants} variant(s), {spec.test_configs} test configuration(s){grid}"
        )
        if spec.classes:
            print(f"  classes added: {', '.join(spec.classes)}")
        for why in spec.dropped_classes:
            print(f"  class not added: {why}")
