"""A generated variable never shadows a cutile-rs function: the lifter's reserved
names hold every public function of the pinned cutile crate's `core`, read from
the crate kernels_rs pins. A const generic keeps its constant's name, case included,
and no variable takes it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from nodes.kernel_writer.generics import fact_stem, generic_name
from nodes.kernel_writer.lifter import LiftedKernel
from nodes.kernel_writer.module import EntryCode, GenericParam, render_entry
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


def test_a_generic_is_named_as_the_source_names_its_constant() -> None:
    assert generic_name("block_n") == "block_n" and generic_name("TILE_N") == "TILE_N"
    assert generic_name("blockN") == "blockN"
    # A Rust keyword, or a name the module uses already, takes a trailing `_`.
    assert generic_name("type") == "type_" and generic_name("E") == "E_"
    assert generic_name("exp") == "exp_"
    # A launch fact's generic is the writer's own name, upper case: `X_ALIGN`.
    assert fact_stem("x") == "X"


def test_a_variable_never_takes_a_generic_name() -> None:
    names = NameAllocator({"block_n"})
    assert names.fresh("block_n") == "block_n_1"


def test_an_entry_with_a_lower_case_generic_allows_it() -> None:
    lifted = LiftedKernel("k", [], [])
    lower = render_entry(EntryCode("k", lifted, [GenericParam("block_n", "const")]))
    assert "non_upper_case_globals" in "\n".join(lower)
    assert "const block_n: i32" in "\n".join(lower)
    upper = render_entry(EntryCode("k", lifted, [GenericParam("TILE", "const")]))
    assert "non_upper_case_globals" not in "\n".join(upper)
