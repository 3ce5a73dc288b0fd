"""Signatures and their mangled symbols, shaped like `cuda.tile.compilation`."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class CallingConvention:
    name: str
    code: str

    @staticmethod
    def cutile_python_v1() -> CallingConvention:
        return CallingConvention("cutile_python_v1", "t1")

    @staticmethod
    def cutile_python_v2() -> CallingConvention:
        return CallingConvention("cutile_python_v2", "t2")


@dataclasses.dataclass(frozen=True)
class ArrayConstraint:
    dtype: str
    ndim: int
    shape_constant: tuple[int | None, ...]


@dataclasses.dataclass(eq=True)
class ScalarConstraint:
    """Unhashable, like cuTile's constant constraints."""

    dtype: str


@dataclasses.dataclass(frozen=True)
class KernelSignature:
    parameters: tuple[Any, ...]
    calling_convention: CallingConvention
    symbol: str | None = None

    def with_mangled_symbol(self, name: str) -> KernelSignature:
        parts = [f"{name}_K{self.calling_convention.code}"]
        for p in self.parameters:
            if isinstance(p, ArrayConstraint):
                shape = "".join("s1" if c == 1 else "" for c in p.shape_constant)
                parts.append(f"A{p.ndim}{p.dtype}{shape}")
            else:
                parts.append(f"S{p.dtype}")
        return dataclasses.replace(self, symbol="_".join(parts))
