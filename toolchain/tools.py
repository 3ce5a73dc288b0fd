"""Thin wrappers over the CUDA Tile command-line tools shipped in the wheels."""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
from pathlib import Path

from toolchain.env import find_toolchain, toolchain_env

TILEIRAS_OPT_LEVEL = "-O3"


class ToolError(RuntimeError):
    """A tool ran and failed; the message carries its stderr."""


def _run(args: list[str], timeout_s: float, prefix: list[str] | None = None) -> str:
    """Run `args` (under `prefix`, a launcher such as setarch, when given)."""
    try:
        done = subprocess.run(
            [*(prefix or []), *args],
            capture_output=True,
            text=True,
            env=toolchain_env(),
            timeout=timeout_s,
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


def tileiras(
    bytecode: Path,
    cubin: Path,
    target: str,
    timeout_s: float = 300.0,
    *,
    fixed_layout: bool = True,
) -> Path:
    """Assemble bytecode into a cubin for `target`.

    tileiras's output for one bytecode depends on its heap addresses (sm_100:
    one TileGym kernel gave 3 different listings in 8 runs, register choice and
    order): with `fixed_layout` it runs without address randomisation, which
    makes a run reproducible; without, it samples that variation."""
    tool = str(find_toolchain().tool("tileiras"))
    command = [tool, f"--gpu-name={target}", TILEIRAS_OPT_LEVEL, "-o", str(cubin), str(bytecode)]
    _run(command, timeout_s, _fixed_layout_prefix() if fixed_layout else None)
    return cubin


@functools.cache
def _fixed_layout_prefix() -> list[str] | None:
    """`setarch <machine> --addr-no-randomize` where it can run here (a container
    may refuse the personality change), else None."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return None
    prefix = [setarch, platform.machine(), "--addr-no-randomize"]
    done = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    return prefix if done.returncode == 0 else None


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
