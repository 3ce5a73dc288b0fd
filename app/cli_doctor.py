"""`tileport doctor` and `tileport env`."""

from __future__ import annotations

import argparse

from schemas.exit_codes import ExitCode
from toolchain.doctor import render_human, run_doctor
from toolchain.env import shell_exports


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser(
        "doctor", help="check every requirement; non-zero exit when one is missing"
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.set_defaults(handler=doctor_command)
    env = commands.add_parser("env", help="print the toolchain environment")
    env.add_argument("--shell", action="store_true", help="as `export` lines for eval")
    env.set_defaults(handler=env_command)


def doctor_command(args: argparse.Namespace) -> int:
    report = run_doctor()
    print(report.model_dump_json(indent=2) if args.json else render_human(report))
    return ExitCode.OK if report.ok else ExitCode.FAILED


def env_command(args: argparse.Namespace) -> int:
    print(shell_exports())
    return ExitCode.OK
