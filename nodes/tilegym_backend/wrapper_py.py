"""TileGym's `ops/cutile_rs/<op>.py` for a port: registered for the op with the
same parameters as its cutile implementation, binding `cutile_<op>` through
`tilegym.backend.cutile_rs.utils` and launching through `autotune_launch`, as
the crate's own wrappers do.

The body restates the cutile host's reshapes and allocations (`host_launch`),
so the kernel sees the tensors the cutile launch passes; the extents,
constants and grid are derived inside the FFI.
"""

from __future__ import annotations

import ast
import textwrap

from nodes.host_builder.abi import DType
from nodes.tilegym_backend.checkout import MARKER
from nodes.tilegym_backend.ffi_rs import symbol
from nodes.tilegym_backend.op_source import HostLaunch, OpModule

_TORCH_DTYPES: dict[DType, str] = {
    DType.FLOAT32: "torch.float32",
    DType.FLOAT16: "torch.float16",
    DType.BFLOAT16: "torch.bfloat16",
}


def _signature(module: OpModule) -> str:
    """The registered function's parameter list, defaults included."""
    args = module.function.args
    return ast.unparse(args)


def render_wrapper(
    op: str,
    module: OpModule,
    host: HostLaunch,
    arrays: list[str],
    inputs: list[str],
    dtypes: list[DType],
    assumptions: list[str],
    hints: dict[str, int],
) -> str:
    """`arrays` are the kernel's array parameters in C order; `inputs` those it reads."""
    sym = symbol(op)
    checked = sorted({host.roots[a] for a in inputs if a in host.roots})
    tensors = [p for p in module.parameters if p in checked]
    c_arrays = ", ".join(f"const TensorDesc* {a}" for a in arrays)
    assumed = "; ".join(assumptions) if assumptions else "nothing beyond the dtypes"
    torch_dtypes = ", ".join(_TORCH_DTYPES[d] for d in dtypes) + ("," if len(dtypes) == 1 else "")
    lines = [
        "# SPDX-License-Identifier: MIT",
        "",
        "#",
        "",
        f'"""cutile-rs {op} backend via FFI to libcutile_kernels.so (forward-only).',
        "",
        *textwrap.wrap(
            f"{MARKER} from its port of ``{host.kernel}`` ({module.path}), which matches "
            "the cuTile Python reference's Tile IR and SASS. The tensors cross the cffi "
            "boundary as ``const TensorDesc*``; the FFI derives the extents, constants and "
            "grid from them as the cutile launch does. The port assumes what the recorded "
            f"launches had: {assumed}; other tensors are refused (INVALID_ARGS).",
            width=88,
        ),
        '"""',
        "",
        "from types import SimpleNamespace",
        "",
        "import torch",
        "",
        "from tilegym.backend import register_impl",
        "from tilegym.backend.cutile_rs.autotuner import autotune_launch",
        "from tilegym.backend.cutile_rs.utils import bind_kernel_function_cffi",
        "from tilegym.backend.cutile_rs.utils import check_rc",
        "from tilegym.backend.cutile_rs.utils import make_tensor_desc",
        "",
        f'_KERNEL = "{op}"',
        f'_FFI_NAME = "{sym}"',
        "# C-declaration source of truth for the cffi boundary — keep in sync with the",
        f"# `{sym}` signature in {op}_kernel/ffi.rs.",
        '_FFI_CDEF = """',
        f"int32_t {sym}(",
        f"    {c_arrays},",
        "    int32_t num_cta_in_cga, int32_t occupancy,",
        "    int32_t device_id, uint64_t raw_stream);",
        '"""',
        "",
        f"_DTYPES = ({torch_dtypes})",
        "",
        "_AUTO_COMPILE_OPTION = -1",
        f"_COMPILE_OCCUPANCY = {hints.get('occupancy')}",
        f"_COMPILE_NUM_CTA_IN_CGA = {hints.get('num_ctas')}",
        "",
        "",
        "def _compile_option_value(value) -> int:",
        "    return _AUTO_COMPILE_OPTION if value is None else int(value)",
        "",
        "",
        "def _configs():",
        "    # The port has one specialisation; its hints are the ones the cutile launch sets.",
        "    return [SimpleNamespace(OCCUPANCY=_COMPILE_OCCUPANCY, "
        "NUM_CTA_IN_CGA=_COMPILE_NUM_CTA_IN_CGA)]",
        "",
        "",
        f"def _run_ffi({', '.join(arrays)}, cfg):",
        "    ffi, lib = bind_kernel_function_cffi(_KERNEL, _FFI_CDEF)",
        f"    _dev = {arrays[0]}.device",
        "    device_id = _dev.index if _dev.index is not None else torch.cuda.current_device()",
        "    raw_stream = torch.cuda.current_stream(device=_dev).cuda_stream",
    ]
    lines += [f"    {a}_desc = make_tensor_desc(ffi, {a})" for a in arrays]
    lines.append(f"    rc = lib.{sym}(")
    lines += [f"        {a}_desc," for a in arrays]
    lines += [
        '        _compile_option_value(getattr(cfg, "NUM_CTA_IN_CGA", _COMPILE_NUM_CTA_IN_CGA)),',
        '        _compile_option_value(getattr(cfg, "OCCUPANCY", _COMPILE_OCCUPANCY)),',
        "        int(device_id),",
        "        int(raw_stream),",
        "    )",
        "    check_rc(rc, _FFI_NAME)",
        "",
        "",
        f"def _forward_impl({', '.join(module.parameters)}):",
    ]
    for tensor in tensors:
        lines.append(f"    if {tensor}.dtype not in _DTYPES:")
        lines.append(
            f'        raise NotImplementedError(f"cutile-rs {op}: dtype {{{tensor}.dtype}} '
            'not supported")'
        )
    lines += ["", "    def kernel_fn(cfg):"]
    lines += [f"        {statement}" for statement in host.statements]
    call = ", ".join(host.arguments[a] for a in arrays)
    lines += [f"        _run_ffi({call}, cfg)", f"        return {host.result}", ""]
    key = ", ".join(f"tuple({t}.shape), {t}.dtype" for t in tensors)
    lines += [
        "    result = autotune_launch(",
        "        kernel_fn=kernel_fn,",
        "        configs=_configs(),",
        f"        key=({key}),",
        "        kernel_name=_KERNEL,",
        "    )",
        "    return result.output",
        "",
        "",
        f'@register_impl("{op}", backend="cutile-rs")',
        f"def {module.function.name}({_signature(module)}):",
        f'    """{op} via cutile-rs FFI (forward-only): the port of {host.kernel}."""',
    ]
    for tensor in tensors:
        lines.append(f"    if not {tensor}.is_cuda:")
        lines.append(f'        raise ValueError("cutile-rs {op}: {tensor} must be a CUDA tensor")')
        lines.append(f"    if {tensor}.requires_grad:")
        lines.append(f"        {tensor} = {tensor}.detach()")
    lines.append(f"    return _forward_impl({', '.join(module.parameters)})")
    return "\n".join(lines) + "\n"
