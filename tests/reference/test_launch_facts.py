"""The facts the reference export assumes are the facts a real launch derives.

data/launch_facts.json was recorded on an H200 by launch_facts_probe.py: for
each argument, the constraint `KernelSignature.from_kernel_args` produced.
`launch_facts` must predict every array case exactly (compared as cuTile's own
`ArrayConstraint`, which normalises redundant facts the same way for both).
The probe asked under calling convention v1, which has no shape constants; a
launch makes every extent of 1 a shape constant under v2, which TileGym's
recorded entry symbols show (tests/reference/test_tilegym_signatures.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schemas.port_spec import ResolvedArray
from schemas.reference_export import ArrayFacts
from toolchain._export_child import _array_constraint
from toolchain.reference_export import launch_facts

DATA = json.loads((Path(__file__).parent / "data" / "launch_facts.json").read_text())
ARRAY_CASES = [c for c in DATA["cases"] if "shape" in c and "constraint" in c]
LIST_CASES = [c for c in DATA["cases"] if "element" in c]
SCALAR_CASES = {c["name"]: c for c in DATA["cases"] if "value" in c}


def _recorded(constraint: dict[str, Any]) -> dict[str, Any]:
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in constraint.items()}


def _predicted(case: dict[str, Any]) -> dict[str, Any]:
    array = ResolvedArray(
        dtype=case["dtype"],
        shape=case["shape"],
        strides=case["strides"],
        storage_offset=case["storage_offset"],
        role="in",
    )
    built = _array_constraint(launch_facts(array).model_copy(update={"shape_constant": None}))
    fields = {
        name: getattr(built, name)
        for name in (
            "dtype",
            "ndim",
            "index_dtype",
            "stride_lower_bound_incl",
            "alias_groups",
            "may_alias_internally",
            "stride_constant",
            "shape_constant",
            "stride_divisible_by",
            "shape_divisible_by",
            "base_addr_divisible_by",
        )
    }
    fields["dtype"] = fields["dtype"].name
    fields["index_dtype"] = fields["index_dtype"].name
    return {"kind": "ArrayConstraint", **fields}


def test_recorded_on_a_real_gpu() -> None:
    assert "H200" in DATA["device"]
    assert len(ARRAY_CASES) > 100


@pytest.mark.parametrize("case", ARRAY_CASES, ids=[c["name"] for c in ARRAY_CASES])
def test_array_facts_match_the_launch(case: dict[str, Any]) -> None:
    assert case["base_address_mod_256"] == case["storage_offset"] * _itemsize(case) % 256
    assert _predicted(case) == _recorded(case["constraint"])


@pytest.mark.parametrize("case", LIST_CASES, ids=[c["name"] for c in LIST_CASES])
def test_list_elements_may_alias_and_share_the_element_facts(case: dict[str, Any]) -> None:
    from schemas.reference_export import ArrayListArg

    recorded = case["constraint"]
    assert recorded["elements_may_alias"] is ArrayListArg.model_fields["elements_may_alias"].default
    assert _predicted(case["element"]) == _recorded(recorded["element"])


def test_launch_scalars_are_int32_float32_or_bool() -> None:
    """Why ScalarParam.dtype allows only these three: nothing else reaches a launch."""
    assert SCALAR_CASES["python int 5"]["constraint"]["dtype"] == "int32"
    assert SCALAR_CASES["python float 0.5"]["constraint"]["dtype"] == "float32"
    assert SCALAR_CASES["python bool"]["constraint"]["dtype"] == "bool_"
    assert "OverflowError" in SCALAR_CASES["python int 2**40"]["refused"]
    assert "not supported" in SCALAR_CASES["numpy int64"]["refused"]


def test_facts_of_a_ragged_sliced_array() -> None:
    """A column slice of a padded f16 buffer: nothing is divisible, the base is off."""
    facts: ArrayFacts = launch_facts(
        ResolvedArray(
            dtype="float16", shape=[64, 1029], strides=[1030, 1], storage_offset=1, role="in"
        )
    )
    assert facts.shape_divisible_by == [16, 1]
    assert facts.stride_divisible_by == [1, 1]
    assert facts.stride_constant == [None, 1]
    assert facts.base_addr_divisible_by == 1


def _itemsize(case: dict[str, Any]) -> int:
    from schemas.port_spec import ITEMSIZE

    return ITEMSIZE[case["dtype"]]
