"""A run's library workspace: a copy of the checkout's cargo workspace that builds
into a target directory of its own, where no workspace passes off another's build
as its own."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from nodes.host_builder import library
from nodes.host_builder.binding import BindingError
from toolchain.env import KERNELS_RS

LONG_AGO = 1_000_000_000.0  # 2001: older than any build
PROBE_SYMBOL = "tileport_workspace_probe"


def _times(crate: library.LibraryCrate) -> set[float]:
    return {path.stat().st_mtime for path in library._workspace_inputs(crate)}


def _age(crate: library.LibraryCrate) -> None:
    for path in library._workspace_inputs(crate):
        os.utime(path, (LONG_AGO, LONG_AGO))


def test_a_workspace_is_a_copy_of_the_checkout(tmp_path: Path) -> None:
    workspace = library.create_workspace(tmp_path / "kernels_rs")
    assert not workspace.in_checkout and library.CHECKOUT.in_checkout
    for name in ("Cargo.toml", "Cargo.lock", "ported/Cargo.toml", "tileir-export/Cargo.toml"):
        assert (workspace.workspace / name).read_bytes() == (KERNELS_RS / name).read_bytes()
    assert library.read_manifest(workspace) == library.read_manifest(library.CHECKOUT)
    assert library.stale_generated(workspace) == []
    assert workspace.target_dir != library.CHECKOUT.target_dir
    assert workspace.library_path.parent == workspace.wrapper_path.parent


def test_a_read_only_checkout_gives_a_writable_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes and times are copied, permissions are not."""
    checkout = tmp_path / "checkout"
    shutil.copytree(KERNELS_RS, checkout)
    for path in [checkout, *checkout.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    monkeypatch.setattr(library, "KERNELS_RS", checkout)
    try:
        workspace = library.create_workspace(tmp_path / "kernels_rs")
    finally:
        for path in [checkout, *checkout.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    copied = [workspace.workspace, *workspace.workspace.rglob("*")]
    assert all(path.stat().st_mode & stat.S_IWUSR for path in copied)
    lock = workspace.workspace / "Cargo.lock"
    assert lock.stat().st_mtime_ns == (KERNELS_RS / "Cargo.lock").stat().st_mtime_ns


def test_a_workspace_is_made_afresh(tmp_path: Path) -> None:
    workspace = library.create_workspace(tmp_path / "kernels_rs")
    leftover = workspace.kernels_dir / "leftover.rs"
    leftover.write_text("// from an earlier attempt\n", encoding="utf-8")
    library.create_workspace(workspace.workspace)
    assert not leftover.exists()


def test_the_checkout_records_only_its_own_specs(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.port.yaml"
    workspace = library.create_workspace(tmp_path / "kernels_rs")
    assert library._recorded_spec(workspace, outside) == outside.resolve().as_posix()
    inside = KERNELS_RS.parent / "examples" / "kernels" / "softmax.port.yaml"
    assert library._recorded_spec(workspace, inside) == "examples/kernels/softmax.port.yaml"
    with pytest.raises(BindingError, match="outside the repository"):
        library._recorded_spec(library.CHECKOUT, outside)


def test_only_the_sources_built_last_keep_their_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cargo judges the area's compiled crate by file times: a workspace made again
    at the same path with other sources has them made newer than any build; the
    same sources are left alone."""
    monkeypatch.setattr(library, "build_areas_dir", lambda: tmp_path / "areas")
    first = library.create_workspace(tmp_path / "workspace")
    _age(first)
    python = first.wrapper_path.parent  # the wrapper (and the library built there)
    python_times = {path: path.stat().st_mtime_ns for path in python.iterdir()}
    library._claim_workspace_target(first)  # nothing built there yet
    assert LONG_AGO not in _times(first)
    _age(first)
    library._claim_workspace_target(first)  # these very sources were built last
    assert _times(first) == {LONG_AGO}
    again = library.create_workspace(tmp_path / "workspace")
    with (again.kernels_dir / "softmax.rs").open("a", encoding="utf-8") as kernel:
        kernel.write("// another port\n")
    _age(again)
    library._claim_workspace_target(again)
    assert LONG_AGO not in _times(again)
    assert {path: path.stat().st_mtime_ns for path in python.iterdir()} == python_times


def test_each_workspace_has_a_build_area_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(library, "build_areas_dir", lambda: tmp_path / "areas")
    first = library.create_workspace(tmp_path / "first")
    second = library.create_workspace(tmp_path / "second")
    assert first.target_dir != second.target_dir
    assert first.target_dir.parent == second.target_dir.parent == tmp_path / "areas"
    assert library.CHECKOUT.target_dir == library.cargo_target_dir()


@pytest.mark.slow
def test_workspaces_never_pass_off_each_others_build(tmp_path: Path) -> None:
    """The older workspace (its files keep the checkout's times) builds after a newer
    one with another library: it gets its own library, not the other's."""
    older = library.create_workspace(tmp_path / "older")
    newer = library.create_workspace(tmp_path / "newer")
    lib_rs = newer.src_dir / "lib.rs"
    probe = f'\n#[no_mangle]\npub extern "C" fn {PROBE_SYMBOL}() -> u32 {{\n    2\n}}\n'
    lib_rs.write_text(lib_rs.read_text(encoding="utf-8") + probe, encoding="utf-8")
    with library.library_lock():
        built_newer = library.build_library(newer)
        built_older = library.build_library(older)
    assert PROBE_SYMBOL.encode() in built_newer.read_bytes()
    assert PROBE_SYMBOL.encode() not in built_older.read_bytes()
    checkout = library.CHECKOUT.library_path
    assert not checkout.exists() or PROBE_SYMBOL.encode() not in checkout.read_bytes()
