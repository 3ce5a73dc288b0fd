"""The corpus itself: enough kernels, each with a valid port spec, a reference
function that exists, ragged test shapes, and no imports beyond cuda.tile and
math."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from schemas.port_spec import PortSpec, load_port_spec, spec_relative
from toolchain.env import REPO_ROOT
from toolchain.reference_export import launch_facts

CORPUS = REPO_ROOT / "examples" / "kernels"
SPECS = sorted(CORPUS.glob("*.port.yaml"))
KERNEL_FILES = sorted(p for p in CORPUS.glob("*.py") if p.name != "references.py")

FAMILIES = {
    "vector_add",
    "scaled_gelu",
    "masked_softshrink",
    "softmax",
    "online_softmax",
    "rmsnorm",
    "layernorm",
    "silu_and_mul",
    "swiglu",
    "matmul",
    "batched_matmul",
    "persistent_matmul",
    "transpose",
    "embedding_gather",
    "rotary",
    "attention_decode",
    "column_sum_atomic",
}


def _spec(path: Path) -> PortSpec:
    return load_port_spec(path)


def test_at_least_sixteen_kernels_covering_the_families() -> None:
    names = {p.name.removesuffix(".port.yaml") for p in SPECS}
    assert len(names) >= 16
    assert names >= FAMILIES


def test_every_kernel_file_has_a_spec() -> None:
    assert {p.stem for p in KERNEL_FILES} == {p.name.removesuffix(".port.yaml") for p in SPECS}


@pytest.mark.parametrize("path", KERNEL_FILES, ids=[p.stem for p in KERNEL_FILES])
def test_kernels_import_only_cuda_tile_and_math(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= {"cuda.tile", "math"}, imported


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_spec_names_a_real_kernel_and_reference(path: Path) -> None:
    spec = _spec(path)
    source = ast.parse(spec_relative(path, spec.source).read_text())
    kernels = {
        node.name
        for node in source.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) == "ct.kernel" for d in node.decorator_list)
    }
    assert spec.kernel in kernels
    kernel_def = next(
        n for n in source.body if isinstance(n, ast.FunctionDef) and n.name == spec.kernel
    )
    params = [a.arg for a in kernel_def.args.args]
    assert sorted(params) == sorted([*spec.arrays, *spec.scalars, *spec.constants])
    module, function = spec.reference.function.split(":")
    references = ast.parse(spec_relative(path, f"{module}.py").read_text())
    defined = {n.name: n for n in references.body if isinstance(n, ast.FunctionDef)}
    assert function in defined
    ref_params = {a.arg for a in defined[function].args.args}
    inputs = {n for n, a in spec.arrays.items() if a.role != "out"} | set(spec.scalars)
    assert ref_params == inputs | set(spec.reference.pass_constants)


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_tests_include_a_ragged_shape(path: Path) -> None:
    """Some test configuration has an array extent a launch cannot call divisible by 16."""
    spec = _spec(path)
    ragged = [
        config.name
        for config in spec.test_configs
        for array in spec.resolve(config, "test").arrays.values()
        if 1 in launch_facts(array).shape_divisible_by
    ]
    assert ragged, "no test configuration has a ragged extent"


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_perf_configs_exist_and_resolve(path: Path) -> None:
    spec = _spec(path)
    assert spec.perf_configs
    for config in spec.perf_configs:
        spec.resolve(config, "perf")


def test_softmax_is_the_hand_port_reference() -> None:
    spec = _spec(CORPUS / "softmax.port.yaml")
    assert spec.kernel == "softmax_kernel"
    assert list(spec.arrays) == ["x", "y"] and list(spec.constants) == ["TILE_N"]
    text = (CORPUS / "softmax.py").read_text()
    assert "padding_mode=ct.PaddingMode.NEG_INF" in text and "ct.float32" in text
