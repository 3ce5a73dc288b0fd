"""A generated variable never shadows a cutile-rs function: the lifter's reserved
names hold every public function of the pinned cutile crate's `core`, read from
the crate kernels_rs pins."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from nodes.kernel_writer.naming import CUTILE_CORE_FUNCTIONS, NameAllocator
from toolchain.env import KERNELS_RS

PINNED = re.compile(r'^cutile = "=([0-9.]+)"', re.MULTILINE)
PUBLIC_FUNCTION = re.compile(r"^\s*pub (?:unsafe )?fn ([a-z][a-z_0-9]*)", re.MULTILINE)


def cutile_core_source() -> Path:
    """The pinned crate's `core`, where `make setup` downloaded it."""
    [version] = PINNED.findall((KERNELS_RS / "Cargo.toml").read_text())
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob(f"registry/src/*/cutile-{version}/src/_core.rs"))
    if not found:
        pytest.skip(f"cutile {version} is not downloaded (make setup)")
    return found[0]


def test_every_cutile_core_function_is_reserved() -> None:
    functions = set(PUBLIC_FUNCTION.findall(cutile_core_source().read_text()))
    assert functions - CUTILE_CORE_FUNCTIONS == set()


def test_a_value_named_like_a_function_takes_another_name() -> None:
    names = NameAllocator()
    assert names.fresh("ftoi") != "ftoi"
    assert names.fresh("x") == "x"
