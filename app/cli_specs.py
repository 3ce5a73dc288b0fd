"""`tileport specs`: port specs from recorded launches of a kernel library."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nodes.spec_writer.writer import read_signature_hints, write_specs
from schemas.launch_capture import LaunchRecordError, read_launch_records
from toolchain.source_tree import SourceTreeError

USAGE_ERROR = 2


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    specs = commands.add_parser(
        "specs",
        help="write one port spec per kernel from recorded launches",
        description="Write one port spec per @ct.kernel named in LAUNCHES (JSON lines from "
        "`tileport capture`) into --out; the kernels are read from the unmodified library "
        "under --source-root. Hints come from the records, or from a signatures.jsonl beside "
        "LAUNCHES. Exit 1 when some kernel got no spec (each is listed with the reason).",
    )
    specs.add_argument("launches", type=Path, metavar="LAUNCHES.jsonl")
    specs.add_argument("--source-root", required=True, type=Path, help="e.g. tilegym/src")
    specs.add_argument("--out", required=True, type=Path, help="folder for <name>.port.yaml")
    specs.add_argument(
        "--signatures",
        type=Path,
        help="entry symbols and hints (default: signatures.jsonl beside LAUNCHES)",
    )
    specs.add_argument(
        "--classes",
        action="store_true",
        help="add a test configuration per specialisation class the records lack (every "
        "float element type, ragged extents), each kept only if the reference compiles it "
        "(needs the sandbox): the port is then proven for them",
    )
    specs.set_defaults(handler=specs_command)


def specs_command(args: argparse.Namespace) -> int:
    try:
        records = read_launch_records(args.launches)
    except LaunchRecordError as error:
        print(f"tileport specs: {error}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as error:
        print(f"tileport specs: cannot read {args.launches}: {error.strerror}", file=sys.stderr)
        return USAGE_ERROR
    signatures = args.signatures or args.launches.parent / "signatures.jsonl"
    try:
        written, problems = write_specs(
            records,
            args.source_root,
            args.out,
            read_signature_hints(signatures),
            widen=args.classes,
        )
    except SourceTreeError as error:
        print(f"tileport specs: {error}", file=sys.stderr)
        return USAGE_ERROR
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
    for problem in problems:
        print(f"no spec: {problem}", file=sys.stderr)
    print(f"wrote {len(written)} spec(s) to {args.out}", file=sys.stderr)
    return 1 if problems else 0
