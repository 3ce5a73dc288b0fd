"""The wrapper tileport writes into TileGym packs a tensor's descriptor in one cffi
call; it must hold what TileGym's own `make_tensor_desc` packs field by field (real
cffi, TileGym's unmodified packer read from its source, tensors stood in for: no
torch here), and leave to TileGym's packer whatever that one refuses."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

from nodes.tilegym_backend.op_source import HostCode
from nodes.tilegym_backend.wrapper_py import PortFfi, render_wrapper
from toolchain.env import REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
UTILS = TILEGYM / "src/tilegym/backend/cutile_rs/utils.py"
pytestmark = pytest.mark.skipif(not UTILS.is_file(), reason="no TileGym beside the checkout")


class FakeTensor:
    """What the packers read of a torch.Tensor."""

    def __init__(self, dtype: str, shape: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self.dtype = _Dtype(dtype)
        self.shape = shape
        self._stride = stride
        self.is_cuda = True
        self.device = "cpu"  # named in the refusal of a host tensor

    def data_ptr(self) -> int:
        return 0x7F00_0000_1000

    def dim(self) -> int:
        return len(self.shape)

    def stride(self, axis: int | None = None) -> Any:
        return self._stride if axis is None else self._stride[axis]


class _Dtype(str):
    """A dtype whose str() is torch's spelling (`torch.float16`)."""

    def __str__(self) -> str:
        return f"torch.{str.__str__(self)}"


def _namespace(source: str, names: set[str]) -> dict[str, Any]:
    """The top-level definitions `names` of `source`, executed on their own."""
    tree = ast.parse(source)
    kept = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name in names)
        or (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id in names
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        )
    ]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=kept, type_ignores=[]), "<defs>", "exec"), namespace)
    return namespace


def _fields(desc: Any) -> tuple[Any, ...]:
    return (desc.ptr, desc.ndim, list(desc.shape), list(desc.strides), desc.dtype)


def test_one_call_packs_what_make_tensor_desc_packs() -> None:
    tilegym = _namespace(
        UTILS.read_text(),
        {"_DTYPE_CODE", "_TENSORDESC_MAX_DIMS", "_TENSORDESC_CDEF", "make_tensor_desc"},
    )
    port = PortFfi("_k", "cutile_k", (("x", "tensor"),), None, None)
    wrapper = render_wrapper("k", "k.py", HostCode(imports=[], body="", kernels=["_k"]), [port])
    ours = _namespace(wrapper, {"_DESCRIPTOR_CODES", "_descriptor"})
    ours["make_tensor_desc"] = tilegym["make_tensor_desc"]
    ffi = FFI()
    ffi.cdef(tilegym["_TENSORDESC_CDEF"])
    tensors = [
        FakeTensor("float16", (3, 5), (5, 1)),
        FakeTensor("float16", (7, 2, 9), (1, 63, 7)),  # strided, now from the one call
        FakeTensor("bfloat16", (), ()),
        FakeTensor("int64", (1, 1, 1, 1, 4), (4, 4, 4, 4, 1)),
    ]
    for tensor in tensors + tensors:  # the first of a dtype goes through TileGym's
        assert _fields(ours["_descriptor"](ffi, tensor)) == _fields(
            tilegym["make_tensor_desc"](ffi, tensor)
        )
    assert set(ours["_DESCRIPTOR_CODES"]) == {"float16", "bfloat16", "int64"}
    # What TileGym's packer refuses, the wrapper refuses the same way.
    with pytest.raises(ValueError, match="<= 5 dims"):
        ours["_descriptor"](ffi, FakeTensor("float16", (1,) * 6, (1,) * 6))
    host = FakeTensor("float16", (3,), (1,))
    host.is_cuda = False
    with pytest.raises(ValueError, match="requires a CUDA tensor"):
        ours["_descriptor"](ffi, host)
