"""Thin wrappers over the CUDA Tile command-line tools shipped in the wheels."""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from toolchain import tool_cache
from toolchain.env import find_toolchain, toolchain_env
from toolchain.sandbox import Limits, Sandbox, SandboxUnavailable
from toolchain.tool_cache import content_key

TILEIRAS_OPT_LEVEL = "-O3"


class ToolError(RuntimeError):
    """A tool ran and failed; the message carries its stderr."""


# Where a boxed tool's arguments name its input (a copy of the file given) and output.
INPUT, OUTPUT = "{input}", "{output}"
BOXED_LIMITS = Limits(address_space_bytes=None, processes=64)  # LLVM reserves much


def _run(
    args: list[str],
    timeout_s: float,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
    name: str | None = None,
) -> str:
    """Run `args` (under `prefix`, a launcher such as setarch, when given); errors
    name the tool as `name` (default: `args[0]`'s file name)."""
    name = name or Path(args[0]).name
    try:
        done = subprocess.run(
            [*(prefix or []), *args],
            capture_output=True,
            text=True,
            env=toolchain_env() if env is None else env,
            timeout=timeout_s,
        )
    except FileNotFoundError as err:
        raise ToolError(f"{args[0]} not found: run `make setup`") from err
    except subprocess.TimeoutExpired as err:
        raise ToolError(f"{name} timed out after {timeout_s:.0f} s") from err
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        raise ToolError(f"{name} exited {done.returncode}: {detail}")
    return done.stdout


def _run_boxed(
    args: list[str],
    source: Path,
    timeout_s: float,
    prefix: list[str] | None = None,
    output: Path | None = None,
) -> str:
    """Run `args` in the sandbox on a copy of `source` (`INPUT` in `args`), with the
    toolchain's variables only (none of the service's); what it writes at `OUTPUT`
    is copied to `output`, if a plain file. For bytes someone submitted: a bytecode
    dump goes to tileirdisasm and tileiras as an export's bytecode does (those run
    in the export's sandbox)."""
    with tempfile.TemporaryDirectory(prefix="tileport-tool-") as folder:
        scratch = Path(folder)
        local, produced = scratch / "input.tileirbc", scratch / "output"
        shutil.copyfile(source, local)
        named = {INPUT: str(local), OUTPUT: str(produced)}
        argv = [named.get(arg, arg) for arg in args]
        paths = toolchain_env({})
        env = {name: paths[name] for name in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH")}
        box = Sandbox(
            scratch=scratch, env={**env, "HOME": folder, "TMPDIR": folder}, limits=BOXED_LIMITS
        )
        try:
            launch = box.launch([*(prefix or []), *argv])
        except SandboxUnavailable as err:
            raise ToolError(str(err)) from err
        tool = Path(args[0]).name  # the sandbox's launcher runs it: name the tool
        stdout = _run(launch.argv, timeout_s, env=launch.env, name=tool)
        if output is not None:
            if produced.is_symlink() or not produced.is_file():
                raise ToolError(f"{tool} wrote no output")
            shutil.copyfile(produced, output)
        return stdout


def tileirdisasm(
    bytecode: Path,
    timeout_s: float = 60.0,
    *,
    with_locations: bool = False,
    submitted: bool = False,
) -> str:
    """The MLIR text of a Tile IR bytecode file; with its source locations (`-g`) if
    asked; in the sandbox when the file was `submitted` (`_run_boxed`)."""
    tool = str(find_toolchain().tool("tileirdisasm"))
    flags = ["-g"] if with_locations else []
    if submitted:
        return _run_boxed([tool, *flags, INPUT], bytecode, timeout_s)
    return _run([tool, *flags, str(bytecode)], timeout_s)


def tileiras(
    bytecode: Path,
    cubin: Path,
    target: str,
    timeout_s: float = 300.0,
    *,
    fixed_layout: bool = True,
    submitted: bool = False,
) -> Path:
    """Assemble bytecode into a cubin for `target`.

    tileiras's output for one bytecode depends on its heap addresses (sm_100:
    one TileGym kernel gave 3 different listings in 8 runs, register choice and
    order): with `fixed_layout` it runs without address randomisation, which
    makes a run reproducible; without, it samples that variation."""
    tool = str(find_toolchain().tool("tileiras"))
    prefix = _fixed_layout_prefix() if fixed_layout else None
    flags = [f"--gpu-name={target}", TILEIRAS_OPT_LEVEL, "-o"]
    if submitted:
        _run_boxed([tool, *flags, OUTPUT, INPUT], bytecode, timeout_s, prefix, output=cubin)
        return cubin
    # Only a reproducible run is kept: one without its fixed layout is a sample.
    key = content_key(tool, flags, bytecode.read_bytes()) if prefix is not None else None
    kept = tool_cache.restore("tileiras", key) if key is not None else None
    if kept is not None:
        cubin.write_bytes(kept)
        return cubin
    _run([tool, *flags, str(cubin), str(bytecode)], timeout_s, prefix)
    if key is not None:
        tool_cache.keep("tileiras", key, cubin.read_bytes())
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
    """The SASS listing of `cubin`."""
    tool = str(find_toolchain().tool("cuobjdump"))
    key = content_key(tool, ["-sass"], cubin.read_bytes())
    kept = tool_cache.restore("cuobjdump", key)
    if kept is not None:
        return kept.decode()
    listing = _run([tool, "-sass", str(cubin)], timeout_s)
    tool_cache.keep("cuobjdump", key, listing.encode())
    return listing


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
