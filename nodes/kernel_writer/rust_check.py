"""The in-Rust check: build kernel.rs with rustc against the pinned cutile crate.

The exporter compiles a kernel from its syntax tree without type-checking it;
rustc is what the host stage's library build will run. The check builds a
scratch crate holding only kernel.rs, with the workspace's Cargo.lock, in a
target directory of its own under the tileport cache: builds of the workspace
with another environment cannot invalidate it, so once warm (the first check
compiles cutile, minutes, or less where it starts from the checkout's own release
build, `start_from_checkout_build`) a check costs seconds. kernel.rs is untrusted (an
`include_str!` reads any file it names, the crates' macros run on it): cargo
runs in the sandbox (`toolchain.sandbox.cargo_sandbox`), which sees the crate,
the toolchain and the registry, and may write only the crate and that target
directory. Checks take turns (a file lock): cargo judges the crate by file times,
so a lib.rs written while another check builds would pass for that one's.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from toolchain.env import (
    KERNELS_RS,
    cache_dir,
    checkout_kind,
    start_from_checkout_build,
    toolchain_env,
)
from toolchain.sandbox import PATH, SandboxUnavailable, cargo_sandbox

CRATE_NAME = "tileport-kernel-check"
TARGET_DIR_NAME = "kernel-check-target"
MANIFEST = """[package]
name = "{name}"
version = "0.1.0"
edition = "2021"

[lib]
path = "lib.rs"
crate-type = ["rlib"]

[dependencies]
cutile = "=0.5.0"

[profile.release]
debug = false
"""


@dataclass(frozen=True)
class RustCheck:
    passed: bool
    log: str


def check_kernel_rs(kernel_rs: Path, timeout_s: float = 600.0) -> RustCheck:
    """`cargo build --release` of a crate whose lib is `kernel_rs`."""
    cargo = shutil.which("cargo")
    if cargo is None:
        return RustCheck(False, "cargo not found")
    turn = cache_dir() / "locks" / f"{TARGET_DIR_NAME}.lock"
    turn.parent.mkdir(parents=True, exist_ok=True)
    with turn.open("a") as held, tempfile.TemporaryDirectory(prefix="tileport-rustc-") as tmp:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        crate = Path(tmp)
        (crate / "Cargo.toml").write_text(MANIFEST.format(name=CRATE_NAME))
        lock = KERNELS_RS / "Cargo.lock"
        if lock.exists():
            shutil.copyfile(lock, crate / "Cargo.lock")
        shutil.copyfile(kernel_rs, crate / "lib.rs")
        env = toolchain_env({"PATH": PATH, "LANG": "C.UTF-8"})
        target = cache_dir() / f"{TARGET_DIR_NAME}-{checkout_kind()}"
        start_from_checkout_build(target)
        box = cargo_sandbox(crate, target, env)
        try:
            launch = box.launch([cargo, "build", "--release", "--quiet", "--offline"])
            done = subprocess.run(
                launch.argv,
                cwd=crate,
                env=launch.env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except SandboxUnavailable as error:
            return RustCheck(False, str(error))
        except subprocess.TimeoutExpired:
            return RustCheck(False, f"cargo build took longer than {timeout_s:.0f} s")
    log = (done.stderr + done.stdout).replace(str(crate), "<crate>").strip()
    return RustCheck(done.returncode == 0, log)
