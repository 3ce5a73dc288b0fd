"""Source locations of ops inlined from helpers: the helper's line, then the call."""

from __future__ import annotations

from tileir.mlir import _resolve_location

ALIASES = {
    "#loc1": 'loc("/lib/pkg/helpers.py":10:4)',
    "#loc2": 'loc("/lib/pkg/ops.py":30:8)',
    "#loc3": "loc(callsite(#loc1 at #loc2))",
    "#loc4": '#cuda_tile.di_loc<loc("/lib/pkg/ops.py":31:2) in #cuda_tile.di_subprogram<x>>',
}


def test_a_callsite_names_the_helper_line_then_the_kernel_line() -> None:
    assert _resolve_location("loc(#loc3)", ALIASES) == (
        "/lib/pkg/helpers.py:10:4 called from /lib/pkg/ops.py:30:8"
    )


def test_nested_callsites_end_with_the_kernel_line() -> None:
    text = "loc(callsite(#loc1 at callsite(#loc1 at #loc4)))"
    resolved = _resolve_location(text, ALIASES)
    assert resolved is not None and resolved.endswith("called from /lib/pkg/ops.py:31:2")
    assert resolved.count("called from") == 2


def test_an_unknown_side_keeps_the_known_one() -> None:
    assert _resolve_location("loc(callsite(unknown at #loc2))", ALIASES) == "/lib/pkg/ops.py:30:8"
