"""The vector kernel the lifter tests wrap their IR in: `%t` is x's loaded
64xf32 tile, `%bx` the block id, `%arg0` x's base pointer; the value given is
stored to y."""

from __future__ import annotations

from nodes.kernel_writer.lifter import Lifter, ParamLayout
from tileir.mlir import parse_module

VEC = "tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>"
HEADER = (
    f"entry @k(%arg0: {VEC}, %arg3: tile<ptr<f32>>, %arg4: tile<i32>, %arg5: tile<i32>) "
    "optimization_hints=<default = {}> {\n"
    "  %0 = make_token : token\n"
    "  %tv = make_tensor_view %arg0, shape = [%arg1], strides = [1] : tile<i32> -> "
    "tensor_view<?xf32, strides=[1]>\n"
    "  %tv2 = make_tensor_view %arg3, shape = [%arg4], strides = [1] : tile<i32> -> "
    "tensor_view<?xf32, strides=[1]>\n"
    "  %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
    "  %pv = make_partition_view %tv : partition_view<tile=(64), padding_value = zero, "
    "tensor_view<?xf32, strides=[1]>>\n"
    "  %t, %tok = load_view_tko weak %pv[%bx] token = %0 : partition_view<tile=(64), "
    "padding_value = zero, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<64xf32>, token\n"
)
STORE = (
    "  %pv2 = make_partition_view %tv2 : partition_view<tile=(64), tensor_view<?xf32, "
    "strides=[1]>>\n"
    "  %s = store_view_tko weak {value}, %pv2[%bx] token = %0 : tile<64xf32>, "
    "partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token\n"
    "  return\n}}\n"
)
PARAMS = [ParamLayout("x", "array", "float32", 1), ParamLayout("y", "array", "float32", 1)]


def lift(body: str, value: str, params: list[ParamLayout] | None = None) -> list[str]:
    text = HEADER + body + STORE.format(value=value)
    module = parse_module(text)
    return Lifter(module.entries[0], params or PARAMS, "k").lift().body
