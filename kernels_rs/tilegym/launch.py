# SPDX-License-Identifier: MIT

"""How the wrappers tileport writes into TileGym's cutile-rs backend launch their
ports. Hand-written; copied as it is into a TileGym checkout as `tileport_launch.py`,
beside `tileport_launch.cpp` (the compiled launch) and `tileport_launch.rs` (how a
symbol reads its launch).

A wrapper declares its library (`Library`: the op's cffi declarations, bound through
TileGym's `bind_kernel_function_cffi`) and, for each kernel name, a launch function
(`Library.kernel`) taking what `ct.launch` takes after the kernel: the stream, the
grid and the argument tuple. The launch reaches the kernel's C symbol as one buffer
of 8-byte words: each argument in the kernel's order (a tensor as its address,
ffi_util dtype code, extents and strides; a number as itself), the grid padded to
three, the tensors' CUDA device and the stream. The symbol's layout says what each
argument is: a tensor's rank, or the `struct` code of a number (`q`, `Q`, `d`; `?` a
bool, sent as 0 or 1).

The words are packed by the compiled launch where it is built: it reads the torch
tensors in C++ and calls the symbol's address (about 0.35 us less per tensor than
reading `.shape`, `.stride()`, `.dtype` and `.data_ptr()` in Python). It is built on
the first launch against the torch this process imports, with $CXX (default c++),
into a cache keyed by its source and torch ($TILEPORT_LAUNCH_CACHE, default
~/.cache/tileport-launch); where it cannot be, the first launch logs why.
Whatever the compiled launch declines (not built, a dtype it has not learned, a
tensor subclass, anything refused below) is packed here in Python, which says what
the port cannot take. $TILEPORT_LAUNCH=python packs every launch in Python.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import struct
import subprocess
import sysconfig
from pathlib import Path

try:
    from tilegym.logger import get_logger

    logger = get_logger(__name__)
except ImportError:
    logger = logging.getLogger(__name__)

_SOURCE = Path(__file__).with_name("tileport_launch.cpp")
_MODULE = "_tileport_launch"
# The words after the arguments: the grid's three extents, the device, the stream.
_TAIL_CODES = "qqqqQ"
_RANKS = {str(rank): rank for rank in range(1, 6)}


class Library:
    """An op's symbols in TileGym's libcutile_kernels.so, bound on their first launch.

    `kernel` and `cdef` go to TileGym's `bind_kernel_function_cffi`; `describe` is
    its `make_tensor_desc` (a dtype's code is the one it packs, and it refuses what
    it refuses), `check` its `check_rc`."""

    def __init__(self, kernel, cdef, bind, describe, check):
        self._kernel, self._cdef = kernel, cdef
        self._bind, self._describe, self.check = bind, describe, check
        self._functions = {}  # each symbol's cffi function, once bound
        self._codes = {}  # ffi_util's dtype code of each torch dtype met so far
        self._packers = {}  # the struct.Struct of each layout

    def kernel(self, symbol, layout):
        """The launch function of `symbol`: (stream, grid, args) as `ct.launch` takes
        them after the kernel."""
        address = None

        def launch_kernel(stream, grid, args):
            nonlocal address
            if address is None:
                address = self.address(symbol)
            rc = launch(address, layout, args, grid, stream)
            if rc is None:
                rc = self.packed_in_python(symbol, layout, stream, grid, args)
            if rc:
                self.check(rc, symbol)

        launch_kernel.__name__ = launch_kernel.__qualname__ = f"launch_{symbol}"
        launch_kernel.symbol, launch_kernel.layout = symbol, layout
        return launch_kernel

    def function(self, symbol):
        """The symbol's cffi function (bound once: TileGym's binder imports cffi on
        every call)."""
        function = self._functions.get(symbol)
        if function is None:
            function = getattr(self._bind(self._kernel, self._cdef)[1], symbol)
            self._functions[symbol] = function
        return function

    def address(self, symbol):
        ffi = self._bind(self._kernel, self._cdef)[0]
        return int(ffi.cast("uintptr_t", self.function(symbol)))

    def packed_in_python(self, symbol, layout, stream, grid, args):
        """The launch packed in Python and made through cffi; its rc."""
        return self.function(symbol)(self.words(symbol, layout, stream, grid, args))

    def words(self, symbol, layout, stream, grid, args):
        """The launch's words as bytes, or the error saying what the port cannot take."""
        if len(args) != len(layout):
            raise TypeError(f"{symbol} takes {len(layout)} arguments, got {len(args)}")
        values = []
        device = None
        for code, value in zip(layout.decode(), args, strict=True):
            rank = _RANKS.get(code)
            if rank is None:
                values.append(bool(value) if code == "?" else value)
                continue
            shape, stride = value.shape, value.stride()
            if len(shape) != rank:
                raise ValueError(f"{symbol}: a tensor's rank is not the port's")
            if device is None:
                device = value.get_device()
                if device < 0:
                    raise ValueError(f"{symbol}: the tensors are not on a CUDA device")
            values += [value.data_ptr(), self._code(value), *shape, *stride]
        if device is None:
            import torch

            device = torch.cuda.current_device()
        grid_x, grid_y, grid_z = grid if len(grid) >= 3 else (*grid, 1, 1)[:3]
        values += [grid_x, grid_y, grid_z, device, getattr(stream, "cuda_stream", stream)]
        try:
            return self._packer(layout).pack(*values)
        except struct.error as error:
            raise TypeError(f"{symbol}: {error}") from None

    def _code(self, tensor):
        """ffi_util's dtype code of the tensor's dtype, told to the compiled launch
        the first time."""
        code = self._codes.get(tensor.dtype)
        if code is None:
            code = self._describe(self._bind(self._kernel, self._cdef)[0], tensor).dtype
            self._codes[tensor.dtype] = code
            learn(tensor, code)
        return code

    def _packer(self, layout):
        packer = self._packers.get(layout)
        if packer is None:
            codes = "".join(
                "Qq" + "qq" * _RANKS[code] if code in _RANKS else "q" if code == "?" else code
                for code in layout.decode()
            )
            packer = self._packers[layout] = struct.Struct(f"<{codes}{_TAIL_CODES}")
        return packer


def launch(symbol, layout, args, grid, stream):
    """The first launch: loads the compiled launch (building it once), then makes the
    launch with it; later calls go to its `launch` directly. Returns the symbol's rc,
    or None where the launch is left to the Python packer."""
    _bind()
    return launch(symbol, layout, args, grid, stream)


def learn(tensor, code):
    """Tells the compiled launch ffi_util's dtype code of `tensor`'s dtype."""
    _bind()
    learn(tensor, code)


def _bind():
    """Rebinds `launch` and `learn` to the compiled launch's, or, where there is none,
    to functions leaving every launch to the Python packer."""
    global launch, learn
    module = _compiled()
    launch, learn = (module.launch, module.learn) if module else (_declined, _ignored)


def _declined(symbol, layout, args, grid, stream):
    return None


def _ignored(tensor, code):
    return None


def _compiled():
    """The compiled launch's module, or None with the reason logged."""
    if os.environ.get("TILEPORT_LAUNCH") == "python":
        return None
    try:
        import torch

        path = _module_path(torch)
        if not path.is_file():
            _build(torch, path)
        loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
        spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception as error:  # any failure leaves the Python packer, which always works
        logger.warning("tileport launches are packed in Python: %s", error)
        return None
    return module


def _module_path(torch):
    """Where the module built from this source for this torch and Python lies."""
    key = hashlib.sha256()
    key.update(_SOURCE.read_bytes())
    key.update(torch.__version__.encode())
    key.update(str(torch._C._GLIBCXX_USE_CXX11_ABI).encode())
    cache = os.environ.get("TILEPORT_LAUNCH_CACHE") or Path.home() / ".cache" / "tileport-launch"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return Path(cache) / key.hexdigest()[:16] / (_MODULE + suffix)


def _build(torch, target):
    """Compiles the module into `target` (written whole or not at all, so processes
    building at once each see a module that loads)."""
    from torch.utils import cpp_extension

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    libraries = cpp_extension.library_paths()
    command = [
        os.environ.get("CXX", "c++"),
        "-O2",
        "-std=c++20",
        "-shared",
        "-fPIC",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f'-DTILEPORT_TORCH_VERSION="{torch.__version__}"',
        *(f"-I{include}" for include in cpp_extension.include_paths()),
        f"-I{sysconfig.get_paths()['include']}",
        str(_SOURCE),
        "-o",
        str(partial),
        *(f"-L{library}" for library in libraries),
        *(f"-Wl,-rpath,{library}" for library in libraries),
        "-ltorch_python",
        "-ltorch_cpu",
        "-lc10",
    ]
    logger.info("building %s for torch %s", target, torch.__version__)
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"building {target.name} failed:\n{built.stderr[-2000:]}")
    os.replace(partial, target)
