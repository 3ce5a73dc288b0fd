"""`tileport ir ...`: the Tile IR engine from the command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from schemas.exit_codes import ExitCode
from schemas.export import RustExportRequest
from tileir.diff import DisassemblyError, diff_files
from tileir.diff import render_human as render_diff
from tileir.lexer import IRSyntaxError
from tileir.sass import compare_bytecodes
from tileir.sass import render_human as render_sass
from toolchain.reference_export import ReferenceExportError, export_from_spec
from toolchain.rust_export import export_once


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ir = commands.add_parser("ir", help="export, diff and compare Tile IR")
    sub = ir.add_subparsers(dest="ir_command", required=True, metavar="IR_COMMAND")

    export = sub.add_parser(
        "export", help="export a cuTile Python kernel's Tile IR (bytecode, MLIR, cubins)"
    )
    export.add_argument("kernel", metavar="SOURCE::KERNEL", help="e.g. softmax.py::softmax_kernel")
    export.add_argument("--spec", type=Path, required=True, help="the kernel's port spec")
    export.add_argument("--target", default="sm_90", help="target recorded in export.json")
    export.add_argument("--variant", action="append", help="export only these variants")
    export.add_argument("--out", type=Path, required=True, help="output directory")
    export.set_defaults(handler=export_command)

    diff = sub.add_parser("diff", help="canonical diff of two IRs, findings classified")
    diff.add_argument("reference", type=Path, help="reference .bytecode or .mlir")
    diff.add_argument("generated", type=Path, help="generated .bytecode or .mlir")
    diff.add_argument("--json", action="store_true", help="print the report as JSON")
    diff.set_defaults(handler=diff_command)

    sass = sub.add_parser("sass", help="assemble two bytecodes and compare their SASS")
    sass.add_argument("reference", type=Path, help="reference .bytecode")
    sass.add_argument("generated", type=Path, help="generated .bytecode")
    sass.add_argument("--target", action="append", help="sm_90, sm_100 (repeatable)")
    sass.add_argument("--work-dir", type=Path, default=Path("sass-work"))
    sass.add_argument("--json", action="store_true")
    sass.set_defaults(handler=sass_command)

    rs = sub.add_parser("export-rs", help="compile a cutile-rs kernel source to Tile IR")
    rs.add_argument("request", type=Path, help="JSON export request (schemas/export.py)")
    rs.set_defaults(handler=export_rs_command)


def export_command(args: argparse.Namespace) -> int:
    source, separator, kernel = str(args.kernel).rpartition("::")
    if not separator or not source or not kernel:
        print(f"error: expected SOURCE::KERNEL, got {args.kernel!r}")
        return ExitCode.BAD_INPUT
    try:
        record = export_from_spec(
            args.spec,
            args.out,
            source=Path(source),
            kernel=kernel,
            target=args.target,
            variants=args.variant,
        )
    except ReferenceExportError as err:
        print(f"error: {err.error.one_line()}")
        return ExitCode.FAILED
    for variant in record.variants:
        files = ", ".join([variant.bytecode, variant.mlir, *variant.cubins.values()])
        print(f"{variant.variant}: {variant.symbol}\n  {files}")
    print(f"wrote {args.out}/export.json")
    return ExitCode.OK


def diff_command(args: argparse.Namespace) -> int:
    """Exit 0 when exact, 1 when the IRs differ, 2 when an input cannot be read
    (`schemas/exit_codes.py`)."""
    try:
        report = diff_files(args.reference, args.generated)
    except (IRSyntaxError, DisassemblyError, FileNotFoundError) as err:
        print(f"error: {err}")
        return ExitCode.BAD_INPUT
    print(report.model_dump_json(indent=2) if args.json else render_diff(report))
    return ExitCode.OK if report.exact else ExitCode.FAILED


def sass_command(args: argparse.Namespace) -> int:
    targets = args.target or ["sm_90"]
    results = [
        compare_bytecodes(args.reference, args.generated, target, args.work_dir / target)
        for target in targets
    ]
    if args.json:
        print(json.dumps([r.model_dump() for r in results], indent=2))
    else:
        print("\n".join(render_sass(r) for r in results))
    return ExitCode.OK if all(r.identical for r in results) else ExitCode.FAILED


def export_rs_command(args: argparse.Namespace) -> int:
    request = RustExportRequest.model_validate_json(args.request.read_text())
    response = export_once(request)
    if response.ok:
        print(response.ir_text or "", end="")
        return ExitCode.OK
    print(f"error ({response.error_kind}): {response.error}")
    return ExitCode.FAILED
