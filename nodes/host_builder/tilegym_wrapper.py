"""The host stage's TileGym layout, its wrapper: `ops/cutile_rs/<op>.py` for an op's
ports, the cutile module's host code as TileGym wrote it (`op_source.host_code`),
registered for the cutile-rs backend, with each `ct.launch` calling the kernel's
port through `libcutile_kernels.so`.

Each kernel name is bound to the launch function of its port (its `cutile_<...>`
symbol), so a host that picks its kernel at run time (`k = _a if tma else _b`)
launches the matching port; `_launch` keeps `ct.launch`'s signature. How a launch
is packed and made is not written per op: it is tileport's hand-written
`tileport_launch` (`kernels_rs/tilegym/launch.py`, its compiled half `launch.cpp`,
copied beside the wrappers), given each symbol's layout, what each argument is to
it (a tensor's rank or a `struct` code; the words `tilegym_ffi.launch_words` reads).
The wrapper holds only the op's cffi declarations, its library (bound through
TileGym's `bind_kernel_function_cffi`, a dtype's code the one `make_tensor_desc`
packs, each rc checked by `check_rc`) and one line per kernel.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from schemas.tilegym_backend import LAUNCH, LAUNCH_WORDS_MODULE, MARKER


@dataclass(frozen=True)
class PortFfi:
    """One kernel's FFI symbol, as its ffi.rs declares it."""

    kernel: str
    symbol: str
    parameters: tuple[tuple[str, str], ...]  # kernel parameter -> C type ("tensor" for arrays)
    ranks: tuple[tuple[str, int], ...]  # each tensor parameter's rank

    def cdef(self) -> str:
        return f"int32_t {self.symbol}(const char *launch);"

    def layout(self) -> str:
        """The symbol's parameters as `tileport_launch` packs them (the words
        `tilegym_ffi.launch_words` reads): a tensor's rank, else the parameter's
        `struct` code (`Q` an address, `d` a floating value, `?` a bool sent as 0
        or 1, `q` every other integer: the symbol refuses one its C type cannot hold)."""
        ranks = dict(self.ranks)
        return "".join(
            str(ranks[name])
            if ctype == "tensor"
            else "?"
            if ctype == "bool"
            else _STRUCT_CODES.get(ctype, "q")
            for name, ctype in self.parameters
        )

    def launcher(self) -> str:
        """The kernel's name in the module, bound to its launch function."""
        return f'{self.kernel} = _LIBRARY.kernel("{self.symbol}", b"{self.layout()}")'


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
            set(imports) | {"import torch"},
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
        f"_LIBRARY = {LAUNCH_WORDS_MODULE}.Library(",
        "    _KERNEL, _FFI_CDEF, bind_kernel_function_cffi, make_tensor_desc, check_rc",
        ")",
        "# Each kernel name launches its port: the symbol, and what each ct.launch argument",
        f"# is to it (a tensor's rank or a struct code: {LAUNCH_WORDS_MODULE}.py).",
        *(p.launcher() for p in ports),
        "",
        "",
    ]
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
