"""`tileport ir ...`: the Tile IR engine from the command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from schemas.export import RustExportRequest
from tileir.sass import compare_bytecodes
from tileir.sass import render_human as render_sass
from toolchain.rust_export import export_once


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ir = commands.add_parser("ir", help="export, diff and compare Tile IR")
    sub = ir.add_subparsers(dest="ir_command", required=True, metavar="IR_COMMAND")

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
    return 0 if all(r.identical for r in results) else 1


def export_rs_command(args: argparse.Namespace) -> int:
    request = RustExportRequest.model_validate_json(args.request.read_text())
    response = export_once(request)
    if response.ok:
        print(response.ir_text or "", end="")
        return 0
    print(f"error ({response.error_kind}): {response.error}")
    return 1
