"""docs/DIALECT_COVERAGE.md is what the installed toolchain and the op table say:
a new op or dtype of an upgraded cuda-tile, or a change to the op table, fails here
until the page is printed again (`python -m nodes.kernel_writer.coverage`)."""

from __future__ import annotations

import pytest

from nodes.kernel_writer.coverage import (
    KERNEL_DTYPES,
    STRUCTURE,
    UPSTREAM_GAPS,
    cutile_dtypes,
    dialect_name,
    dialect_ops,
    gap_titles,
    markdown,
)
from nodes.kernel_writer.op_table import OP_TABLE
from schemas.port_spec import REFUSED_DTYPES
from toolchain.env import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "DIALECT_COVERAGE.md"


def test_the_committed_page_is_what_the_toolchain_and_op_table_say() -> None:
    assert PAGE.read_text() == markdown(), (
        "docs/DIALECT_COVERAGE.md is stale: run "
        "`python -m nodes.kernel_writer.coverage > docs/DIALECT_COVERAGE.md`"
    )


def test_every_mapped_op_is_an_op_of_the_installed_dialect() -> None:
    ops = set(dialect_ops())
    assert [entry.op for entry in OP_TABLE if entry.op not in ops] == []


def test_every_upstream_gap_has_its_section_in_the_gaps_doc() -> None:
    titles = gap_titles()
    missing = {name: gap for name, gap in UPSTREAM_GAPS.items() if gap not in titles}
    assert missing == {}, "docs/UPSTREAM_GAPS.md lacks a `## Gn:` section for these"


def test_an_upstream_gap_is_an_op_or_dtype_of_the_toolchain_and_not_ported() -> None:
    known = set(dialect_ops()) | set(cutile_dtypes())
    assert [name for name in UPSTREAM_GAPS if name not in known] == []
    ported = {entry.op for entry in OP_TABLE}
    assert [name for name in UPSTREAM_GAPS if name in ported or name in STRUCTURE] == []


def test_a_dtype_that_ports_within_a_kernel_is_one_a_spec_refuses_and_says_why() -> None:
    refused = set(REFUSED_DTYPES) & set(cutile_dtypes())
    assert set(KERNEL_DTYPES) <= refused
    assert [name for name in refused if name not in UPSTREAM_GAPS] == []


def test_the_gap_titles_are_read_from_the_section_headings() -> None:
    text = "## G1: first gap\nbody\n## Not a gap\n## G22: `op` has no construct\n"
    assert gap_titles(text) == {"G1": "first gap", "G22": "`op` has no construct"}


@pytest.mark.parametrize(
    ("encoder", "name"),
    [
        ("AtomicCASTko", "atomic_cas_tko"),
        ("ShLI", "shli"),
        ("IToF", "itof"),
        ("XOrI", "xori"),
        ("CosH", "cosh"),
        ("FPowF", "fpowf"),
        ("MmaFScaled", "mmaf_scaled"),
        ("GetTileBlockId", "get_tile_block_id"),
        ("PtrToInt", "ptr_to_int"),
        ("Exp2", "exp2"),
    ],
)
def test_encoder_class_names_become_the_dialects_op_names(encoder: str, name: str) -> None:
    assert dialect_name(encoder) == name
