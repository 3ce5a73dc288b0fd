"""Port spec schema: valid specs resolve as documented; invalid ones fail with the
file and the field named."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas.port_spec import (
    PortSpec,
    PortSpecError,
    json_schema_text,
    load_port_spec,
    parse_port_spec,
)
from toolchain.env import REPO_ROOT

SCHEMA_FILE = REPO_ROOT / "docs" / "port-spec.schema.json"

BASE: dict[str, Any] = {
    "spec_version": 1,
    "name": "rowop",
    "source": "rowop.py",
    "kernel": "rowop_kernel",
    "reference_backend": "cutile_python",
    "launch_path": "direct",
    "arrays": {
        "x": {"rank": 2, "shape": ["M", "N"], "dtypes": ["float16", "float32"], "role": "in"},
        "y": {"rank": 2, "shape": ["M", "N"], "dtypes": ["float16", "float32"], "role": "out"},
    },
    "scalars": {"eps": {"dtype": "float32", "default": 1e-6}},
    "constants": {"TILE_N": {"type": "int", "default": "next_pow2(N)"}},
    "grid": ["M"],
    "variants": [
        {"name": "wide", "when": "N > 4096", "constants": {"TILE_N": 4096}},
        {"name": "row"},
    ],
    "test_configs": [
        {"name": "ragged", "dims": {"M": 37, "N": 1000}, "dtype": "float32"},
        {"name": "long", "dims": {"M": 4, "N": 10000}, "dtype": "float16"},
    ],
    "reference": {"function": "references:rowop", "origin": "the definition"},
    "tolerances": {
        "float32": {"atol": 1e-5, "rtol": 1.3e-6, "source": "assert_close defaults"},
        "float16": {"atol": 1e-5, "rtol": 1e-3, "source": "assert_close defaults"},
    },
}


def spec_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(PortSpecError) as caught:
        parse_port_spec(data, Path("rowop.port.yaml"))
    return caught.value.problems


def test_base_spec_resolves_per_variant() -> None:
    spec = parse_port_spec(BASE, Path("rowop.port.yaml"))
    ragged = spec.resolve(spec.test_configs[0], "test")
    assert ragged.variant == "row"
    assert ragged.constants == {"TILE_N": 1024}
    assert ragged.scalars == {"eps": pytest.approx(1e-6)}
    assert ragged.arrays["x"].shape == [37, 1000]
    assert ragged.arrays["x"].strides == [1000, 1]
    assert ragged.grid == (37, 1, 1)
    long = spec.resolve(spec.test_configs[1], "test")
    assert long.variant == "wide"
    assert long.constants == {"TILE_N": 4096}
    assert long.arrays["y"].dtype == "float16"
    assert spec.representative(spec.variants[0]).name == "long"


def test_config_binding_wins_over_variant_and_default() -> None:
    data = spec_with()
    data["test_configs"][0]["constants"] = {"TILE_N": 2048}
    spec = parse_port_spec(data, Path("x.yaml"))
    assert spec.resolve(spec.test_configs[0], "test").constants == {"TILE_N": 2048}


def test_layouts_give_strides() -> None:
    data = spec_with()
    data["arrays"]["x"].update(layout="permuted", memory_order=[1, 0])
    data["test_configs"][0]["strides"] = {"y": [1024, 1]}
    data["test_configs"][0]["storage_offsets"] = {"y": 3}
    spec = parse_port_spec(data, Path("x.yaml"))
    resolved = spec.resolve(spec.test_configs[0], "test")
    assert resolved.arrays["x"].strides == [1, 37]
    assert resolved.arrays["y"].strides == [1024, 1]
    assert resolved.arrays["y"].storage_offset == 3


def test_list_parameters_resolve_their_length() -> None:
    data = spec_with()
    data["arrays"]["x"]["list_length"] = "M // 4"
    spec = parse_port_spec(data, Path("x.yaml"))
    assert spec.resolve(spec.test_configs[0], "test").arrays["x"].list_length == 9


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"kernel": "not an identifier"}, "kernel", "pattern"),
        ({"surprise": 1}, "surprise", "Extra inputs"),
        ({"launch_path": "sometimes"}, "launch_path", "'direct' or 'autotuned'"),
        ({"grid": ["cdiv(M"]}, "grid[0]", "cannot parse"),
        ({"grid": []}, "grid", "at least 1"),
        ({"test_configs": []}, "test_configs", "at least 1"),
        ({"variants": []}, "variants", "at least 1"),
        ({"spec_version": 2}, "spec_version", "1"),
        ({"launch_path": "autotuned"}, "(top level)", "needs an autotune section"),
    ],
)
def test_bad_fields_are_named(change: dict[str, Any], field: str, message: str) -> None:
    found = problems(spec_with(**change))
    assert any(f == field and message in m for f, m in found), found


def test_nested_fields_are_named() -> None:
    data = spec_with()
    data["arrays"]["x"]["rank"] = 3
    data["arrays"]["y"]["dtypes"] = ["float17"]
    found = dict(problems(data))
    assert "shape has 2 entries but rank is 3" in found["arrays.x"]
    assert "arrays.y.dtypes[0]" in found


def test_strict_types_refuse_coercion() -> None:
    data = spec_with()
    data["test_configs"][0]["dims"] = {"M": "37", "N": 1000}
    assert "test_configs[0].dims.M" in dict(problems(data))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["test_configs"][0].update(dims={"M": 37}), "unknown name 'N'"),
        (lambda d: d["test_configs"][0].update(dtype="bfloat16"), "allows ['float16', 'float32']"),
        (lambda d: d["test_configs"][0].update(constants={"TILE_M": 4}), "undeclared"),
        (lambda d: d["test_configs"].pop(1), "no test configuration dispatches to variant 'wide'"),
        (lambda d: d["variants"][1].update(representative="long"), "representative 'long'"),
        (lambda d: d["tolerances"].pop("float16"), "no tolerance for dtype(s) ['float16']"),
        (lambda d: d["variants"][1].update(name="wide"), "used twice"),
        (lambda d: d["constants"]["TILE_N"].update(type="bool"), "declared bool"),
        (lambda d: d["constants"]["TILE_N"].pop("default"), "bound by neither"),
        (lambda d: d["scalars"]["eps"].update(dtype="int64"), "'int32', 'float32' or 'bool'"),
        (lambda d: d["test_configs"][0].update(scalars={"eps": "M"}), None),
        (lambda d: d["arrays"]["x"].update(memory_order=[1, 0]), "only meaningful"),
        (lambda d: d["arrays"]["x"].update(layout="permuted", memory_order=[0, 0]), "permutation"),
        (lambda d: d["reference"].update(function="no colon"), "pattern"),
        (lambda d: d["variants"][0].update(hints={"num_ctas": 3}), "power of two"),
        (lambda d: d["arrays"]["x"].update(init={"kind": "randint", "low": 0}), "low and high"),
        (lambda d: d.update(grid=["M - 100"]), "below 1"),
        (
            lambda d: d.update(autotune={"key": ["N"], "space": [{"constants": {"TILE": 8}}]}),
            "autotune.space[0] binds undeclared name(s) ['TILE']",
        ),
    ],
)
def test_inconsistent_specs_fail(mutate: Any, message: str | None) -> None:
    data = spec_with()
    mutate(data)
    if message is None:  # a float scalar may be any numeric expression
        parse_port_spec(data, Path("x.yaml"))
        return
    text = " | ".join(m for _, m in problems(data))
    assert message in text, text


def test_scalar_int32_range_is_checked() -> None:
    data = spec_with()
    data["scalars"] = {"seed": {"dtype": "int32", "default": 2**31}}
    text = " | ".join(m for _, m in problems(data))
    assert "does not fit int32" in text


def test_yaml_loader_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.port.yaml"
    path.write_text("name: a\narrays: {x: [1, 2\n")
    with pytest.raises(PortSpecError) as caught:
        load_port_spec(path)
    assert str(path) in str(caught.value)
    assert caught.value.problems[0][0].startswith("line ")


def test_yaml_duplicate_keys_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "dup.port.yaml"
    path.write_text(yaml.safe_dump(BASE) + "kernel: other\n")
    with pytest.raises(PortSpecError, match="appears twice"):
        load_port_spec(path)


def test_yaml_exponent_floats_are_floats(tmp_path: Path) -> None:
    path = tmp_path / "ok.port.yaml"
    text = yaml.safe_dump(BASE).replace("1.0e-06", "1e-6")
    assert "1e-6" in text
    path.write_text(text)
    spec = load_port_spec(path)
    assert spec.scalars["eps"].default == pytest.approx(1e-6)


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(PortSpecError, match="No such file"):
        load_port_spec(tmp_path / "absent.port.yaml")


def test_models_are_frozen() -> None:
    spec = parse_port_spec(BASE, Path("x.yaml"))
    with pytest.raises(ValueError):
        spec.name = "other"  # type: ignore[misc]


def test_committed_json_schema_is_current() -> None:
    assert SCHEMA_FILE.read_text() == json_schema_text(), (
        "docs/port-spec.schema.json is stale: run "
        "`python -m schemas.port_spec --json-schema > docs/port-spec.schema.json`"
    )


def test_json_schema_command_and_check() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "schemas.port_spec", "--json-schema"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=True,
    )
    schema = json.loads(done.stdout)
    assert schema["title"] == "PortSpec"
    assert set(schema["required"]) >= {"kernel", "arrays", "variants", "test_configs"}
    bad = subprocess.run(
        [sys.executable, "-m", "schemas.port_spec", "--check", str(SCHEMA_FILE)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert bad.returncode == 1 and "invalid port spec" in bad.stderr


def test_every_field_is_documented() -> None:
    schema = PortSpec.model_json_schema()
    bodies = {"PortSpec": schema, **schema["$defs"]}
    resolved = {"ResolvedArray", "ResolvedConfig"}  # computed, never written in a spec
    undocumented = [
        f"{model}.{name}"
        for model, body in bodies.items()
        if model not in resolved
        for name, prop in body.get("properties", {}).items()
        if "description" not in prop
    ]
    assert undocumented == []


def test_block_scales_are_a_dtype_with_positive_inputs() -> None:
    """float8_e8m0fnu (the MX formats' power-of-two scales) is a spec dtype with its
    ABI code and cutile element type; its test inputs are drawn positive (it has
    no sign and no zero)."""
    from nodes.host_builder.abi import RUST_ELEMENT_TYPES, DType

    arrays = copy.deepcopy(BASE["arrays"])
    arrays["scales"] = {"rank": 1, "shape": ["M"], "dtypes": ["float8_e8m0fnu"], "role": "in"}
    spec = PortSpec.model_validate(spec_with(arrays=arrays))
    init = spec.arrays["scales"].default_init("float8_e8m0fnu")
    assert init.kind == "uniform" and float(init.low or 0) > 0
    assert RUST_ELEMENT_TYPES[DType.from_spec_name("float8_e8m0fnu")] == "f8e8m0fnu"


@pytest.mark.parametrize(
    ("dtype", "reason"),
    [
        ("float4_e2m1fn", "a uint8 array of half the length"),
        ("float8_e5m3fnu", "only at bytecode 13.4 for sm_107 and later"),
    ],
)
def test_dtypes_no_port_can_have_are_refused_with_why(dtype: str, reason: str) -> None:
    """cuTile Python's float4_e2m1fn (no launch takes an array of it) and
    float8_e5m3fnu (bytecode 13.4, sm_107) are refused wherever a spec names a dtype,
    each with why rather than the list of the names a spec may use."""
    arrays = copy.deepcopy(BASE["arrays"])
    arrays["q"] = {"rank": 1, "shape": ["M"], "dtypes": [dtype], "role": "in"}
    tolerances = {**BASE["tolerances"], dtype: {"atol": 0, "rtol": 0, "source": "exact"}}
    found = dict(problems(spec_with(arrays=arrays, tolerances=tolerances)))
    assert set(found) == {"arrays.q.dtypes[0]", f"tolerances.{dtype}"}
    assert all(message.startswith(f"{dtype} is not a spec dtype") for message in found.values())
    assert all(reason in message for message in found.values())


def _with_index(values: dict[str, Any]) -> dict[str, Any]:
    """BASE with an int32 index and a bool mask over x's rows, the first
    configuration (M = 37) giving `values`."""
    data = spec_with()
    data["arrays"]["idx"] = {"rank": 1, "shape": ["M"], "dtypes": ["int32"], "role": "in"}
    data["arrays"]["keep"] = {"rank": 1, "shape": ["M"], "dtypes": ["bool"], "role": "in"}
    data["test_configs"][0]["values"] = values
    return data


def test_fixed_values_resolve_with_their_configuration() -> None:
    permutation = list(reversed(range(37)))
    mask = [row % 3 == 0 for row in range(37)]
    spec = parse_port_spec(_with_index({"idx": permutation, "keep": mask}), Path("rowop.port.yaml"))
    ragged, long = (spec.resolve(c, "test") for c in spec.test_configs)
    assert ragged.values == {"idx": permutation, "keep": mask}
    assert long.values == {}  # another configuration draws its arrays


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"idx": list(range(36))}, "36 values for shape [37] (37 elements)"),
        ({"x": [0] * 37 * 1000}, "is float32: values are given for integer and bool arrays"),
        ({"y": [0] * 37}, "'y', which is not an input array"),
        ({"z": [0] * 37}, "binds undeclared name(s) ['z']"),
        ({"idx": [2**31, *range(36)]}, "2147483648 is not a value of int32"),
        ({"keep": [1] * 37}, "is bool: its values are true or false"),
        ({"idx": [True] * 37}, "True is not a value of int32"),
    ],
)
def test_fixed_values_that_do_not_fit_their_array_are_refused(
    values: dict[str, Any], message: str
) -> None:
    text = " | ".join(m for _, m in problems(_with_index(values)))
    assert message in text, text
