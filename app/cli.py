"""The `tileport` command line. Each command group lives in its own module
and registers itself here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import ModuleType

from app import (
    cli_capture,
    cli_convert,
    cli_doctor,
    cli_gpu,
    cli_ir,
    cli_port,
    cli_serve,
    cli_specs,
    cli_survey,
    cli_tilegym,
)

COMMAND_MODULES: list[ModuleType] = [
    cli_convert,
    cli_port,
    cli_doctor,
    cli_ir,
    cli_gpu,
    cli_capture,
    cli_specs,
    cli_survey,
    cli_tilegym,
    cli_serve,
]

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tileport",
        description="Port cuTile Python kernels to cuTile Rust, with proof.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
