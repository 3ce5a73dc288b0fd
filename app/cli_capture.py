"""`tileport capture`: run a command with its cuTile launches recorded.

Also runnable without the rest of the CLI (a GPU host may lack the service's
dependencies): `python3 -m app.cli_capture --out FILE -- COMMAND...`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from schemas.exit_codes import ExitCode
from toolchain.launch_capture import CaptureError, run_capture


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    capture = commands.add_parser(
        "capture",
        help="run COMMAND recording every cuda.tile.launch as JSON lines",
        description="Run COMMAND (after --) with every cuda.tile.launch of its Python "
        "processes recorded; each distinct launch is written once to --out. The exit "
        "status is COMMAND's, or 2 (bad input, as in every tileport command) when the "
        "capture cannot start.",
    )
    _arguments(capture)
    capture.set_defaults(handler=capture_command)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="the launch file (JSON lines)")
    parser.add_argument(
        "--append", action="store_true", help="add to --out (skipping launches already in it)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the summary as one JSON object on stdout"
    )
    parser.add_argument(
        "--source-root",
        type=Path,
        help="record each kernel's file relative to this folder (absolute when outside "
        "it), as `tileport specs --source-root` reads it; default: relative to the "
        "sys.path entry holding it",
    )
    parser.add_argument(
        "--no-import-check",
        action="store_true",
        help="do not check first that the command's Python imports cuda.tile",
    )
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND...")


def capture_command(args: argparse.Namespace) -> int:
    try:
        summary = run_capture(
            args.argv,
            args.out,
            append=args.append,
            check_import=not args.no_import_check,
            source_root=args.source_root,
        )
    except CaptureError as error:
        print(f"tileport capture: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(summary.render(), file=sys.stderr)
    if args.json:
        print(json.dumps(asdict(summary), sort_keys=True))
    return summary.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tileport capture")
    _arguments(parser)
    return capture_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
