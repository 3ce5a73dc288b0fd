"""The correctness harness gives an array whose values a configuration fixes
(`values`: indices recorded at launch) exactly those values, the same to the
reference and the port, under every seed; the other inputs are still drawn.

`make_arrays` takes torch as an argument; where torch is not installed, a stand-in
over numpy that has the few calls it makes for these arrays runs it, and with torch
the same test runs on torch's CPU tensors."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from nodes.correctness.harness import make_arrays
from schemas.port_spec import load_port_spec

SPEC = (
    Path(__file__).parents[1]
    / "kernel_writer"
    / "fixtures"
    / "kernels"
    / "scatter_rows_by_index.port.yaml"
)


class _DType:
    def __init__(self, name: str) -> None:
        self.np = np.dtype(name)
        self.is_floating_point = self.np.kind == "f"


class _Tensor:
    """A numpy array with the torch tensor methods `make_arrays` calls."""

    device = "cpu"

    def __init__(self, array: np.ndarray, dtype: _DType) -> None:
        self.array = array
        self.dtype = dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def as_strided(self, shape: list[int], strides: list[int], offset: int) -> _Tensor:
        size = self.array.itemsize
        view = np.lib.stride_tricks.as_strided(
            self.array[offset:], shape=shape, strides=[s * size for s in strides]
        )
        return _Tensor(view, self.dtype)

    def reshape(self, shape: tuple[int, ...]) -> _Tensor:
        return _Tensor(self.array.reshape(shape), self.dtype)

    def to(self, dtype: _DType) -> _Tensor:
        return _Tensor(self.array.astype(dtype.np), dtype)

    def copy_(self, other: _Tensor) -> None:
        np.copyto(self.array, other.array.astype(self.array.dtype))

    def fill_(self, value: float) -> None:
        self.array[...] = value

    def tolist(self) -> Any:
        return self.array.tolist()


class _Generator:
    def __init__(self, device: str) -> None:
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)


def _numpy_torch() -> Any:
    dtypes = {name: _DType(name) for name in ("float32", "int32", "int64", "bool")}

    def empty(count: int, dtype: _DType, device: str) -> _Tensor:
        return _Tensor(np.empty(count, dtype.np), dtype)

    def tensor(values: list[Any], dtype: _DType, device: str) -> _Tensor:
        return _Tensor(np.array(values, dtype.np), dtype)

    def randn(shape: tuple[int, ...], generator: _Generator, device: str) -> _Tensor:
        drawn = generator.rng.standard_normal(shape).astype(np.float32)
        return _Tensor(drawn, dtypes["float32"])

    def randint(
        low: int, high: int, shape: tuple[int, ...], generator: _Generator, device: str
    ) -> _Tensor:
        return _Tensor(generator.rng.integers(low, high, shape), dtypes["int64"])

    def iinfo(dtype: _DType) -> Any:
        return np.iinfo(dtype.np)

    return SimpleNamespace(
        **dtypes,
        Generator=_Generator,
        empty=empty,
        tensor=tensor,
        randn=randn,
        randint=randint,
        iinfo=iinfo,
    )


@pytest.fixture(params=["numpy", "torch"])
def backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "torch":
        return pytest.importorskip("torch", reason="torch is not installed here")
    return _numpy_torch()


def test_fixed_values_are_what_both_sides_receive(backend: Any) -> None:
    spec = load_port_spec(SPEC)
    order = list(spec.arrays)
    for config in spec.test_configs:
        resolved = spec.resolve(config, "test")
        recorded = config.values["index"]
        cases = [make_arrays(backend, spec, resolved, seed, "cpu") for seed in (0, 1)]
        for arrays in cases:
            port = dict(zip(order, arrays.port_arrays(order), strict=True))
            kernel = dict(zip(order, arrays.kernel_arrays(order), strict=True))
            assert port["index"] is kernel["index"]
            assert port["index"].tolist() == recorded
            assert all(math.isnan(v) for row in port["out"].tolist() for v in row)
        # Every seed gives the same index, and draws x anew.
        assert cases[0].inputs["x"].tolist() != cases[1].inputs["x"].tolist()


def test_fixed_values_fill_a_view_in_order(backend: Any) -> None:
    spec = load_port_spec(SPEC)
    config = spec.test_configs[0].model_copy(update={"storage_offsets": {"index": 1}})
    resolved = spec.resolve(config, "test")
    arrays = make_arrays(backend, spec, resolved, 0, "cpu")
    assert arrays.inputs["index"].tolist() == config.values["index"]
    # Without values the same array is drawn (randint(0, 16)): not the recorded ones.
    drawn = spec.resolve(config.model_copy(update={"values": {}}), "test")
    again = make_arrays(backend, spec, drawn, 0, "cpu")
    assert again.inputs["index"].tolist() != config.values["index"]
