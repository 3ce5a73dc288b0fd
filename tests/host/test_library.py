"""The library's lazy rebuild and its lock, kernel installation, and the
plain-Rust pipeline check (real cargo)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from nodes.host_builder import library
from nodes.host_builder.stage import _build_failure_class, _place_kernel
from schemas.verdicts import FailureClass
from toolchain.rustfmt import format_rust


def test_stale_when_a_source_is_newer(library_file: Path, tmp_path: Path) -> None:
    copy = tmp_path / library_file.name
    shutil.copyfile(library_file, copy)
    newest = max(path.stat().st_mtime for path in library.source_files(library.CHECKOUT))
    os.utime(copy, (newest - 10, newest - 10))
    assert library.is_stale(library.CHECKOUT, copy)
    os.utime(copy, (newest + 10, newest + 10))
    assert not library.is_stale(library.CHECKOUT, copy)
    assert library.is_stale(library.CHECKOUT, tmp_path / "missing.so")


def test_a_fresh_library_is_not_rebuilt(
    library_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(crate: library.LibraryCrate, log_path: Path | None = None) -> Path:
        raise AssertionError("rebuilt a fresh library")

    monkeypatch.setattr(library, "build_library", refuse)
    assert library.ensure_built() == library_file


def test_a_newer_source_triggers_a_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[bool] = []

    def build(crate: library.LibraryCrate, log_path: Path | None = None) -> Path:
        built.append(True)
        return Path("x")

    monkeypatch.setattr(library, "is_stale", lambda crate, target=None: True)
    monkeypatch.setattr(library, "build_library", build)
    assert library.ensure_built() == Path("x")
    assert built == [True]


def test_the_lock_excludes_other_holders() -> None:
    order: list[str] = []
    entered = threading.Event()

    def hold() -> None:
        with library.library_lock():
            entered.set()
            time.sleep(0.3)
            order.append("first released")

    holder = threading.Thread(target=hold)
    holder.start()
    entered.wait()
    with library.library_lock():
        order.append("second entered")
    holder.join()
    assert order == ["first released", "second entered"]


def test_an_identical_kernel_is_reused_and_a_new_one_installed(tmp_path: Path) -> None:
    workspace = library.create_workspace(tmp_path / "workspace")
    registered = library.read_manifest(workspace).operator("softmax")
    current = workspace.src_dir / registered.kernel
    same = tmp_path / "kernel.rs"
    shutil.copyfile(current, same)
    reused = _place_kernel(workspace, "softmax", same)
    assert (reused.path, reused.module_path) == (current, registered.rust_module_path)
    assert reused.entries.by_variant == registered.entries
    assert reused.entries.literal == registered.literal_entries
    changed = tmp_path / "changed.rs"
    changed.write_text(current.read_text() + "\n// a change\n", encoding="utf-8")
    placed = _place_kernel(workspace, "softmax", changed)
    assert placed.path == workspace.kernels_dir / "softmax.rs"
    assert placed.module_path == "crate::ffi::kernels::softmax::softmax_port"
    assert placed.path.read_text() == format_rust(changed.read_text(), "2021")


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("error[E0308]: mismatched types\n  --> ported/src/ffi/softmax.rs:12:5", FailureClass.HOST),
        ("error: x\n  --> ported/src/ffi/kernels/softmax.rs:3:1", FailureClass.KERNEL),
        ("error: x\n  --> ported/src/softmax.rs:3:1", FailureClass.KERNEL),
        ("thread 'main' panicked at tests/pipeline/softmax.rs", FailureClass.KERNEL),
    ],
)
def test_build_failures_name_their_owner(log: str, expected: FailureClass) -> None:
    assert _build_failure_class(log) is expected


@pytest.mark.slow
def test_pipeline_check_compiles_the_port_to_tile_ir(tmp_path: Path) -> None:
    """cargo test of the generated pipeline check: no FFI, no Python, no GPU."""
    log = library.run_pipeline_check(library.CHECKOUT, "softmax", tmp_path / "pipeline.log")
    assert "softmax::compiles_to_tile_ir ... ok" in log
    assert "test result: ok. 1 passed" in log
