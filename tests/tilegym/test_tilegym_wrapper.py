"""The wrapper tileport writes into TileGym packs each launch into the words its
port's symbol reads, a tensor part by part (address, dtype code, extents, strides):
the parts must be what TileGym's own `make_tensor_desc` packs, the constants and
grid what `ct.launch` was given. Checked through real cffi against a C function of
the symbol's declaration that keeps the words it received (TileGym's unmodified
packer read from its source, tensors stood in for: no torch or GPU here). Where
torch and a GPU are, the compiled launch (`kernels_rs/tilegym/launch.cpp`) is built
and must pass the same words, bit for bit, as the Python packer."""

from __future__ import annotations

import ast
import importlib.util
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

from nodes.host_builder.tilegym_ffi import launch_words
from nodes.host_builder.tilegym_wrapper import PortFfi, render_wrapper
from toolchain.env import KERNELS_RS, REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
UTILS = TILEGYM / "src/tilegym/backend/cutile_rs/utils.py"
pytestmark = [
    pytest.mark.skipif(not UTILS.is_file(), reason="no TileGym beside the checkout"),
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler"),
]


@pytest.fixture(autouse=True)
def _packed_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every launch packed in Python, unless a test asks for the compiled launch."""
    monkeypatch.setenv("TILEPORT_LAUNCH", "python")


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


def _launch_module() -> Any:
    """A fresh copy of the compiled launch's loader, as the wrapper imports it."""
    spec = importlib.util.spec_from_file_location(
        "tileport_launch", KERNELS_RS / "tilegym/launch.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Recording:
    """The generated module's launch functions over a C `cutile_k` that keeps the
    words it was passed (read back as int64, eps as the double its word holds) and
    returns the rc it is told."""

    def __init__(self, tmp_path: Path) -> None:
        self.launcher = _launch_module()
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
            {"_KERNEL", "_FFI_CDEF", "_LIBRARY", "_k", "_launch"},
            {
                "tileport_launch": self.launcher,
                "bind_kernel_function_cffi": lambda kernel, cdef: (ffi, self.lib),
                "make_tensor_desc": self.tilegym["make_tensor_desc"],
                "check_rc": self.tilegym["check_rc"],
            },
        )
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
    assert set(recording.module["_LIBRARY"]._codes) == {"float16", "bfloat16", "float32", "int64"}


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


def test_the_packer_writes_the_words_the_symbol_reads() -> None:
    """For ports of every kind of parameter, drawn at random: the Python packer's
    words, their number and their types, are those the symbol reads
    (`tilegym_ffi.launch_words`, which the Rust side is written from)."""
    launcher = _launch_module()
    library = launcher.Library("k", "", None, None, None)
    kinds = ["tensor", "int32_t", "int64_t", "uint64_t", "double", "float", "bool"]
    rng = random.Random(7)
    for _ in range(200):
        parameters = tuple((f"p{i}", rng.choice(kinds)) for i in range(rng.randrange(0, 9)))
        ranks = tuple(
            (name, rng.randrange(1, 6)) for name, ctype in parameters if ctype == "tensor"
        )
        port = PortFfi(kernel="_k", symbol="cutile_k", parameters=parameters, ranks=ranks)
        words = launch_words(parameters, dict(ranks))
        expected = "".join(
            {"uint64_t": "Q", "double": "d", "float": "d"}.get(w.ctype, "q") for w in words
        )
        assert library._packer(port.layout().encode()).format == f"<{expected}"


def _drawn_tensor(torch: Any, rng: random.Random, rank: int) -> Any:
    """A CUDA tensor of `rank` as a launch may pass it: any float dtype or int64,
    extents of 1 and ragged ones, transposed or sliced, starting anywhere."""
    dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16, torch.int64])
    extents = [rng.choice([1, 3, 16, 127, 130]) for _ in range(rank)]
    tensor = torch.zeros([extent + 2 for extent in extents], dtype=dtype, device="cuda")
    tensor = tensor[tuple(slice(1, 1 + extent) for extent in extents)]
    if rank == 2 and rng.random() < 0.5:
        tensor = tensor.t()
    return tensor


@pytest.mark.gpu
def test_the_compiled_launch_passes_the_python_packers_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the compiled launch reads CUDA tensors")
    monkeypatch.delenv("TILEPORT_LAUNCH")
    monkeypatch.setenv("TILEPORT_LAUNCH_CACHE", str(tmp_path / "cache"))
    recording = _Recording(tmp_path)
    library = recording.module["_LIBRARY"]
    rng = random.Random(20261208)
    stream = torch.cuda.current_stream()
    compiled_calls = 0
    for _ in range(200):
        x, y = _drawn_tensor(torch, rng, 2), _drawn_tensor(torch, rng, 1)
        n, eps, grid = rng.randrange(-(2**40), 2**40), rng.random(), (rng.randrange(1, 9),)
        known = {x.dtype, y.dtype} <= set(library._codes)
        seen = recording.launch(x, n, eps, y, grid=grid, stream=stream)
        library.packed_in_python("cutile_k", PORT.layout().encode(), stream, grid, (x, n, eps, y))
        assert seen == list(recording.lib.seen[0:SYMBOL_WORDS])
        compiled_calls += known
    # The loader bound the compiled module's launch, and it made the launches of
    # every dtype learned by then (a first dtype goes through the Python packer).
    assert type(recording.launcher.launch).__name__ == "builtin_function_or_method"
    assert compiled_calls > 150
    # What the compiled launch declines, the Python packer refuses with its message.
    x = _drawn_tensor(torch, rng, 2)
    with pytest.raises(ValueError, match="rank is not the port's"):
        recording.launch(x, 1, 0.5, x)
    with pytest.raises(ValueError, match="not on a CUDA device"):
        recording.launch(x.cpu(), 1, 0.5, x[0])
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        recording.launch(x, 1, x[0])
    recording.lib.next_rc = -6
    with pytest.raises(RuntimeError, match=r"cutile_k failed \(rc=-6\)"):
        recording.launch(x, 1, 0.5, x[0])
