"""Specialisation classes the records lack (nodes/spec_writer/classes.py): which
configurations are added, and which are left out and why."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.spec_writer.classes import (
    ClassConfig,
    class_configs,
    keep_serving,
    tied_symbols,
    unit_configs,
)
from schemas.port_spec import Config, PortSpec, parse_port_spec


def _config(name: str, dtype: str, **dims: int) -> dict[str, Any]:
    return {"name": name, "dims": dict(dims), "dtype": dtype}


def _keep(config: dict[str, Any], dims: dict[str, int]) -> dict[str, Any] | None:
    """Constants that follow no extent."""
    return dict(config["constants"])


def _length_follows_x(config: dict[str, Any], dims: dict[str, int]) -> dict[str, Any] | None:
    """N is X_0 (as a spec rule derives it); a config without X_0 cannot follow."""
    if "X_0" not in dims:
        return None
    return {**config["constants"], "N": dims["X_0"]}


def test_every_float_class_and_one_ragged_per_variant() -> None:
    configs = [_config("t0_float16", "float16", X_0=1024), _config("t1_float32", "float32", X_0=64)]
    added = class_configs(configs, ["v0", "v0"], _keep)
    assert [(a.config["name"], a.source) for a in added] == [
        ("t0_float16_as_bfloat16", "t0_float16"),
        ("t0_float16_ragged", "t0_float16"),
        ("t0_float16_half_aligned", "t0_float16"),
    ]
    assert added[0].config["dims"] == {"X_0": 1024}
    assert added[1].config == {
        "name": "t0_float16_ragged",
        "dims": {"X_0": 1023},
        "dtype": "float16",
    }
    assert configs[0] == _config("t0_float16", "float16", X_0=1024)  # not changed in place


def test_classes_per_variant_and_what_is_not_widened() -> None:
    configs = [
        _config("t0_float32", "float32", X_0=17),  # ragged already
        _config("t1_int32", "int32", X_0=32),  # not a float class
        {**_config("t2_float16", "float16", X_0=32), "constants": {"N": 32}},
        _config("t3_float16", "float16", X_0=32, Y_1=1),
    ]
    added = class_configs(configs, ["v0", "v1", "v2", "v3"], _keep)
    names = [a.config["name"] for a in added]
    assert names == [
        "t0_float32_as_float16",
        "t0_float32_as_bfloat16",
        "t2_float16_as_float32",
        "t2_float16_as_bfloat16",
        "t3_float16_as_float32",
        "t3_float16_as_bfloat16",
        "t2_float16_ragged",
        "t2_float16_half_aligned",
        "t3_float16_ragged",
        "t3_float16_half_aligned",
    ]
    # A bound constant no rule derives keeps its value; an extent of 1 stays 1.
    assert added[6].config["constants"] == {"N": 32}
    assert added[-2].config["dims"] == {"X_0": 31, "Y_1": 1}
    assert added[-1].config["dims"] == {"X_0": 8, "Y_1": 1}


def test_bound_constants_follow_the_extents_they_are_derived_from() -> None:
    gelu_like = {**_config("t0_float32", "float32", X_0=524288), "constants": {"N": 524288}}
    added = class_configs([gelu_like], ["v0"], _length_follows_x)
    ragged = next(a.config for a in added if a.config["name"].endswith("_ragged"))
    assert ragged["dims"] == {"X_0": 524287}
    assert ragged["constants"] == {"N": 524287}
    # Where the constants cannot follow, no ragged class; fixed strides keep the shapes.
    other = {**_config("t0_float32", "float32", Y_0=64), "constants": {"N": 64}}
    strided = {**_config("t1_float32", "float32", X_0=64), "strides": {"x": [2]}}
    added = class_configs([other, strided], ["v0", "v1"], _length_follows_x)
    assert not [a for a in added if a.config["name"].endswith("_ragged")]


def test_names_stay_unique() -> None:
    configs = [
        _config("t0_float16", "float16", X_0=16),
        _config("t0_float16_ragged", "float32", X_0=5),
    ]
    added = class_configs(configs, ["v0", "v1"], _keep)
    assert len({a.config["name"] for a in added} | {c["name"] for c in configs}) == len(added) + 2
    assert "t0_float16_ragged_" in {a.config["name"] for a in added}


FLOATS = ["float16", "float32", "bfloat16"]
SPEC: dict[str, Any] = {
    "spec_version": 1,
    "name": "scale",
    "source": "scale.py",
    "kernel": "scale",
    "reference_backend": "cutile_python",
    "launch_path": "direct",
    "arrays": {
        name: {
            "rank": 1,
            "shape": ["X_0"],
            "dtypes": ["float16", "float32", "bfloat16"],
            "role": role,
        }
        for name, role in (("x", "in"), ("y", "out"))
    },
    "constants": {"BLOCK": {"type": "int", "default": 64}},
    "grid": ["cdiv(X_0, BLOCK)"],
    "variants": [
        {"name": "small", "when": "X_0 < 100"},
        {"name": "large", "when": "X_0 >= 100 and dtype != 'bfloat16'"},
    ],
    "test_configs": [
        {"name": "t0", "dims": {"X_0": 64}, "dtype": "float16"},
        {"name": "t1", "dims": {"X_0": 512}, "dtype": "float16"},
    ],
    "reference": {"oracle": "reference_kernel", "origin": "the kernel itself"},
    "tolerances": {d: {"atol": 0.0, "rtol": 0.0, "source": "exact"} for d in FLOATS},
}


@pytest.fixture
def spec(tmp_path: Any) -> PortSpec:
    return parse_port_spec(SPEC, tmp_path / "scale.port.yaml")


def test_keep_serving_drops_other_variants_and_what_the_reference_rejects(spec: PortSpec) -> None:
    added = [
        ClassConfig(_config("t0_float16_as_bfloat16", "bfloat16", X_0=64), "t0"),
        ClassConfig(_config("t1_float16_as_bfloat16", "bfloat16", X_0=512), "t1"),
        ClassConfig(_config("t1_float16_as_float32", "float32", X_0=512), "t1"),
        ClassConfig(_config("t0_float16_ragged", "float16", X_0=63), "t0"),
        ClassConfig(_config("t0_bad", "float16"), "t0"),  # X_0 unbound
    ]
    asked: list[list[str]] = []

    def compiles(configs: list[Config]) -> set[str]:
        asked.append([c.name for c in configs])
        return {c.name for c in configs if c.dtype != "float32"}

    kept, dropped = keep_serving(spec, added, compiles)
    assert [k.config["name"] for k in kept] == ["t0_float16_as_bfloat16", "t0_float16_ragged"]
    assert asked == [["t0_float16_as_bfloat16", "t1_float16_as_float32", "t0_float16_ragged"]]
    assert any(d.startswith("t1_float16_as_bfloat16: ") for d in dropped)
    assert "t0_bad: " in "\n".join(dropped)
    assert "t1_float16_as_float32: the reference does not compile for it" in dropped


def test_keep_serving_asks_nothing_when_nothing_is_left(spec: PortSpec) -> None:
    def compiles(configs: list[Config]) -> set[str]:
        raise AssertionError("no export for no configuration")

    kept, dropped = keep_serving(spec, [ClassConfig(_config("x", "float16"), "t0")], compiles)
    assert kept == [] and len(dropped) == 1


def test_one_extent_ragged_alone_where_the_variant_holds_only_aligned_ones(
    tmp_path: Any,
) -> None:
    # Rows of any count, columns that fill their tiles: the all-odd class leaves the
    # variant, the rows made odd alone stay, so the rows' facts still become generics.
    data = {
        **SPEC,
        "arrays": {
            name: {"rank": 2, "shape": ["M", "W"], "dtypes": FLOATS, "role": role}
            for name, role in (("x", "in"), ("y", "out"))
        },
        "grid": ["M"],
        "variants": [
            {"name": "full", "when": "W % 64 == 0"},
            {"name": "partial", "when": "W % 64 != 0"},
        ],
        "test_configs": [
            {"name": "t0", "dims": {"M": 32, "W": 256}, "dtype": "float16"},
            {"name": "t1", "dims": {"M": 32, "W": 200}, "dtype": "float16"},
        ],
    }
    spec = parse_port_spec(data, tmp_path / "rows.port.yaml")
    configs = [dict(c) for c in data["test_configs"]]
    added = [a for a in class_configs(configs, ["full", "partial"], _keep) if "ragged" in a.kind]
    assert [(a.config["name"], a.kind) for a in added] == [
        ("t0_ragged", "ragged"),
        ("t0_ragged_m", "ragged_extent"),
        ("t0_ragged_w", "ragged_extent"),
        ("t1_ragged", "ragged"),
        ("t1_ragged_m", "ragged_extent"),
        ("t1_ragged_w", "ragged_extent"),
    ]
    kept, dropped = keep_serving(spec, added, lambda configs: {c.name for c in configs})
    # `full` keeps its rows made odd alone; `partial`'s whole ragged class serves it.
    assert [k.config["name"] for k in kept] == ["t0_ragged_m", "t1_ragged"]
    assert {d.split(":")[0] for d in dropped} == {"t0_ragged", "t0_ragged_w"}


def test_a_dtype_class_is_made_from_a_configuration_naming_its_fixed_arrays() -> None:
    # y stays float32 whatever x is: only t1 says so, so bfloat16 comes from t1.
    configs = [
        _config("t0_float32", "float32", X_0=64),
        {**_config("t1_float16", "float16", X_0=64), "array_dtypes": {"y": "float32"}},
    ]
    added = class_configs(configs, ["v0", "v0"], _keep)
    [bf16] = [a for a in added if a.config["dtype"] == "bfloat16"]
    assert bf16.source == "t1_float16" and bf16.config["array_dtypes"] == {"y": "float32"}


def test_an_unaligned_class_per_variant_where_none_is_recorded() -> None:
    configs = [
        _config("t0_float32", "float32", X_0=64),
        {**_config("t1_float32", "float32", X_0=64), "storage_offsets": {"x": 1}},
        {**_config("t2_float32", "float32", X_0=64), "strides": {"x": [2]}},
    ]
    added = class_configs(configs, ["v0", "v1", "v2"], _keep, ["x", "y"])
    unaligned = [(a.config["name"], a.config.get("storage_offsets")) for a in added]
    unaligned = [u for u in unaligned if u[0].endswith("_unaligned")]
    # v1 has one recorded; v2 fixes its layout, which the offset would break.
    assert unaligned == [("t0_float32_unaligned", {"x": 1, "y": 1})]


def test_a_half_aligned_class_where_no_odd_extent_stays_in_the_variant(tmp_path: Any) -> None:
    # Columns that stay a multiple of 8 (a row filling a power-of-two tile): no odd
    # width stays in `full`, a width of 8 does, so the width's fact still becomes a
    # generic (16 recorded, 8 added) and a width of 2, 4 or 8 is served.
    data = {
        **SPEC,
        "arrays": {
            name: {"rank": 2, "shape": ["M", "W"], "dtypes": FLOATS, "role": role}
            for name, role in (("x", "in"), ("y", "out"))
        },
        "grid": ["M"],
        "variants": [
            {"name": "full", "when": "W % 8 == 0"},
            {"name": "partial", "when": "W % 8 != 0"},
        ],
        "test_configs": [
            {"name": "t0", "dims": {"M": 32, "W": 256}, "dtype": "float16"},
            {"name": "t1", "dims": {"M": 32, "W": 100}, "dtype": "float16"},
        ],
    }
    spec = parse_port_spec(data, tmp_path / "rows.port.yaml")
    configs = [dict(c) for c in data["test_configs"]]
    added = class_configs(configs, ["full", "partial"], _keep)
    half = [a for a in added if a.kind == "half_aligned"]
    assert [(a.config["name"], a.config["dims"]) for a in half] == [
        ("t0_half_aligned", {"M": 8, "W": 8}),
        ("t1_half_aligned", {"M": 8, "W": 100}),
    ]
    kept, _ = keep_serving(spec, added, lambda configs: {c.name for c in configs})
    names = [k.config["name"] for k in kept]
    assert "t0_half_aligned" in names and "t0_ragged_m" in names and "t0_ragged" not in names
    # `partial` keeps its whole ragged class: a half-aligned one adds nothing there.
    assert "t1_ragged" in names and "t1_half_aligned" not in names
    # Where the whole ragged class resolves but the reference does not compile it,
    # the half-aligned one is still tried.
    kept, _ = keep_serving(
        spec, added, lambda configs: {c.name for c in configs if c.name != "t1_ragged"}
    )
    assert "t1_half_aligned" in [k.config["name"] for k in kept]


def test_an_extent_of_one_gets_a_variant_of_its_own() -> None:
    # Per configuration and extent above 1: that extent made 1, constants rederived,
    # bound for the unit variant of its variant; a launch reached twice is added once.
    configs = [
        {**_config("t0", "float16", X_0=64), "constants": {"N": 64}},
        {**_config("t0_as_float32", "float32", X_0=64), "constants": {"N": 64}},
        {**_config("t1", "float16", X_0=64, Y_0=1), "constants": {"N": 64}},
        {**_config("t2", "float16", X_0=32), "strides": {"x": [2]}, "constants": {"N": 32}},
    ]
    added, units = unit_configs(
        configs, ["v0", "v0", "v1", "v0"], _length_follows_x, {c["name"] for c in configs}, set()
    )
    assert [(a.config["name"], a.config["dims"], a.variant) for a in added] == [
        ("t0_x_0_1", {"X_0": 1}, "v0_x_0_1"),
        ("t0_as_float32_x_0_1", {"X_0": 1}, "v0_x_0_1"),
        ("t1_x_0_1", {"X_0": 1, "Y_0": 1}, "v1_x_0_1"),  # Y_0 was 1 already
    ]  # t2 fixes its strides, which an extent of 1 would break
    assert all(a.kind == "unit" and a.config["constants"] == {"N": 1} for a in added)
    assert [u.name for u in units] == ["v0_x_0_1", "v1_x_0_1"]
    assert units[0].condition("True") == "X_0 == 1"
    assert units[0].condition("W % 8 == 0") == "(W % 8 == 0) and (X_0 == 1)"
    again, _ = unit_configs(configs[:1] * 2, ["v0", "v0"], _length_follows_x, set(), set())
    assert len(again) == 1


def test_a_symbol_naming_two_extents_of_one_array_gets_no_unit_variant() -> None:
    # Every recorded layer_norm input was square, so one symbol names both of X's
    # extents: a unit variant proven on a 1x1 input would be dispatched on one-row
    # inputs of any width. The tie gets none; an untied symbol still does.
    assert tied_symbols([["X_0", "X_0"], ["X_0"], [4, "K"]]) == {"X_0"}
    assert tied_symbols([["X_0", "X_1"], ["X_1"]]) == set()
    square = {**_config("t0", "float16", X_0=64, K=8), "constants": {"N": 64}}
    added, units = unit_configs([square], ["v0"], _keep, {"t0"}, {"X_0"})
    assert [u.name for u in units] == ["v0_k_1"]
    assert [a.config["dims"] for a in added] == [{"X_0": 64, "K": 1}]


def test_keep_serving_holds_a_unit_configuration_to_its_unit_variant(tmp_path: Any) -> None:
    data = {
        **SPEC,
        "variants": [{"name": "v0_x_0_1", "when": "X_0 == 1"}, {"name": "v0"}],
        "test_configs": [
            {"name": "t0", "dims": {"X_0": 64}, "dtype": "float16"},
            {"name": "t0_x_0_1", "dims": {"X_0": 1}, "dtype": "float16"},
        ],
    }
    spec = parse_port_spec(data, tmp_path / "units.port.yaml")
    unit = ClassConfig(_config("u", "float16", X_0=1), "t0", "unit", "v0_x_0_1")
    stray = ClassConfig(_config("w", "float16", X_0=3), "t0", "unit", "v0_x_0_1")
    kept, dropped = keep_serving(spec, [unit, stray], lambda configs: {c.name for c in configs})
    assert [k.config["name"] for k in kept] == ["u"]
    assert dropped == ["w: dispatches to variant v0, not v0_x_0_1"]


def test_recorded_values_keep_their_shapes() -> None:
    # The recorded values hold for the recorded shapes only (one per element, indices
    # in range, no duplicates): the dtype and unaligned classes, which keep the
    # shapes, keep them; no ragged, half-aligned or unit class is made from it.
    permutation = [3, 0, 2, 1]
    valued = {
        **_config("t0_float16", "float16", X_0=64, IDX_0=4),
        "array_dtypes": {"idx": "int32"},
        "values": {"idx": permutation},
    }
    added = class_configs([valued], ["v0"], _keep, ["x", "idx"])
    assert {a.kind for a in added} == {"dtype", "unaligned"}
    assert all(a.config["dims"] == valued["dims"] for a in added)
    assert all(a.config["values"] == {"idx": permutation} for a in added)
    units, variants = unit_configs([valued], ["v0"], _keep, {"t0_float16"}, set())
    assert units == [] and variants == []
    # The same configuration without values gets its ragged and unit classes.
    free = {k: v for k, v in valued.items() if k != "values"}
    assert "ragged" in {a.kind for a in class_configs([free], ["v0"], _keep, ["x", "idx"])}
    assert unit_configs([free], ["v0"], _keep, {"t0_float16"}, set())[0]
