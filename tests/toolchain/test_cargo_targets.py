"""A new cargo target starts as a copy of the checkout's release build, so cutile
compiles once per clone (`toolchain.env.start_from_checkout_build`); one that
exists is never touched, and without a release build nothing is made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolchain.env import start_from_checkout_build


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout target whose release build holds a dependency's artifacts."""
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "checkout-target"))
    built = tmp_path / "checkout-target" / "release"
    (built / "deps").mkdir(parents=True)
    (built / "deps" / "libcutile-0123.rlib").write_bytes(b"rlib")
    (built / ".fingerprint").mkdir()
    os.utime(built / "deps" / "libcutile-0123.rlib", (1_000_000_000, 1_000_000_000))
    return built


def test_a_new_target_starts_from_the_release_build(release: Path, tmp_path: Path) -> None:
    target = tmp_path / "kernel-check-target"
    start_from_checkout_build(target)
    copied = target / "release" / "deps" / "libcutile-0123.rlib"
    assert copied.read_bytes() == b"rlib"
    # Times kept: cargo judges an artifact fresh by them.
    assert copied.stat().st_mtime == 1_000_000_000
    assert (target / "release" / ".fingerprint").is_dir()


def test_a_target_that_exists_is_left_alone(release: Path, tmp_path: Path) -> None:
    target = tmp_path / "seed"
    (target / "release").mkdir(parents=True)
    start_from_checkout_build(target)
    assert list((target / "release").iterdir()) == []


def test_without_a_release_build_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "never-built"))
    target = tmp_path / "seed"
    start_from_checkout_build(target)
    assert not target.exists()
