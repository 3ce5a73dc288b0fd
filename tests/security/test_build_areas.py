"""One run cannot write into another run's build: each workspace of the kernel
library builds in an area of its own, and a sandboxed build (which also runs the
run's pipeline check, code compiled from the run's crate) sees only its own area,
never another's nor the dependencies every area is copied from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nodes.host_builder import library
from toolchain.env import toolchain_env
from toolchain.sandbox import cargo_sandbox, unavailable_reason


@pytest.mark.slow
def test_a_runs_build_cannot_write_another_runs_area_or_the_dependencies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.setattr(library, "build_areas_dir", lambda: tmp_path / "areas")
    ours = library.create_workspace(tmp_path / "ours")
    theirs = library.create_workspace(tmp_path / "theirs")
    for crate in (ours, theirs):
        crate.target_dir.mkdir(parents=True, exist_ok=True)
    their_library = theirs.target_dir / "libtileport_kernels.so"
    their_library.write_text("theirs\n")
    dependencies = tmp_path / "dependencies"
    dependencies.mkdir()
    (dependencies / "libdep.rlib").write_text("trusted\n")
    attempt = (
        f"echo poisoned > {their_library}; "
        f"echo poisoned > {dependencies / 'libdep.rlib'}; "
        f"echo ours > {ours.target_dir / 'own'}"
    )
    box = cargo_sandbox(ours.workspace, ours.target_dir, toolchain_env(library.SANDBOX_ENV))
    argv, env = box.launch(["sh", "-c", attempt])
    subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
    assert their_library.read_text() == "theirs\n"
    assert (dependencies / "libdep.rlib").read_text() == "trusted\n"
    assert (ours.target_dir / "own").read_text() == "ours\n"
