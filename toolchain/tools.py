"""Thin wrappers over the CUDA Tile command-line tools shipped in the wheels."""

from __future__ import annotations

import subprocess
from pathlib import Path

from toolchain.env import find_toolchain, toolchain_env

TILEIRAS_OPT_LEVEL = "-O3"


class ToolError(RuntimeError):
    """A tool ran and failed; the message carries its stderr."""


def _run(args: list[str], timeout_s: float) -> str:
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, env=toolchain_env(), timeout=timeout_s
        )
    except FileNotFoundError as err:
        raise ToolError(f"{args[0]} not found: run `make setup`") from err
    except subprocess.TimeoutExpired as err:
        raise ToolError(f"{Path(args[0]).name} timed out after {timeout_s:.0f} s") from err
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        raise ToolError(f"{Path(args[0]).name} exited {done.returncode}: {detail}")
    return done.stdout


def tileirdisasm(bytecode: Path, timeout_s: float = 60.0, *, with_locations: bool = False) -> str:
    """The MLIR text of a Tile IR bytecode file; with its source locations (`-g`) if asked."""
    tool = str(find_toolchain().tool("tileirdisasm"))
    return _run([tool, *(["-g"] if with_locations else []), str(bytecode)], timeout_s)


def tileiras(bytecode: Path, cubin: Path, target: str, timeout_s: float = 300.0) -> Path:
    """Assemble bytecode into a cubin for `target` (deterministic)."""
    tool = str(find_toolchain().tool("tileiras"))
    _run(
        [tool, f"--gpu-name={target}", TILEIRAS_OPT_LEVEL, "-o", str(cubin), str(bytecode)],
        timeout_s,
    )
    return cubin


def cuobjdump_sass(cubin: Path, timeout_s: float = 60.0) -> str:
    return _run([str(find_toolchain().tool("cuobjdump")), "-sass", str(cubin)], timeout_s)


def version_line(tool: str) -> str:
    """First line of `tool --version` mentioning a release, or '' when absent."""
    path = find_toolchain().tool(tool)
    try:
        out = _run([str(path), "--version"], 30.0)
    except ToolError:
        return ""
    lines = [
        line for line in out.splitlines() if "release" in line.lower() or "version" in line.lower()
    ]
    return (lines[-1] if lines else out.strip().splitlines()[0] if out.strip() else "").strip()
