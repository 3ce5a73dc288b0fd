"""Reading `cuda_tile` type text: tiles, tensor views and partition views."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tileir import attrs

_TILE_SHAPE = re.compile(r"tile=\(([^)]*)\)")
_PADDING = re.compile(r"padding_value\s*=\s*([A-Za-z_]+)")
_DIM_MAP = re.compile(r"dim_map\s*=\s*\[([^\]]*)\]")
_TENSOR_VIEW = re.compile(r"tensor_view<.*?strides=\[[^\]]*\]>")
_TRAVERSAL_STRIDES = re.compile(r"traversal_strides\s*=\s*\[([^\]]*)\]")
_SPARSE_DIM = re.compile(r"sparse_dim\s*=\s*(\d+)")


@dataclass(frozen=True)
class TileType:
    shape: tuple[str, ...]
    element: str

    @property
    def is_pointer(self) -> bool:
        return self.element.startswith("ptr<")

    @property
    def shape_text(self) -> str:
        return "x".join(self.shape) if self.shape else "scalar"


@dataclass(frozen=True)
class TensorViewType:
    shape: tuple[str, ...]
    element: str
    strides: tuple[str, ...]


@dataclass(frozen=True)
class ViewType:
    """A partition, strided or gather/scatter view: how a memory op sees memory."""

    kind: str
    tile_shape: tuple[str, ...]
    padding: str
    dim_map: str
    tensor_view: TensorViewType | None
    # A strided view's step between tile origins per axis; () for other views.
    traversal_strides: tuple[str, ...] = ()
    # A gather/scatter view's axis indexed by a tile of indices; None for other views.
    sparse_dim: int | None = None


def parse_tile(text: str) -> TileType | None:
    name, inner = attrs.split_angle(text)
    if name != "tile":
        return None
    return TileType(*_shape_and_element(inner))


def _shape_and_element(inner: str) -> tuple[tuple[str, ...], str]:
    """`1x1024xf32` -> (("1", "1024"), "f32"); `ptr<f32>` -> ((), "ptr<f32>");
    `4xptr<f16>` -> (("4",), "ptr<f16>")."""
    pointer = inner.find("ptr<")
    if pointer >= 0:
        dims = inner[:pointer].rstrip("x")
        return (tuple(dims.split("x")) if dims else ()), inner[pointer:]
    parts = inner.split("x")
    return tuple(parts[:-1]), parts[-1]


def parse_tensor_view(text: str) -> TensorViewType | None:
    name, inner = attrs.split_angle(text)
    if name != "tensor_view":
        return None
    layout, _, strides = inner.partition(",")
    shape, element = _shape_and_element(layout.strip())
    stride_text = strides.strip().removeprefix("strides=").strip("[] ")
    return TensorViewType(shape, element, tuple(s.strip() for s in stride_text.split(",")))


def parse_view(text: str) -> ViewType | None:
    name, inner = attrs.split_angle(text)
    if not name.endswith("_view") or name == "tensor_view":
        return None
    tile = _TILE_SHAPE.search(inner)
    padding = _PADDING.search(inner)
    dim_map = _DIM_MAP.search(inner)
    tensor = _TENSOR_VIEW.search(inner)
    strides = _TRAVERSAL_STRIDES.search(inner)
    sparse_dim = _SPARSE_DIM.search(inner)
    return ViewType(
        kind=name,
        tile_shape=tuple(tile.group(1).split("x")) if tile else (),
        padding=padding.group(1) if padding else "none",
        dim_map=dim_map.group(1).replace(" ", "") if dim_map else "identity",
        tensor_view=parse_tensor_view(tensor.group(0)) if tensor else None,
        traversal_strides=tuple(d.strip() for d in strides.group(1).split(",")) if strides else (),
        sparse_dim=int(sparse_dim.group(1)) if sparse_dim else None,
    )


def is_pointer_type(text: str) -> bool:
    tile = parse_tile(text)
    return tile is not None and tile.is_pointer
