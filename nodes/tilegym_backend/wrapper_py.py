"""TileGym's `ops/cutile_rs/<op>.py` for an op's ports: the cutile module's host code
as TileGym wrote it (`op_source.host_code`), registered for the cutile-rs backend,
with each `ct.launch` calling the kernel's port through `libcutile_kernels.so`.

Each kernel name is bound to a `_Port` (its `cutile_<...>` symbol and how each
argument crosses the cffi boundary), so a host that picks its kernel at run time
(`k = _a if tma else _b`) launches the matching port. `_launch` keeps
`ct.launch`'s signature: tensors go as `TensorDesc*`, constants and scalars as
C numbers, the grid as three `uint32`.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from nodes.tilegym_backend.checkout import MARKER
from nodes.tilegym_backend.op_source import LAUNCH, HostCode


@dataclass(frozen=True)
class PortFfi:
    """One kernel's FFI symbol, as its ffi.rs declares it."""

    kernel: str
    symbol: str
    parameters: tuple[tuple[str, str], ...]  # kernel parameter -> C type ("tensor" for arrays)
    num_ctas: int | None
    occupancy: int | None

    def cdef(self) -> str:
        params = [
            f"const TensorDesc* {name}" if ctype == "tensor" else f"{ctype} {name}"
            for name, ctype in self.parameters
        ]
        params += [
            "uint32_t grid_x",
            "uint32_t grid_y",
            "uint32_t grid_z",
            "int32_t num_cta_in_cga",
            "int32_t occupancy",
            "int32_t device_id",
            "uint64_t raw_stream",
        ]
        return f"int32_t {self.symbol}(\n    " + ",\n    ".join(params) + ");"


def render_wrapper(op: str, source: str, host: HostCode, ports: list[PortFfi]) -> str:
    """`source` is the cutile module's path (tilegym/ops/cutile/...)."""
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
            "(other constants, shapes or alignment than the recorded launches) is "
            "refused with INVALID_ARGS, never run.",
            width=88,
        ),
        '"""',
        "",
        *sorted(
            set(host.imports) | {"from typing import NamedTuple", "import torch"},
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
        "",
        "_AUTO_COMPILE_OPTION = -1",
        "",
        "",
        "class _Port(NamedTuple):",
        '    """A kernel\'s cutile-rs port: its symbol, the C type of each argument',
        '    ("tensor" for a TensorDesc*) and the compile hints of its @ct.kernel."""',
        "",
        "    symbol: str",
        "    arguments: tuple",
        "    num_ctas: int | None",
        "    occupancy: int | None",
        "",
        "",
    ]
    for port in ports:
        kinds = ", ".join(f'"{ctype}"' for _, ctype in port.parameters)
        kinds += "," if len(port.parameters) == 1 else ""
        lines.append(
            f'{port.kernel} = _Port("{port.symbol}", ({kinds}), {port.num_ctas}, {port.occupancy})'
        )
    lines += [
        "",
        "",
        "def _compile_option(value) -> int:",
        "    return _AUTO_COMPILE_OPTION if value is None else int(value)",
        "",
        "",
        "# ffi_util's dtype code of each torch dtype, as make_tensor_desc packed it first.",
        "_DESCRIPTOR_CODES = {}",
        "",
        "",
        "def _descriptor(ffi, tensor):",
        '    """make_tensor_desc\'s TensorDesc in one cffi call: a call packs several."""',
        "    code = _DESCRIPTOR_CODES.get(tensor.dtype)",
        "    if code is None or not tensor.is_cuda or tensor.dim() > 5:",
        "        desc = make_tensor_desc(ffi, tensor)  # refuses what it refuses",
        "        _DESCRIPTOR_CODES[tensor.dtype] = desc.dtype",
        "        return desc",
        "    return ffi.new(",
        '        "TensorDesc *",',
        "        (tensor.data_ptr(), tensor.dim(), tensor.shape, tensor.stride(), code),",
        "    )",
        "",
        "",
        f"def {LAUNCH}(stream, grid, kernel, args):",
        '    """ct.launch(stream, grid, kernel, args) on the kernel\'s port."""',
        "    ffi, lib = bind_kernel_function_cffi(_KERNEL, _FFI_CDEF)",
        "    if len(args) != len(kernel.arguments):",
        "        raise TypeError(",
        '            f"{kernel.symbol} takes {len(kernel.arguments)} arguments, got {len(args)}"',
        "        )",
        "    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))",
        "    values = []",
        "    device = None",
        "    for kind, value in zip(kernel.arguments, args):",
        '        if kind == "tensor":',
        "            device = value.device if device is None else device",
        "            values.append(_descriptor(ffi, value))  # kept alive by `values`",
        '        elif kind in ("double", "float"):',
        "            values.append(float(value))",
        '        elif kind == "bool":',
        "            values.append(bool(value))",
        "        else:",
        "            values.append(int(value))",
        '    device = device if device is not None else torch.device("cuda")',
        "    device_id = device.index if device.index is not None else torch.cuda.current_device()",
        '    raw_stream = getattr(stream, "cuda_stream", stream)',
        "    rc = getattr(lib, kernel.symbol)(",
        "        *values,",
        "        *grid,",
        "        _compile_option(kernel.num_ctas),",
        "        _compile_option(kernel.occupancy),",
        "        int(device_id),",
        "        int(raw_stream),",
        "    )",
        "    check_rc(rc, kernel.symbol)",
        "",
        "",
        host.body,
    ]
    return "\n".join(lines) + "\n"


def _import_order(line: str) -> tuple[int, bool, str]:
    """Standard library, then torch, then tilegym (the crate's wrappers' order)."""
    module = line.split()[1]
    group = 2 if module.startswith("tilegym") else 1 if module.startswith("torch") else 0
    return group, line.startswith("from "), line
