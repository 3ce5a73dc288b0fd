"""A hostile kernel.rs against the sandboxed cargo builds (the in-Rust check, a run's
library workspace): rustc reads any file an `include_str!` names, and
`compile_error!` would print it into the build log, which is stored and served
with the run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nodes.host_builder.library import LibraryBuildError, build_library, create_workspace
from nodes.kernel_writer.rust_check import check_kernel_rs
from toolchain.sandbox import cargo_sandbox

SECRET = "tok-9d2e77c1a4"


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_include_str_of_a_service_secret_reads_nothing(tmp_path: Path) -> None:
    token = tmp_path / "data" / "api-token"
    token.parent.mkdir()
    token.write_text(SECRET)
    token.chmod(0o600)
    kernel_rs = tmp_path / "kernel.rs"
    kernel_rs.write_text(
        f"pub const STOLEN: &str = include_str!({str(token)!r});\n"
        f"compile_error!(include_str!({str(token)!r}));\n".replace("'", '"')
    )
    check = check_kernel_rs(kernel_rs)
    assert not check.passed
    assert SECRET not in check.log
    assert "couldn't read" in check.log and "No such file or directory" in check.log


def test_a_workspace_build_without_a_sandbox_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = create_workspace(tmp_path / "library")
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", str(tools))
    with pytest.raises(LibraryBuildError, match="the sandbox is unavailable: bwrap is not"):
        build_library(workspace)


def test_the_cargo_this_machine_runs_is_in_the_build_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rustup puts cargo in ~/.cargo/bin; with CARGO_HOME moved since (a registry of
    its own), the cargo a build runs must still be inside the sandbox."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed")
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo-home"))
    box = cargo_sandbox(tmp_path / "crate", tmp_path / "target", {"PATH": "/usr/bin:/bin"})
    folder = Path(cargo).parent
    assert folder in box.read_only
    assert str(folder) in box.env["PATH"].split(":")
    assert box.env["CARGO_HOME"] == str(tmp_path / "cargo-home")
