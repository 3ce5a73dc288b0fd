"""The dependency seed is stale once a file a dependency's build script read has
changed (a new virtual environment's CUDA headers): `seed_inputs_changed`."""

from __future__ import annotations

import os
from pathlib import Path

from nodes.host_builder.library import SEED_MARK, seed_inputs_changed


def _seed(tmp_path: Path, header: Path) -> Path:
    seed = tmp_path / "seed"
    build = seed / "release" / "build" / "cuda-bindings-0123"
    build.mkdir(parents=True)
    (build / "output").write_text(
        "cargo:rerun-if-changed=wrapper.h\n"
        f"cargo:rerun-if-changed={header}\n"
        "cargo:rerun-if-env-changed=CUDA_HOME\n"
        "cargo:rustc-link-lib=cuda\n"
    )
    (seed / SEED_MARK).write_text("key")
    return seed


def test_a_seed_is_fresh_while_what_its_build_scripts_read_is_unchanged(tmp_path: Path) -> None:
    header = tmp_path / "cuda.h"
    header.write_text("/* headers */")
    os.utime(header, ns=(1_000_000_000, 1_000_000_000))
    assert not seed_inputs_changed(_seed(tmp_path, header))


def test_a_newer_or_missing_input_makes_it_stale(tmp_path: Path) -> None:
    header = tmp_path / "cuda.h"
    header.write_text("/* headers */")
    seed = _seed(tmp_path, header)
    later = (seed / SEED_MARK).stat().st_mtime_ns + 1_000_000_000
    os.utime(header, ns=(later, later))  # the virtual environment made again
    assert seed_inputs_changed(seed)
    header.unlink()
    assert seed_inputs_changed(seed)
