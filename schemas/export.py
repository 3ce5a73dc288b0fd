"""Requests and results of the Rust-side Tile IR export (`tileport-rs-export`).

Mirrors `kernels_rs/tileir-export/src/request.rs`; the two are checked against
each other by the exporter tests."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TensorFacts(BaseModel):
    """What a launch knows about one tensor argument, as cuTile records it.
    Shape and stride divisibility are in elements, the base pointer's in bytes."""

    shape_div: list[int]
    stride_div: list[int]
    stride_one: list[bool]
    base_ptr_div: int = 16
    elements_disjoint: bool = True


class Hints(BaseModel):
    occupancy: int | None = None
    num_cta_in_cga: int | None = None
    num_worker_warps_per_cta: int | None = None


class RustExportRequest(BaseModel):
    source: str = Field(description="Rust file holding a #[cutile::module] mod.")
    module: str | None = None
    kernel: str
    generics: list[str] = Field(default_factory=list)
    strides: dict[str, list[int]] = Field(default_factory=dict)
    spec_args: dict[str, TensorFacts] = Field(default_factory=dict)
    scalar_hints: dict[str, int] = Field(default_factory=dict)
    grid: tuple[int, int, int] | None = None
    hints: Hints = Field(default_factory=Hints)
    target: str = "sm_90"
    bytecode_version: str = "13.3"
    bytecode_out: str | None = None
    ir_out: str | None = None


class RustExportResponse(BaseModel):
    ok: bool
    error_kind: str | None = None
    error: str | None = None
    ir_text: str | None = None
    bytecode_out: str | None = None
    elapsed_ms: float = 0.0
