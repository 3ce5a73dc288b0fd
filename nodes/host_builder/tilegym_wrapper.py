"""The host stage's TileGym layout, its wrapper: `ops/cutile_rs/<op>.py` for an op's
ports, the cutile module's host code as TileGym wrote it (`op_source.host_code`),
registered for the cutile-rs backend, with each `ct.launch` calling the kernel's
port through `libcutile_kernels.so`.

Each kernel name is bound to a function launching its port (its `cutile_<...>`
symbol), so a host that picks its kernel at run time (`k = _a if tma else _b`)
launches the matching port. `_launch` keeps `ct.launch`'s signature; the launch
crosses cffi as one buffer of 8-byte words (`tilegym_ffi.launch_words`), packed by
one `struct.Struct` per symbol: a tensor as its address, dtype code, extents and
strides, constants and scalars as numbers, the grid padded to three, the device
and the stream (no compile hints: the port's entry was compiled with them). cffi's
ABI mode converts each argument of a call on its own, so one buffer costs less
than twenty numbers. What a call repeats is only read, never computed: the dtype
codes met so far sit in a dict (a new dtype's code is TileGym's `make_tensor_desc`'s),
each symbol is an attribute of `_LIBRARY` once its first call bound it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from nodes.host_builder.tilegym_ffi import LaunchWord, launch_words
from schemas.tilegym_backend import LAUNCH, MARKER


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

    def launcher(self) -> list[str]:
        """The kernel's name in the module: a function making the launch straight
        through (`ct.launch`'s argument list unpacked, each tensor's parts read once,
        every word packed at once), so that a call costs one cffi argument."""
        ranks = dict(self.ranks)
        names = [f"a_{name}" for name, _ in self.parameters]
        tensors = [(f"a_{n}", ranks[n]) for n, ctype in self.parameters if ctype == "tensor"]
        count = len(self.parameters)
        lines = [
            f"def {self.kernel}(stream, grid, args):",
            f'    """ct.launch of {self.kernel} on {self.symbol}."""',
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
                    f"        return {self.kernel}(stream, grid, args)",
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
        "        _DTYPE_CODES[tensor.dtype] = make_tensor_desc(ffi, tensor).dtype",
        "",
        "",
        "class _Library:",
        '    """The library\'s symbols, each bound on its first call and kept as an attribute."""',
        "",
        "    def __getattr__(self, name):",
        "        symbol = getattr(bind_kernel_function_cffi(_KERNEL, _FFI_CDEF)[1], name)",
        "        setattr(self, name, symbol)",
        "        return symbol",
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
