"""The host stage's TileGym layout, its wrapper: `ops/cutile_rs/<op>.py` for an op's
ports, the cutile module's host code as TileGym wrote it (`op_source.host_code`),
registered for the cutile-rs backend, with each `ct.launch` calling the kernel's
port through `libcutile_kernels.so`.

Each kernel name is bound to a function launching its port (its `cutile_<...>`
symbol), so a host that picks its kernel at run time (`k = _a if tma else _b`)
launches the matching port. `_launch` keeps `ct.launch`'s signature; the launch
reaches the symbol as one buffer of 8-byte words (`tilegym_ffi.launch_words`): a
tensor as its address, dtype code, extents and strides, constants and scalars as
numbers, the grid padded to three, the device and the stream (no compile hints: the
port's entry was compiled with them).

The words are packed by tileport's compiled launch (`kernels_rs/tilegym/launch.cpp`,
copied into TileGym with its loader `launch.py`), which reads the torch tensors in
C++ and calls the symbol's address, given the symbol's layout (a tensor's rank or a
`struct` code per parameter). Where it declines (not built, a dtype it has not
learned, anything the Python packer refuses with its own message), the Python packer
makes the launch: one `struct.Struct` per symbol, through cffi (whose ABI mode
converts each argument on its own, so one buffer costs less than twenty numbers).
What a call repeats is only read, never computed: the dtype codes met so far sit in
a dict and in the compiled launch (a new dtype's code is TileGym's
`make_tensor_desc`'s), each symbol and its address are attributes of `_LIBRARY` once
its first call bound them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from nodes.host_builder.tilegym_ffi import LaunchWord, launch_words
from schemas.tilegym_backend import LAUNCH, LAUNCH_WORDS_MODULE, MARKER


@dataclass(frozen=True)
class PortFfi:
    """One kernel's FFI symbol, as its ffi.rs declares it."""

    kernel: str
    symbol: str
    parameters: tuple[tuple[str, str], ...]  # kernel parameter -> C type ("tensor" for arrays)
    ranks: tuple[tuple[str, int], ...]  # each tensor parameter's rank

    def words(self) -> list[LaunchWord]:
        """The words the symbol takes, in order (`tilegym_ffi.launch_words`)."""
        return launch_words(self.parameters, dict(self.ranks))

    def cdef(self) -> str:
        return f"int32_t {self.symbol}(const char *launch);"

    def packer(self) -> str:
        """The module's `struct.Struct` packing the symbol's words: `Q` for addresses
        and the stream, `d` for floating values, `q` for every other integer (the
        symbol refuses one that does not fit its C type)."""
        codes = "".join(_STRUCT_CODES.get(word.ctype, "q") for word in self.words())
        return f'{self._packer_name()} = struct.Struct("<{codes}")'

    def _packer_name(self) -> str:
        return f"_{self.symbol.upper()}_WORDS"

    def layout(self) -> str:
        """The compiled launch's layout of the symbol's parameters: a tensor's rank,
        else the parameter's `struct` code (`?` for a bool, packed as 0 or 1)."""
        ranks = dict(self.ranks)
        return "".join(
            str(ranks[name])
            if ctype == "tensor"
            else "?"
            if ctype == "bool"
            else _STRUCT_CODES.get(ctype, "q")
            for name, ctype in self.parameters
        )

    def launcher(self) -> list[str]:
        """The kernel's name in the module: the launch packed and made by the compiled
        launch (`tileport_launch`), or by the Python packer where it declines."""
        packed_in_python = f"{self.kernel}_packed_in_python"
        return [
            f"def {self.kernel}(stream, grid, args):",
            f'    """ct.launch of {self.kernel} on {self.symbol}."""',
            f"    rc = {LAUNCH_WORDS_MODULE}.launch(",
            f'        _LIBRARY.{self.symbol}_address, b"{self.layout()}", args, grid, stream',
            "    )",
            "    if rc is None:",
            f"        {packed_in_python}(stream, grid, args)",
            "    elif rc:",
            f'        check_rc(rc, "{self.symbol}")',
            "",
            "",
            *self._python_packer(packed_in_python),
        ]

    def _python_packer(self, name: str) -> list[str]:
        """The launch made straight through in Python (`ct.launch`'s argument list
        unpacked, each tensor's parts read once, every word packed at once), so that a
        call costs one cffi argument; it says what the port cannot take."""
        ranks = dict(self.ranks)
        names = [f"a_{name}" for name, _ in self.parameters]
        tensors = [(f"a_{n}", ranks[n]) for n, ctype in self.parameters if ctype == "tensor"]
        count = len(self.parameters)
        lines = [
            f"def {name}(stream, grid, args):",
            f'    """ct.launch of {self.kernel} on {self.symbol}, packed in Python."""',
            f"    if len(args) != {count}:",
            f'        raise TypeError(f"{self.symbol} takes {count} arguments, got {{len(args)}}")',
            f"    {', '.join(names)}{',' if count == 1 else ''} = args",
        ]
        if tensors:
            lines += [
                f"    {tensor}_shape, {tensor}_stride = {tensor}.shape, {tensor}.stride()"
                for tensor, _ in tensors
            ]
            ranked = " or ".join(f"len({t}_shape) != {rank}" for t, rank in tensors)
            lines += [
                f"    if {ranked}:",
                f"        raise ValueError(\"{self.symbol}: a tensor's rank is not the port's\")",
                f"    device = {tensors[0][0]}.get_device()",
                "    if device < 0:",
                f'        raise ValueError("{self.symbol}: the tensors are not on a CUDA device")',
            ]
        else:
            lines.append("    device = torch.cuda.current_device()")
        values: list[str] = []
        for (_, ctype), local in zip(self.parameters, names, strict=True):
            if ctype == "tensor":
                values += [
                    f"{local}.data_ptr()",
                    f"_DTYPE_CODES[{local}.dtype]",
                    f"*{local}_shape",
                    f"*{local}_stride",
                ]
            else:
                values.append(f"bool({local})" if ctype == "bool" else local)
        lines += [
            "    # ct.launch's grid: one to three extents.",
            "    grid_x, grid_y, grid_z = grid if len(grid) >= 3 else (*grid, 1, 1)[:3]",
            "    try:",
            f"        launch = {self._packer_name()}.pack(",
            *(f"            {value}," for value in values),
            "            grid_x,",
            "            grid_y,",
            "            grid_z,",
            "            device,",
            '            getattr(stream, "cuda_stream", stream),',
            "        )",
            *(
                [
                    "    except KeyError:  # a dtype not met yet",
                    "        launch = None",
                ]
                if tensors
                else []
            ),
            "    except struct.error as error:",
            f'        raise TypeError(f"{self.symbol}: {{error}}") from None',
            *(
                [
                    "    if launch is None:  # its code, then the launch again",
                    f"        _learn_dtype_codes({', '.join(t for t, _ in tensors)})",
                    f"        return {name}(stream, grid, args)",
                ]
                if tensors
                else []
            ),
            f"    rc = _LIBRARY.{self.symbol}(launch)",
            "    if rc:",
            f'        check_rc(rc, "{self.symbol}")',
        ]
        return lines


# The struct code of each C type a word has (`q` for the other integers).
_STRUCT_CODES = {"uint64_t": "Q", "double": "d", "float": "d"}


def render_wrapper(
    op: str, source: str, imports: list[str], body: str, ports: list[PortFfi]
) -> str:
    """`source` is the cutile module's path (tilegym/ops/cutile/...); `imports` and
    `body` its host code (`op_source.host_code`), each `ct.launch` calling LAUNCH."""
    kernels = ", ".join(f"``{p.kernel}``" for p in ports)
    lines = [
        "# SPDX-License-Identifier: MIT",
        "",
        f'"""cutile-rs {op} backend via FFI to libcutile_kernels.so.',
        "",
        *textwrap.wrap(
            f"{MARKER} from {source}: its host code as written there, each ct.launch of "
            f"{kernels} calling the kernel's cutile-rs port (checked against the cuTile "
            "Python reference's Tile IR and SASS). A launch the port was not proven for "
            "is refused with INVALID_ARGS, never run.",
            width=88,
        ),
        '"""',
        "",
        *sorted(
            set(imports) | {"import struct", "import torch"},
            key=_import_order,
        ),
        "from tilegym.backend.cutile_rs.utils import bind_kernel_function_cffi",
        "from tilegym.backend.cutile_rs.utils import check_rc",
        "from tilegym.backend.cutile_rs.utils import make_tensor_desc",
        f"from tilegym.ops.cutile_rs import {LAUNCH_WORDS_MODULE}",
        "",
        f'_KERNEL = "{op}"',
        "# C-declaration source of truth for the cffi boundary — keep in sync with",
        f"# {op}_kernel/ffi.rs.",
        '_FFI_CDEF = """',
        *(p.cdef() for p in ports),
        '"""',
        "# Each symbol's launch as it packs it: ct.launch's arguments, grid, device and",
        "# stream in 8-byte words.",
        *(p.packer() for p in ports),
        "",
        "# ffi_util's dtype code of each torch dtype met so far, as make_tensor_desc packs it.",
        "_DTYPE_CODES = {}",
        "",
        "",
        "def _learn_dtype_codes(*tensors):",
        '    """The dtype code of each tensor, packed by make_tensor_desc (which refuses',
        '    what it refuses)."""',
        "    ffi = bind_kernel_function_cffi(_KERNEL, _FFI_CDEF)[0]",
        "    for tensor in tensors:",
        "        code = make_tensor_desc(ffi, tensor).dtype",
        "        _DTYPE_CODES[tensor.dtype] = code",
        f"        {LAUNCH_WORDS_MODULE}.learn(tensor, code)",
        "",
        "",
        "class _Library:",
        '    """The library\'s symbols, each bound on its first use and kept as attributes:',
        "    `cutile_<...>` the cffi function, `cutile_<...>_address` its address (for the",
        '    compiled launch)."""',
        "",
        "    def __getattr__(self, name):",
        "        ffi, lib = bind_kernel_function_cffi(_KERNEL, _FFI_CDEF)",
        '        symbol = name.removesuffix("_address")',
        "        function = getattr(lib, symbol)",
        "        setattr(self, symbol, function)",
        '        setattr(self, f"{symbol}_address", int(ffi.cast("uintptr_t", function)))',
        "        return getattr(self, name)",
        "",
        "",
        "_LIBRARY = _Library()",
        "",
        "",
    ]
    for port in ports:
        lines += [*port.launcher(), "", ""]
    lines += [
        f"def {LAUNCH}(stream, grid, kernel, args):",
        '    """ct.launch(stream, grid, kernel, args) on the kernel\'s port."""',
        "    kernel(stream, grid, args)",
        "",
        "",
        body,
    ]
    return "\n".join(lines) + "\n"


def _import_order(line: str) -> tuple[int, bool, str]:
    """Standard library, then torch, then tilegym (the crate's wrappers' order)."""
    module = line.split()[1]
    group = 2 if module.startswith("tilegym") else 1 if module.startswith("torch") else 0
    return group, line.startswith("from "), line
