"""Tile IR types as cutile-rs types.

A Tile IR integer type has no sign; cutile-rs infers the signedness of
`cmpi`, `divi`, `exti` ... from the Rust element type, so every integer value
carries a sign chosen by `elements.infer_elements`. Shapes are kept as text so
that const generics (`TILE_N`) can stand in for dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.port_spec import ITEMSIZE
from tileir.types import TileType, parse_tile

FLOAT_ELEMENTS = {
    "f16": "f16",
    "bf16": "bf16",
    "f32": "f32",
    "f64": "f64",
    "tf32": "tf32",
    "f8E4M3FN": "f8e4m3fn",
    "f8E5M2": "f8e5m2",
    "f8E8M0FNU": "f8e8m0fnu",
    "f4E2M1FN": "f4e2m1fn",
}
SIGNED_INTS = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64"}
UNSIGNED_INTS = {"i8": "u8", "i16": "u16", "i32": "u32", "i64": "u64"}
DTYPE_ELEMENTS = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "tfloat32": "tf32",
    "float8_e4m3fn": "f8e4m3fn",
    "float8_e5m2": "f8e5m2",
    "float8_e8m0fnu": "f8e8m0fnu",
}

# Bytes per element of every dtype an array (and so a dtype generic `E`) can have:
# the port spec's own table.
DTYPE_BYTES = ITEMSIZE
# The const generic spelling `E`'s size where the IR states it (a gathered
# pointer's alignment).
ELEMENT_BYTES_GENERIC = "E_BYTES"


def is_integer(ir_element: str) -> bool:
    return ir_element in SIGNED_INTS


def is_float(ir_element: str) -> bool:
    return ir_element in FLOAT_ELEMENTS


def rust_element(ir_element: str, unsigned: bool = False) -> str:
    """`f32` -> `f32`, `i1` -> `bool`, `i64` -> `i64` or `u64`."""
    if ir_element == "i1":
        return "bool"
    if ir_element in SIGNED_INTS:
        return UNSIGNED_INTS[ir_element] if unsigned else SIGNED_INTS[ir_element]
    if ir_element in FLOAT_ELEMENTS:
        return FLOAT_ELEMENTS[ir_element]
    raise ValueError(f"no Rust element type for {ir_element}")


def shape_braces(dims: tuple[str, ...] | list[str]) -> str:
    """`("1", "TILE_N")` -> `{ [1, TILE_N] }`."""
    return "{ [" + ", ".join(dims) + "] }"


def shape_macro(dims: tuple[str, ...] | list[str]) -> str:
    return "shape![" + ", ".join(dims) + "]"


@dataclass(frozen=True)
class TileInfo:
    """An IR tile type split for Rust: element, shape, pointer-ness."""

    element: str  # IR element, e.g. f32, i32, i1; for pointer tiles the pointee
    dims: tuple[str, ...]
    pointer: bool

    @property
    def rank(self) -> int:
        return len(self.dims)


def tile_info(type_text: str) -> TileInfo | None:
    tile: TileType | None = parse_tile(type_text)
    if tile is None:
        return None
    if tile.is_pointer:
        pointee = tile.element[len("ptr<") : -1]
        return TileInfo(pointee, tile.shape, True)
    return TileInfo(tile.element, tile.shape, False)
