"""The wrapper tileport writes into TileGym packs each launch into the words its
port's symbol reads, a tensor part by part (address, dtype code, extents, strides):
the parts must be what TileGym's own `make_tensor_desc` packs, the constants and
grid what `ct.launch` was given. Checked through real cffi against a C function of
the symbol's declaration that keeps the words it received (TileGym's unmodified
packer read from its source, tensors stood in for: no torch or GPU here)."""

from __future__ import annotations

import ast
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

from nodes.host_builder.tilegym_wrapper import PortFfi, render_wrapper
from toolchain.env import REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
UTILS = TILEGYM / "src/tilegym/backend/cutile_rs/utils.py"
pytestmark = [
    pytest.mark.skipif(not UTILS.is_file(), reason="no TileGym beside the checkout"),
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler"),
]


class FakeTensor:
    """What the packers read of a torch.Tensor."""

    def __init__(self, dtype: str, shape: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self.dtype = _Dtype(dtype)
        self.shape = shape
        self._stride = stride
        self.is_cuda = True
        self.device = "cuda:1"
        self.ordinal = 1

    def get_device(self) -> int:
        return self.ordinal if self.is_cuda else -1

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


def _namespace(source: str, names: set[str], given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The top-level definitions `names` of `source`, executed beside `given` only."""
    tree = ast.parse(source)
    kept = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names)
        or (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id in names
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        )
    ]
    namespace: dict[str, Any] = dict(given or {})
    exec(compile(ast.Module(body=kept, type_ignores=[]), "<defs>", "exec"), namespace)
    return namespace


def _parts(desc: Any) -> list[int]:
    """A packed descriptor as the symbol takes it: address, dtype, extents, strides."""
    rank = desc.ndim
    return [desc.ptr, desc.dtype, *desc.shape[0:rank], *desc.strides[0:rank]]


PORT = PortFfi(
    kernel="_k",
    symbol="cutile_k",
    parameters=(("x", "tensor"), ("N", "int64_t"), ("eps", "double"), ("y", "tensor")),
    ranks=(("x", 2), ("y", 1)),
)
SYMBOL_WORDS = 17  # x: 2 + 2 + 2, N, eps, y: 2 + 1 + 1, grid 3, device, stream


class _Recording:
    """The generated module's launch functions over a C `cutile_k` that keeps the
    words it was passed (read back as int64, eps as the double its word holds) and
    returns the rc it is told."""

    def __init__(self, tmp_path: Path) -> None:
        self.tilegym = _namespace(
            UTILS.read_text(),
            {
                "_DTYPE_CODE",
                "_TENSORDESC_MAX_DIMS",
                "_TENSORDESC_CDEF",
                "make_tensor_desc",
                "check_rc",
                "_RC_MESSAGES",
            },
        )
        cdef = PORT.cdef()
        assert cdef == "int32_t cutile_k(const char *launch);"
        source = tmp_path / "k.c"
        source.write_text(
            "#include <stdint.h>\n#include <string.h>\n"
            "int64_t seen[32]; int32_t next_rc;\n"
            "int32_t cutile_k(const char *launch) {\n"
            f"    memcpy(seen, launch, {SYMBOL_WORDS} * 8);\n"
            "    return next_rc;\n}\n"
        )
        library = tmp_path / "libk.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", library, source], check=True)
        ffi = FFI()
        ffi.cdef(
            self.tilegym["_TENSORDESC_CDEF"]
            + cdef
            + "\nextern int64_t seen[32]; extern int32_t next_rc;"
        )
        self.lib = ffi.dlopen(str(library))
        wrapper = render_wrapper("k", "k.py", [], "", [PORT])
        self.module = _namespace(
            wrapper,
            {
                "_KERNEL",
                "_FFI_CDEF",
                "_CUTILE_K_WORDS",
                "_DTYPE_CODES",
                "_learn_dtype_codes",
                "_Library",
                "_LIBRARY",
                "_k",
                "_launch",
            },
            {"struct": struct},
        )
        self.module["bind_kernel_function_cffi"] = lambda kernel, cdef: (ffi, self.lib)
        self.module["make_tensor_desc"] = self.tilegym["make_tensor_desc"]
        self.module["check_rc"] = self.tilegym["check_rc"]
        self.ffi = ffi

    def launch(self, *args: Any, grid: tuple[int, ...] = (4,), stream: Any = 77) -> list[int]:
        self.module["_launch"](stream, grid, self.module["_k"], args)
        return list(self.lib.seen[0:SYMBOL_WORDS])


def _double(word: int) -> float:
    """The double an int64 word holds."""
    return float(struct.unpack("<d", struct.pack("<q", word))[0])


def test_each_tensor_crosses_as_make_tensor_desc_packs_it(tmp_path: Path) -> None:
    recording = _Recording(tmp_path)
    cases = [
        (FakeTensor("float16", (3, 5), (5, 1)), FakeTensor("float32", (5,), (1,))),
        (FakeTensor("bfloat16", (7, 9), (1, 7)), FakeTensor("float32", (9,), (2,))),  # strided
        (FakeTensor("float16", (1, 1), (1, 1)), FakeTensor("int64", (1,), (1,))),
    ]
    for x, y in cases + cases:  # the first of a dtype goes through TileGym's packer
        seen = recording.launch(x, 1000, 1e-5, y, grid=(4, 2))
        ffi = recording.ffi
        desc_x = recording.tilegym["make_tensor_desc"](ffi, x)
        desc_y = recording.tilegym["make_tensor_desc"](ffi, y)
        assert seen[0:6] == _parts(desc_x)
        assert seen[6] == 1000 and _double(seen[7]) == 1e-5
        assert seen[8:12] == _parts(desc_y)
        # The grid padded to three, x's device, the stream.
        assert seen[12:] == [4, 2, 1, 1, 77]
    assert set(recording.module["_DTYPE_CODES"]) == {"float16", "bfloat16", "float32", "int64"}


def test_what_the_port_cannot_take_is_refused_before_the_symbol(tmp_path: Path) -> None:
    recording = _Recording(tmp_path)
    x, y = FakeTensor("float16", (3, 5), (5, 1)), FakeTensor("float16", (5,), (1,))
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        recording.launch(x, 1, y)
    with pytest.raises(ValueError, match="rank is not the port's"):
        recording.launch(y, 1, 0.5, y)
    host = FakeTensor("float16", (3, 5), (5, 1))
    host.is_cuda = False
    with pytest.raises(ValueError, match="not on a CUDA device"):
        recording.launch(host, 1, 0.5, y)
    # A dtype TileGym's packer has no code for is refused as it refuses it.
    with pytest.raises(NotImplementedError, match="not supported"):
        recording.launch(FakeTensor("complex64", (3, 5), (5, 1)), 1, 0.5, y)
    # A value that is no integer where the kernel takes one is refused, not truncated.
    with pytest.raises(TypeError, match="cutile_k: required argument is not an integer"):
        recording.launch(x, 1.5, 0.5, y)
    with pytest.raises(ValueError, match="too many values"):
        recording.launch(x, 1, 0.5, y, grid=(1, 1, 1, 1))
    # What the symbol refuses comes back as TileGym's check_rc says it, also on the
    # first call of a dtype, without the dict's miss chained to it.
    recording.lib.next_rc = -6
    with pytest.raises(RuntimeError, match=r"cutile_k failed \(rc=-6\): invalid arguments"):
        recording.launch(x, 1, 0.5, y)
    first = FakeTensor("bfloat16", (3, 5), (5, 1)), FakeTensor("float32", (5,), (1,))
    with pytest.raises(RuntimeError, match=r"\(rc=-6\)") as refused:
        recording.launch(first[0], 1, 0.5, first[1])
    assert refused.value.__context__ is None
