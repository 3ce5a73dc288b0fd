"""Launches recorded on a GPU host by intercepting `cuda.tile.launch`.

A record holds what cuTile specialises on at launch: the kernel, the grid, the
constants, the scalars and, for each array argument, its dtype, shape, strides
(in elements) and the alignment of its base address. That is enough to redo the
reference export on a machine without a GPU (`nodes.analyzer.capture`).
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.port_spec import DTypeName


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapturedArray(_Strict):
    dtype: DTypeName
    shape: list[int] = Field(description="Extents; every entry >= 0.")
    strides: list[int] = Field(description="In elements, as the launch saw them.")
    base_addr_divisible_by: int = Field(
        ge=1, description="The largest power of two (at most 16) dividing the base address."
    )
    list_length: int | None = Field(
        None, ge=0, description="Set for a list of arrays; the facts are its first element's."
    )

    @model_validator(mode="after")
    def _rank_agrees(self) -> Self:
        if len(self.shape) != len(self.strides):
            raise ValueError(f"shape {self.shape} and strides {self.strides} differ in rank")
        if any(extent < 0 for extent in self.shape):
            raise ValueError(f"negative extent in shape {self.shape}")
        return self


class CapturedScalar(_Strict):
    dtype: DTypeName = Field(description="The type cuTile gives the Python value.")
    value: bool | int | float


class CapturedLaunch(_Strict):
    kernel: str = Field(min_length=1, description="The @ct.kernel function's name.")
    grid: tuple[int, int, int]
    arrays: dict[str, CapturedArray] = Field(default_factory=dict)
    constants: dict[str, bool | int | float] = Field(default_factory=dict)
    scalars: dict[str, CapturedScalar] = Field(default_factory=dict)
    hints: dict[str, int] = Field(
        default_factory=dict, description="num_ctas / occupancy / num_worker_warps set on it."
    )
    parameters: list[str] = Field(description="The kernel's parameters, in order.")

    @model_validator(mode="after")
    def _every_parameter_once(self) -> Self:
        seen = [*self.arrays, *self.constants, *self.scalars]
        if sorted(seen) != sorted(self.parameters):
            raise ValueError(f"captured {sorted(seen)} for parameters {self.parameters}")
        return self
