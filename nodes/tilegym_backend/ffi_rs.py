"""TileGym's `<op>_kernel/ffi.rs` for a port: one `cutile_<op>` C symbol in the
style of the crate's own ops (descriptors in, `crate::ffi_util` macros, one
`dispatch!` arm per element type).

The launch logic is the host builder's binding of the port (`bind_operator`):
dimension symbols bound from the descriptors, the spec's constants and grid as
expressions of them, and the divisibilities the port assumes checked before any
CUDA call (a tensor that breaks one gets `rc::INVALID_ARGS`, never a wrong
result).
"""

from __future__ import annotations

import ast
import textwrap

from nodes.host_builder.abi import DType
from nodes.host_builder.binding import OperatorBinding, Precondition, VariantBinding
from schemas.spec_expr import parse

# The element types ffi_util's `dtype_str` names, as `dispatch_by_dtype!` arms.
ELEMENT_NAMES: dict[DType, str] = {
    DType.FLOAT32: "f32",
    DType.FLOAT16: "f16",
    DType.BFLOAT16: "bf16",
}
# ffi_util's dtype codes of the fixed-type arrays a port may take.
DTYPE_CODES: dict[DType, int] = {
    DType.FLOAT32: 0,
    DType.FLOAT16: 1,
    DType.BFLOAT16: 2,
    DType.INT32: 3,
    DType.INT64: 4,
}
_SCALAR_TYPES: dict[DType, str] = {
    DType.INT32: "i32",
    DType.INT64: "i64",
    DType.FLOAT32: "f32",
    DType.FLOAT64: "f64",
}
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}


class FfiError(ValueError):
    """The port's launch needs something this generator does not write; says what."""


def symbol(op: str) -> str:
    return f"cutile_{op}"


def _variable(name: str) -> str:
    return name.lower()


class _Expr:
    """A spec expression (`cdiv(X_0, BLOCK_SIZE)`) as i64 Rust over bound names."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def rust(self, value: str | int) -> str:
        if isinstance(value, int):
            return f"{value}_i64"
        return self._node(parse(value), value)

    def _node(self, node: ast.expr, text: str) -> str:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return f"{node.value}_i64"
        if isinstance(node, ast.Name) and node.id in self.names:
            return _variable(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            op = _BINARY[type(node.op)]
            return f"({self._node(node.left, text)} {op} {self._node(node.right, text)})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [self._node(a, text) for a in node.args]
            if node.func.id == "cdiv" and len(args) == 2:
                return f"(({args[0]} + {args[1]} - 1) / {args[1]})"
            if node.func.id == "next_pow2" and len(args) == 1:
                return f"(({args[0]}).max(1) as u64).next_power_of_two() as i64"
            if node.func.id in ("min", "max") and len(args) == 2:
                return f"{args[0]}.{node.func.id}({args[1]})"
        raise FfiError(f"the launch expression {text!r} is not one this generator writes")


def _single_variant(binding: OperatorBinding) -> VariantBinding:
    if len(binding.variants) != 1:
        raise FfiError(
            f"{len(binding.variants)} variants: the TileGym launcher is written for a port "
            "with one variant"
        )
    variant = binding.variants[0]
    if variant.when.strip() != "True":
        raise FfiError(
            f"variant {variant.name} is launched only when {variant.when}: a dispatch "
            "condition is not written yet"
        )
    if binding.uses_num_sms or any(a.is_list for a in binding.arrays):
        raise FfiError("a grid over the SM count or a list of arrays is not written yet")
    return variant


def _precondition(pre: Precondition) -> tuple[str, str]:
    """The Rust condition a precondition needs, and how it reads in a comment."""
    desc = f"{pre.array}_d"
    if pre.kind == "address":
        return f"{desc}.ptr % {pre.divisor} == 0", f"`{pre.array}` {pre.divisor}-byte aligned"
    if pre.kind == "shape":
        return (
            f"{desc}.shape[{pre.dim}] % {pre.divisor} == 0",
            f"`{pre.array}.shape[{pre.dim}]` a multiple of {pre.divisor}",
        )
    if pre.kind == "stride":
        return (
            f"{desc}.strides[{pre.dim}] % {pre.divisor} == 0",
            f"`{pre.array}.stride[{pre.dim}]` a multiple of {pre.divisor}",
        )
    raise FfiError(f"a {pre.kind} precondition is not written yet")


def assumptions(binding: OperatorBinding) -> list[str]:
    """What the port assumes of its tensors, in words (for the wrapper's docstring)."""
    variant = _single_variant(binding)
    facts = [_precondition(p)[1] for p in variant.preconditions]
    facts += [
        f"`{a.name}` unit stride in dim {a.unit_stride_dim}"
        for a in binding.arrays
        if a.unit_stride_dim is not None
    ]
    return facts


def element_types(binding: OperatorBinding) -> list[DType]:
    """The dtypes the port takes for its element-type generic (spec order)."""
    variant = _single_variant(binding)
    typed = next((g.arrays for g in variant.generics if g.kind == "element"), ())
    if not typed:
        return []
    allowed = variant.allowed_dtypes.get(typed[0], ())
    missing = [d.spec_name for d in allowed if d not in ELEMENT_NAMES]
    if missing:
        raise FfiError(f"element types {missing} have no cutile-rs dispatch arm in ffi_util")
    return list(allowed)


def render_ffi(op: str, binding: OperatorBinding, module: str, source: str) -> str:
    """The ffi.rs text (rustfmt decides the final layout)."""
    variant = _single_variant(binding)
    sym = symbol(op)
    arrays = [a.name for a in binding.arrays]
    element = next((g for g in variant.generics if g.kind == "element"), None)
    if element is None:
        raise FfiError("a port without an element-type generic is not written yet")
    typed = list(element.arrays)
    bound = set(binding.bound_symbols)
    exprs = _Expr(bound | {name for name, _, _ in variant.constants})

    lines = [
        "// SPDX-License-Identifier: MIT",
        "",
        "//",
        f"// FFI export for the {op} kernel — one C-ABI symbol `{sym}`.",
        "//",
        *textwrap.wrap(
            f"Generated by tileport from its port of `{variant.entry}` ({source}). The "
            "extents, constants and grid are derived from the descriptors as the cutile "
            "launch derives them; tensors that break what the port assumes get "
            "rc::INVALID_ARGS before any CUDA call.",
            width=88,
            initial_indent="// ",
            subsequent_indent="// ",
        ),
        "",
        "use core::ffi::c_void;",
        "use cuda_async::device_buffer::DevicePointer;",
        "use cuda_core::{Device, Stream};",
    ]
    halves = sorted(
        {ELEMENT_NAMES[d] for d in element_types(binding)} & {"f16", "bf16"},
        key=["bf16", "f16"].index,
    )
    if halves:
        lines.append(f"use cutile::half::{{{', '.join(halves)}}};")
    lines += [
        "use cutile::prelude::*;",
        "use cutile::tile_kernel::{CompileOptions, TileKernel};",
        "",
        "use crate::ffi_util::{TensorDesc, rc};",
        f"use {module}::{variant.entry};",
        "",
        "#[unsafe(no_mangle)]",
        f'pub unsafe extern "C" fn {sym}(',
    ]
    lines += [f"    {name}: *const TensorDesc," for name in arrays]
    passed = [s.name for s in binding.scalars if s.constant]
    if passed:
        raise FfiError(
            f"constants the host passes ({', '.join(passed)}) are not written into TileGym's "
            "FFI yet"
        )
    for scalar in binding.scalars:
        rust = _SCALAR_TYPES.get(scalar.dtype)
        if rust is None:
            raise FfiError(f"scalar {scalar.name} of {scalar.dtype.spec_name} is not written yet")
        lines.append(f"    {scalar.name}: {rust},")
    lines += [
        "    // compile options: <=0 means auto/default",
        "    num_cta_in_cga: i32,",
        "    occupancy: i32,",
        "    // CUDA device ordinal of the tensors/stream, and the stream",
        "    device_id: i32,",
        "    raw_stream: u64,",
        ") -> i32 {",
    ]
    descs = ", ".join(f"{name}_d" for name in arrays)
    lines.append(f"    let ({descs}) = crate::deref_descs!({', '.join(arrays)});")
    lines.append(f"    let dty: &'static str = crate::resolve_dtype!({typed[0]}_d);")
    checks: list[str] = []
    for array in binding.arrays:
        checks.append(f"{array.name}_d.ndim != {array.rank}")
        if array.name in typed[1:]:
            checks.append(f"{array.name}_d.dtype != {typed[0]}_d.dtype")
        fixed = variant.allowed_dtypes.get(array.name, ())
        if array.name not in typed and len(fixed) == 1:
            code = DTYPE_CODES.get(fixed[0])
            if code is None:
                raise FfiError(f"{array.name}: {fixed[0].spec_name} has no ffi_util dtype code")
            checks.append(f"{array.name}_d.dtype != {code}")
    lines.append("    // Rank and dtype of every descriptor, as the port was compiled for.")
    lines.append(f"    if {' || '.join(checks)} {{")
    lines.append("        return rc::INVALID_ARGS;")
    lines.append("    }")

    lines.append("    // Dimension symbols of the port spec, bound from the descriptors.")
    extent_checks: list[str] = []
    for array in binding.arrays:
        for rule in array.dims:
            extent = f"{array.name}_d.shape[{rule.dim}]"
            if rule.binds:
                lines.append(f"    let {_variable(rule.binds)}: i64 = {extent};")
            elif rule.expected is not None:
                extent_checks.append(f"{extent} != {exprs.rust(rule.expected)}")
    if extent_checks:
        lines.append(f"    if {' || '.join(extent_checks)} {{")
        lines.append("        return rc::INVALID_ARGS;")
        lines.append("    }")

    facts = [_precondition(p)[0] for p in variant.preconditions]
    facts += [
        f"{a.name}_d.strides[{a.unit_stride_dim}] == 1"
        for a in binding.arrays
        if a.unit_stride_dim is not None
    ]
    if facts:
        lines.append("    // What the port assumes (the recorded launches' alignment and extents).")
        joined = " && ".join(facts)
        lines.append(f"    if !({joined}) {{")
        lines.append("        return rc::INVALID_ARGS;")
        lines.append("    }")

    used = {g.constant for g in variant.generics if g.kind == "constant"}
    used |= {n for axis in variant.grid if isinstance(axis, str) for n in _names(axis)}
    for name, kind, value in variant.constants:
        if name not in used:
            continue
        if kind != "int" or isinstance(value, float | bool):
            raise FfiError(f"constant {name} ({kind}) is not written yet")
        lines.append(f"    let {_variable(name)}: i64 = {exprs.rust(value)};")
    grid = [exprs.rust(axis) for axis in variant.grid]
    lines.append(f"    let grid: [i64; 3] = [{', '.join(grid)}];")
    lines.append("    if grid.contains(&0) {")
    lines.append("        return rc::OK; // nothing to launch")
    lines.append("    }")
    lines.append("    if grid.iter().any(|&g| g < 0 || g > i64::from(u32::MAX)) {")
    lines.append("        return rc::INVALID_ARGS;")
    lines.append("    }")
    lines.append("")
    lines.append("    crate::setup_device_stream!(device, stream, device_id, raw_stream);")
    lines.append("")
    lines += _dispatch(op, variant)
    names = ", ".join(ELEMENT_NAMES[d] for d in element_types(binding))
    lines.append(f"    crate::dispatch_by_dtype!(dty, dispatch, {names})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _names(text: str) -> set[str]:
    return {n.id for n in ast.walk(parse(text)) if isinstance(n, ast.Name)}


def _dispatch(op: str, variant: VariantBinding) -> list[str]:
    lines = ["    macro_rules! dispatch {", "        ($E:ty) => {{"]
    pointers = [s for s in variant.params if s.kind == "pointer"]
    for source in pointers:
        pointee = "$E" if source.pointee == "E" else source.pointee
        lines.append(
            f"            let {source.array}_dp: DevicePointer<{pointee}> = "
            f"unsafe {{ DevicePointer::from_cu_deviceptr({source.array}_d.ptr) }};"
        )
    generics: list[str] = []
    for rule in variant.generics:
        if rule.kind == "element":
            generics.append("dty.to_string()")
        elif rule.kind == "constant" and rule.constant:
            generics.append(f"{_variable(rule.constant)}.to_string()")
        else:
            raise FfiError(f"generic {rule.name} ({rule.kind}) is not written yet")
    order = ", ".join(r.name for r in variant.generics)
    lines.append("")
    lines.append(f"            // generics: <{order}>")
    lines.append(f"            let generics = vec![{', '.join(generics)}];")
    lines.append("            let opts = crate::compile_options!(occupancy, num_cta_in_cga);")
    args: list[str] = []
    for source in variant.params:
        if source.kind == "pointer":
            args.append(f"{source.array}_dp")
        elif source.kind == "shape":
            args.append(f"{source.array}_d.dim({source.dim})")
        elif source.kind == "stride":
            args.append(f"{source.array}_d.strides[{source.dim}] as i32")
        elif source.kind == "scalar" and source.scalar:
            args.append(
                f"{source.scalar} as {source.reinterpret}" if source.reinterpret else source.scalar
            )
        else:
            raise FfiError(f"an entry parameter fed by a {source.kind} is not written yet")
    lines.append("")
    lines.append(f"            let op = unsafe {{ {variant.entry}({', '.join(args)}) }}")
    lines.append("            .generics(generics)")
    lines.append("            .grid((grid[0] as u32, grid[1] as u32, grid[2] as u32))")
    lines.append("            .compile_options(opts);")
    lines.append("            match op.sync_on(&stream) {")
    lines.append("                Ok(_) => rc::OK,")
    lines.append("                Err(e) => {")
    lines.append(f'                    eprintln!("{symbol(op)}: launch failed: {{e:?}}");')
    lines.append("                    rc::LAUNCH_FAILED")
    lines.append("                }")
    lines.append("            }")
    lines.append("        }};")
    lines.append("    }")
    lines.append("")
    return lines
