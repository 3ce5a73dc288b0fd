"""Where the CUDA Tile toolchain lives, and the environment that builds and runs it.

Everything comes from Python wheels installed in the active environment
(`cuda-tile[tileiras]`, the 13.4.92 toolkit wheels, `libclang`), so no root
and no system CUDA are needed. `CUDA_HOME` is always pointed at the wheels:
an older system toolkit there makes tileiras load the wrong libnvvm.
"""

from __future__ import annotations

import glob
import os
import shlex
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
KERNELS_RS = REPO_ROOT / "kernels_rs"


def cache_dir() -> Path:
    """The per-user cache shared by every clone (pip downloads, cargo target)."""
    return Path(os.environ.get("TILEPORT_CACHE", Path.home() / ".cache" / "tileport"))


def checkout_kind() -> str:
    """`dev` or `ci` (TILEPORT_CHECKOUT_KIND): each kind of checkout builds into cargo
    target directories of its own. The toolchain's paths (in its venv) are in the
    environment of build scripts, so two checkouts sharing a target rebuild each
    other's crates."""
    return os.environ.get("TILEPORT_CHECKOUT_KIND", "dev")


def cargo_target_dir() -> Path:
    default = cache_dir() / f"target-{checkout_kind()}"
    return Path(os.environ.get("CARGO_TARGET_DIR", default))


def start_from_checkout_build(target: Path) -> None:
    """Starts a new cargo target directory as a copy of the checkout's own release
    build where there is one (`make rust-build`, a trusted build of the same lock in
    the same environment): cargo then compiles only what differs from it (crates at
    other paths, other features) rather than cutile and every dependency again, which
    takes minutes. A target that exists is left as it is."""
    built = cargo_target_dir() / "release"
    if target.exists() or not built.is_dir():
        return
    target.mkdir(parents=True)
    copy = ["cp", "-a", "--reflink=auto", str(built), str(target / "release")]
    subprocess.run(copy, check=True, capture_output=True)


def dependency_target_dir() -> Path:
    """The kernel library's dependencies, compiled once by a trusted build of the
    checkout's workspace: the seed every workspace's build area is copied from.
    Apart from the checkout's own target, since a workspace's crate has the
    checkout's package name and library file name."""
    return cargo_target_dir() / "dependencies"


def build_areas_dir() -> Path:
    """The build areas of the kernel library's workspaces (one per run): each a
    target directory of its own, which only that workspace's sandboxed builds write."""
    return cargo_target_dir() / "build-areas"


def rs_export_binary() -> Path:
    return cargo_target_dir() / "release" / "tileport-rs-export"


@dataclass(frozen=True)
class ToolchainPaths:
    cuda_root: Path
    libclang_dir: Path

    @property
    def bin_dir(self) -> Path:
        return self.cuda_root / "bin"

    def tool(self, name: str) -> Path:
        return self.bin_dir / name


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def find_toolchain() -> ToolchainPaths:
    site = _site_packages()
    return ToolchainPaths(
        cuda_root=site / "nvidia" / "cu13", libclang_dir=site / "clang" / "native"
    )


def _c_builtin_include() -> str | None:
    """The wheel's libclang ships without its builtin headers (stddef.h);
    gcc's copy serves bindgen equally well."""
    candidates = sorted(glob.glob("/usr/lib/gcc/x86_64-linux-gnu/*/include/stddef.h"))
    return str(Path(candidates[-1]).parent) if candidates else None


def toolchain_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for cargo builds and tileiras runs."""
    paths = find_toolchain()
    env = dict(os.environ if base is None else base)
    cuda = str(paths.cuda_root)
    env["CUDA_TOOLKIT_PATH"] = cuda
    env["CUDA_HOME"] = cuda
    env["CUDA_PATH"] = cuda
    env["LIBCLANG_PATH"] = str(paths.libclang_dir)
    env["CUTILE_TILEIRAS_PATH"] = str(paths.tool("tileiras"))
    env["CARGO_TARGET_DIR"] = str(cargo_target_dir())
    env["PATH"] = os.pathsep.join([str(paths.bin_dir), env.get("PATH", "")])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(paths.cuda_root / "lib"), env.get("LD_LIBRARY_PATH", "")]
    )
    include = _c_builtin_include()
    if include:
        env["BINDGEN_EXTRA_CLANG_ARGS"] = f"-I{include}"
    return env


def shell_exports() -> str:
    """`export K=V` lines for the variables `toolchain_env` sets."""
    keys = (
        "CUDA_TOOLKIT_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "LIBCLANG_PATH",
        "CUTILE_TILEIRAS_PATH",
        "CARGO_TARGET_DIR",
        "PATH",
        "LD_LIBRARY_PATH",
        "BINDGEN_EXTRA_CLANG_ARGS",
    )
    env = toolchain_env()
    return "\n".join(f"export {k}={shlex.quote(env[k])}" for k in keys if k in env)
