"""The exit codes of tileport's commands: one table, the same meaning in every
command (docs/CONVERT.md, "Exit codes").

Each command says in its `--help` which codes it gives and what each means for it
(`exit_code_epilog`). The one exception is `tileport gpu-run`: a bundle carries
its own runner, which keeps the codes bundles were built and their results
recorded with (docs/C_ABI.md).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from enum import IntEnum
from typing import Final

HELP_WIDTH: Final = 88


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    STAGE_FAILED = 3
    AWAITING_GPU = 4
    INTERNAL_ERROR = 5


EXIT_MEANINGS: Final[Mapping[ExitCode, str]] = {
    ExitCode.OK: "done: what was asked for was made or passed",
    ExitCode.FAILED: "done, and the answer is no: the final gate failed on what ran on a GPU, "
    "a check found a difference or a missing requirement, or something asked for was not made",
    ExitCode.BAD_INPUT: "bad input: a file missing, unreadable or invalid, or arguments that do "
    "not fit",
    ExitCode.STAGE_FAILED: "a stage failed before the GPU boundary: a tool is missing, the "
    "kernel writer did not reach COMPILED, or binding, building or checking the library failed",
    ExitCode.AWAITING_GPU: "awaiting a GPU: everything that needs no GPU passed and the run "
    "stopped at the GPU boundary; nothing ran on a GPU",
    ExitCode.INTERNAL_ERROR: "tileport itself failed: a stage is missing or raised",
}


def exit_code_epilog(uses: Mapping[ExitCode, str]) -> str:
    """A command's `--help` epilog: each code it gives, with what it means there."""
    lines = [
        textwrap.fill(
            f"{int(code)}  {text}",
            HELP_WIDTH,
            initial_indent="  ",
            subsequent_indent="     ",
            break_on_hyphens=False,
        )
        for code, text in sorted(uses.items())
    ]
    note = "  (each code means the same in every tileport command but gpu-run: docs/CONVERT.md)"
    return "\n".join(["exit codes:", *lines, note])
