"""The host stage's TileGym layout, its launcher: `<op>_kernel/ffi.rs` for an op's
ports, one C symbol per kernel in the style of the crate's own ops (descriptors in,
`crate::ffi_util`'s return codes and dtype helpers).

A symbol takes what `ct.launch` takes, packed by the wrapper into 8-byte words
(`launch_words`): every kernel argument in the kernel's order (a tensor as its
address, dtype code, extents and strides: `tensor_c_parameters`; constants and
scalars as numbers), the grid, the compile hints, the device and the stream. One
pointer crosses cffi where twenty numbers would each be converted on their own. From them
it picks the port's entry as the port spec's variants say (their conditions, and
the constants an entry was specialised to), checks what that entry assumes
(dtypes, extents, divisibilities), and derives the entry's generic arguments
(constants, element type, launch facts) as the cuTile Python launch does. Anything
else returns `rc::INVALID_ARGS` before any CUDA call: a launch the port was not
proven for is never run. The launch is the one launcher generator's
(`ffi_gen.generic_argument`, `ffi_gen.proven_launch`); this module says how a symbol
reads its arguments (`_SymbolOperands`) and how it refuses.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from nodes.host_builder.abi import DType
from nodes.host_builder.binding import (
    GenericRule,
    OperatorBinding,
    ParamSource,
    Precondition,
    VariantBinding,
)
from nodes.host_builder.ffi_gen import (
    entry_static,
    generic_argument,
    proven_entry_static,
    proven_launch,
)
from nodes.host_builder.rust_expr import Kind, TranspileError, Transpiler, Variable, unwrapped
from schemas.port_spec import PortSpec
from schemas.tilegym_backend import LAUNCH_WORDS_MODULE, PROVEN_MODULE, SPEC_ARITH_MODULE

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
MAX_RANK = 5  # ffi_util's TensorDesc holds five extents
# The C type of each part of a tensor as a symbol takes it.
TENSOR_PART_TYPES = {
    "address": "uint64_t",
    "dtype": "int32_t",
    "shape": "int64_t",
    "stride": "int64_t",
}
# C types of the non-tensor arguments.
_CONSTANT_TYPES = {"int": "int64_t", "float": "double", "bool": "bool"}
_SCALAR_TYPES: dict[DType, str] = {
    DType.INT32: "int32_t",
    DType.INT64: "int64_t",
    DType.FLOAT32: "float",
    DType.FLOAT64: "double",
}
_CONSTANT_KINDS = {"int": Kind.INT, "float": Kind.FLOAT, "bool": Kind.BOOL}


@dataclass(frozen=True)
class LaunchWord:
    """One word of a symbol's packed launch: its name in the symbol and the C type its
    value has there (`uint64_t` addresses and stream, `double` and `float` numbers,
    `bool`, integers of their width)."""

    name: str
    ctype: str


# The words after the kernel's arguments: the grid, the tensors' CUDA device and the
# stream. No compile hints: the port's entry is launched as the kernel writer
# proved it, its hints compiled in (`tileport_proven`, G17).
LAUNCH_TAIL: Final = (
    LaunchWord("grid_x", "uint32_t"),
    LaunchWord("grid_y", "uint32_t"),
    LaunchWord("grid_z", "uint32_t"),
    LaunchWord("device_id", "int32_t"),
    LaunchWord("raw_stream", "uint64_t"),
)
# How a symbol reads a word of each C type: the value, or None where it does not fit.
_WORD_READS = {
    "uint64_t": ("u64", "{w}"),
    "int64_t": ("i64", "{w} as i64"),
    "double": ("f64", "f64::from_bits({w})"),
    "float": ("f32", "f64::from_bits({w}) as f32"),
    "bool": ("bool", "{w} != 0"),
}
_NARROWED = {"int32_t": "i32", "uint32_t": "u32"}
# What a symbol may call of tileport_launch.rs (kernels_rs/tilegym/launch.rs): the
# `checked!` macro and the readers of its launch words.
_LAUNCH_READERS = ("checked", "descriptor", "launch_words", "narrow")


def launch_words(params: Sequence[tuple[str, str]], ranks: dict[str, int]) -> list[LaunchWord]:
    """The words a symbol takes, in order: each kernel parameter (`c_parameters`; a
    tensor part by part), then `LAUNCH_TAIL`."""
    words: list[LaunchWord] = []
    for name, ctype in params:
        if ctype == "tensor":
            words += [
                LaunchWord(part, TENSOR_PART_TYPES[kind])
                for part, kind in tensor_c_parameters(name, ranks[name])
            ]
        else:
            words.append(LaunchWord(_variable(name), ctype))
    return [*words, *LAUNCH_TAIL]


def _read_words(
    sym: str, params: list[tuple[str, str]], ranks: dict[str, int], body: str
) -> list[str]:
    """The lines reading a symbol's launch words: each tensor as ffi_util's
    descriptor (`<name>_d`), each other argument and the tail as its C type, only
    what `body` (the rest of the symbol) reads. A dtype code or a narrower integer
    that does not fit refuses the launch."""
    count = len(launch_words(params, ranks))
    lines = [
        f"    // SAFETY: the wrapper passes the {count} words of the launch (tileport_launch).",
        f"    let Some(w) = (unsafe {{ launch_words::<{count}>(launch) }}) else {{",
        f'        eprintln!("{sym}: no launch was passed");',
        "        return rc::NULL_PTR;",
        "    };",
    ]
    checked: list[tuple[str, str]] = []  # (local, read) whose value may not fit
    plain: list[tuple[str, str]] = []  # (local, its `let`)
    index = 0
    for name, ctype in [*params, *((word.name, word.ctype) for word in LAUNCH_TAIL)]:
        if ctype == "tensor":
            rank = ranks[name]
            checked.append((_descriptor(name), f"descriptor::<{rank}>(&w[{index}..])"))
            index += 2 + 2 * rank
            continue
        local = _variable(name)
        if ctype in _NARROWED:
            checked.append((local, f"narrow::<{_NARROWED[ctype]}>(w[{index}])"))
        else:
            rust, read = _WORD_READS[ctype]
            plain.append((local, f"    let {local}: {rust} = {read.format(w=f'w[{index}]')};"))
        index += 1
    assert index == count, "the words read are the words packed"
    checked = [(local, read) for local, read in checked if _reads(body, local)]
    if checked:
        names = ", ".join(f"Some({local})" for local, _ in checked)
        reads = ", ".join(read for _, read in checked)
        lines.append(f"    let ({names},) = ({reads},) else {{")
        lines.append(_refusal(sym, "a dtype code, grid extent or device is out of range"))
        lines.append("    };")
    lines += [line for local, line in plain if _reads(body, local)]
    return lines


def _reads(body: str, name: str, twice: bool = False) -> bool:
    """Whether `body` names `name` (`twice`: besides the line binding it)."""
    return len(re.findall(rf"\b{re.escape(name)}\b", body)) > (1 if twice else 0)


# A dimension symbol's binding in a symbol (`let x_0: i64 = x_d.shape[0];`).
_BOUND = re.compile(r"^    let (\w+): i64 = \w+_d\.shape\[\d+\];$")
_BOUND_COMMENT = "    // Dimension symbols of the port spec, bound from the descriptors."


def _descriptor(array: str) -> str:
    """The Rust local holding an array's descriptor."""
    return f"{_variable(array)}_d"


class FfiError(ValueError):
    """The port's launch needs something this generator does not write; says what."""


def kernel_stem(op: str, kernel: str) -> str:
    """A kernel's name as the op's files call it: `_rms_norm_kernel_gather` of
    rms_norm is `gather`, `_geglu_fwd_kernel` of geglu is `fwd`."""
    stem = kernel.strip("_").removesuffix("_kernel").replace("_kernel_", "_")
    return stem.removeprefix(f"{op}_") if stem != op else stem


def symbol(op: str, kernel: str, kernels: int) -> str:
    """`cutile_<op>` for a one-kernel op, else `cutile_<op>_<stem>`."""
    return f"cutile_{op}" if kernels == 1 else f"cutile_{op}_{kernel_stem(op, kernel)}"


def _variable(name: str) -> str:
    return name.lower()


def c_parameters(spec: PortSpec, order: list[str]) -> list[tuple[str, str]]:
    """Each kernel parameter and its C type ("tensor" for an array), in launch order."""
    params: list[tuple[str, str]] = []
    for name in order:
        if name in spec.arrays:
            params.append((name, "tensor"))
        elif name in spec.constants:
            params.append((name, _CONSTANT_TYPES[spec.constants[name].type]))
        elif name in spec.scalars:
            dtype = DType.from_spec_name(spec.scalars[name].dtype)
            if dtype not in _SCALAR_TYPES:
                raise FfiError(f"scalar {name} of {dtype.spec_name} is not written yet")
            params.append((name, _SCALAR_TYPES[dtype]))
        else:
            raise FfiError(f"kernel parameter {name} is not in the port spec")
    names = [_variable(n) for n, _ in params]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise FfiError(f"parameters {clashes} differ only in case")
    return params


def tensor_c_parameters(name: str, rank: int) -> list[tuple[str, str]]:
    """A tensor argument as a symbol takes it, part by part (name, kind): its address,
    its ffi_util dtype code, its extents and its strides in elements, each a word of
    the launch (`launch_words`)."""
    return [
        (f"{name}_ptr", "address"),
        (f"{name}_dtype", "dtype"),
        *((f"{name}_shape_{d}", "shape") for d in range(rank)),
        *((f"{name}_stride_{d}", "stride") for d in range(rank)),
    ]


def spec_variables(spec: PortSpec, bound: set[str]) -> dict[str, Variable]:
    """What a symbol's expressions may name, as its Rust variables: the extents it
    bound, its constants and scalars (C parameters), and the element type `dty`."""
    variables = {name: Variable(_variable(name), Kind.INT) for name in bound}
    for name, constant in spec.constants.items():
        variables[name] = Variable(_variable(name), _CONSTANT_KINDS[constant.type])
    for name, scalar in spec.scalars.items():
        dtype = DType.from_spec_name(scalar.dtype)
        if dtype in (DType.INT32, DType.INT64):
            variables[name] = Variable(f"i64::from({_variable(name)})", Kind.INT)
        elif dtype in (DType.FLOAT32, DType.FLOAT64):
            variables[name] = Variable(f"f64::from({_variable(name)})", Kind.FLOAT)
    variables["dtype"] = Variable("dty", Kind.DTYPE)
    return variables


class SpecExpr:
    """Spec expressions (`X_0 % 16 == 0 and dtype == 'float16'`) as Rust over a
    symbol's variables (`spec_variables`): the one emitter (`host_builder.rust_expr`),
    with Python's semantics. Its checked helpers are tileport's `spec_arith.rs`
    (`rt`); a value they refuse refuses the launch (`checked!`, `render_file`)."""

    def __init__(self, variables: dict[str, Variable], sym: str) -> None:
        self._transpiler = Transpiler(
            variables,
            checked=lambda call: f'checked!("{sym}", {call})',
            dtype_literal=_dtype_name,
        )

    def rust(self, value: str | int | bool, want: Kind = Kind.BOOL) -> str:
        try:
            return self._transpiler.expression(value, want)
        except TranspileError as error:
            raise FfiError(str(error)) from None


def _dtype_name(dtype: DType) -> str:
    name = ELEMENT_NAMES.get(dtype)
    if name is None:
        raise TranspileError(f"{dtype.spec_name!r} is not an element type of ffi_util")
    return f'"{name}"'


def element_types(binding: OperatorBinding) -> list[DType]:
    """The dtypes the port's element-type generic takes, over all its entries."""
    found: list[DType] = []
    for variant in binding.variants:
        typed = next((g.arrays for g in variant.generics if g.kind == "element"), ())
        for dtype in variant.allowed_dtypes.get(typed[0], ()) if typed else ():
            if dtype not in ELEMENT_NAMES:
                raise FfiError(f"element type {dtype.spec_name} has no dispatch arm in ffi_util")
            if dtype not in found:
                found.append(dtype)
    return found


class _SymbolOperands:
    """A symbol's reading of a launch: each tensor's descriptor (`<name>_d`), its
    constants and scalars as the C parameters `ct.launch`'s arguments became."""

    generic = "lp::Generic"

    def __init__(self, sym: str) -> None:
        self.sym = sym

    def element(self, array: str) -> str:
        return "dty"

    def itemsize(self, array: str) -> str:
        return f"dtype_elem_size({_descriptor(array)}.dtype) as i64"

    def address(self, array: str) -> str:
        return f"{_descriptor(array)}.ptr"

    def extent(self, array: str, dim: int) -> str:
        return f"{_descriptor(array)}.shape[{dim}]"

    def stride(self, array: str, dim: int) -> str:
        return f"{_descriptor(array)}.strides[{dim}]"

    def list_fact(self, rule: GenericRule) -> str | None:
        return None  # a symbol takes no list of arrays (`render_ffi`)

    def integer_generic(self, value: str, name: str) -> str:
        return f'i64::from(checked!("{self.sym}", rt::to_i32({value}, "{name}")))'

    def constant(self, name: str) -> str:
        return _variable(name)

    def parameter(self, source: ParamSource) -> str:
        # Extents and strides were checked to fit the kernel's i32 (`render_ffi`).
        desc = _descriptor(source.array or "")
        if source.kind == "pointer":
            return f"{desc}.ptr"
        if source.kind == "shape":
            return f"{desc}.shape[{source.dim}] as i32"
        if source.kind == "stride":
            return f"{desc}.strides[{source.dim}] as i32"
        if source.kind == "scalar" and source.scalar:
            name = _variable(source.scalar)
            return f"{name} as {source.reinterpret}" if source.reinterpret else name
        raise FfiError(f"an entry parameter fed by a {source.kind} is not written yet")


def _precondition(pre: Precondition, operands: _SymbolOperands) -> str:
    if pre.kind == "address":
        value = operands.address(pre.array)
    elif pre.kind == "shape":
        value = operands.extent(pre.array, pre.dim or 0)
    elif pre.kind == "stride":
        value = operands.stride(pre.array, pre.dim or 0)
    else:
        raise FfiError(f"a {pre.kind} precondition is not written yet")
    return f"{value} % {pre.divisor} == 0"


def _launch(
    variant: VariantBinding, exprs: SpecExpr, operands: _SymbolOperands, entry: str | None = None
) -> list[str]:
    """One entry's launch on the caller's stream, as tileport's own launchers make it
    (`tileport_proven`: compiled as the kernel writer proved it, no launch-time
    hint; G17), evaluating to its `Result`; `entry` names the entry where it is not
    the variant's static."""
    written = ", ".join(
        generic_argument(rule, operands, lambda text: exprs.rust(text, Kind.INT))
        for rule in variant.generics
    )
    generics = f"&[{written}]"
    return [
        "// SAFETY: the entry's parameters in order, each of its type; the descriptors",
        "// passed every check and their memory is the caller's, ordered on `stream`.",
        *proven_launch(
            "lp",
            variant,
            operands.parameter,
            generics,
            "(grid_x, grid_y, grid_z)",
            "&device",
            entry,
        ),
    ]


def _launches(
    variants: Sequence[VariantBinding], exprs: SpecExpr, operands: _SymbolOperands
) -> list[str]:
    """The statement launching the entry of the chosen `variant`: one launch per
    distinct way of launching (generic arguments and parameters), the entry picked
    from a table by variant where several variants launch alike (their entries
    differ only in the code the kernel writer proved for each)."""
    ways: dict[tuple[str, ...], list[int]] = {}
    for index, variant in enumerate(variants):
        ways.setdefault(tuple(_launch(variant, exprs, operands, "entry")), []).append(index)
    if len(ways) == len(variants):  # no two alike: each arm names its entry
        groups = [([i], _launch(v, exprs, operands)) for i, v in enumerate(variants)]
        lines = []
    else:
        groups = [(indices, list(launch)) for launch, indices in ways.items()]
        table = ", ".join(f"&{entry_static(v.entry)}" for v in variants)
        lines = [
            "// Each variant's entry; variants launched alike share the launch below.",
            f"let entry: &lp::ProvenEntry = [{table}][variant];",
        ]
    if len(groups) == 1:
        launch = groups[0][1]
        start = launch.index("unsafe {")
        return [*lines, *launch[:start], "let launched = unsafe {", *launch[start + 1 : -1], "};"]
    lines.append("let launched = match variant {")
    for number, (indices, launch) in enumerate(groups):
        head = "_" if number == len(groups) - 1 else " | ".join(map(str, indices))
        named = (
            f"{variants[indices[0]].entry}, variant {variants[indices[0]].name}"
            if len(ways) == len(variants)
            else f"variants {', '.join(variants[i].name for i in indices)}"
        )
        lines += [
            f"    {head} => {{",
            f"        // {named}; generics <{_generic_names(variants[indices[0]])}>.",
            *(f"        {x}" for x in launch),
            "    }",
        ]
    return [*lines, "};"]


def _generic_names(variant: VariantBinding) -> str:
    return ", ".join(r.name for r in variant.generics)


def _condition(variant: VariantBinding, exprs: SpecExpr, passed: set[str]) -> str:
    """The Rust condition under which `variant` takes the launch: its spec
    condition, the literal constants of its entry, the values it holds baked."""
    parts = [] if variant.when.strip() == "True" else [exprs.rust(variant.when)]
    kinds = {name: kind for name, kind, _ in variant.constants}
    for name, value in variant.literals:
        kind = kinds.get(name, "int")
        literal = ("true" if value else "false") if kind == "bool" else str(value)
        parts.append(f"{_variable(name)} == {literal}")
    parts += [exprs.rust(held) for held in variant.held_conditions(passed)]
    parts = list(dict.fromkeys(parts))  # a held value the condition names already
    if len(parts) == 1:
        return unwrapped(parts[0])
    return " && ".join(parts) or "true"


def render_ffi(
    sym: str,
    spec: PortSpec,
    params: list[tuple[str, str]],
    binding: OperatorBinding,
    module: str,
    source: str,
) -> str:
    """The text of one kernel's `#[no_mangle]` function (rustfmt decides the layout);
    `params` are the kernel's C parameters (`c_parameters`)."""
    if any(a.is_list for a in binding.arrays):
        raise FfiError("a list of arrays is not written yet")
    arrays = [a.name for a in binding.arrays]
    deep = [a.name for a in binding.arrays if a.rank > MAX_RANK]
    if deep:
        raise FfiError(f"{', '.join(deep)}: rank above ffi_util's {MAX_RANK}")
    dtypes = element_types(binding)
    typed = next(
        (g.arrays for v in binding.variants for g in v.generics if g.kind == "element"), ()
    )
    exprs = SpecExpr(spec_variables(spec, set(binding.bound_symbols)), sym)
    operands = _SymbolOperands(sym)
    passed = {name for name, ctype in params if ctype != "tensor"}
    ranks = {name: array.rank for name, array in spec.arrays.items()}

    entries = ", ".join(f"`{v.entry}`" for v in binding.variants)
    signature = [
        *textwrap.wrap(
            f"`{sym}`: `ct.launch` of `{spec.kernel}` ({source}) on its port ({entries}).",
            width=88,
            initial_indent="/// ",
            subsequent_indent="/// ",
        ),
        "#[unsafe(no_mangle)]",
        f'pub unsafe extern "C" fn {sym}(launch: *const u8) -> i32 {{',
    ]
    first = _descriptor((typed or arrays)[0])
    lines = [f"    let dty: &'static str = crate::resolve_dtype!({first});"]
    checks: list[str] = []
    fixed: dict[str, set[DType]] = {}
    for variant in binding.variants:
        for name, allowed in variant.allowed_dtypes.items():
            if name not in typed:
                fixed.setdefault(name, set()).update(allowed)
    for array in binding.arrays:
        if array.name in typed[1:]:
            checks.append(f"{_descriptor(array.name)}.dtype != {_descriptor(typed[0])}.dtype")
        if len(fixed.get(array.name, ())) == 1:
            [only] = fixed[array.name]
            code = DTYPE_CODES.get(only)
            if code is None:
                raise FfiError(f"{array.name}: {only.spec_name} has no ffi_util dtype code")
            checks.append(f"{_descriptor(array.name)}.dtype != {code}")
    if checks:
        lines.append("    // The dtype of every tensor, as the port was compiled for.")
        lines.append(f"    if {' || '.join(checks)} {{")
        lines.append(_refusal(sym, "a tensor's dtype is not the port's"))
        lines.append("    }")

    bound: list[str] = []
    extent_checks: list[str] = []
    for array in binding.arrays:
        for rule in array.dims:
            extent = f"{_descriptor(array.name)}.shape[{rule.dim}]"
            if rule.binds:
                bound.append(f"    let {_variable(rule.binds)}: i64 = {extent};")
            elif rule.expected is not None and _checked_extent(rule.expected):
                extent_checks.append(f"{extent} != {exprs.rust(rule.expected, Kind.INT)}")
    if bound:
        lines.append(_BOUND_COMMENT)
        lines += bound
    if extent_checks:
        lines.append(f"    if {' || '.join(extent_checks)} {{")
        lines.append(_refusal(sym, "an extent is not the one the port was compiled for"))
        lines.append("    }")
    sizes = [
        f"{_descriptor(array.name)}.{field}[{dim}]"
        for array in binding.arrays
        for field in ("shape", "strides")
        for dim in range(array.rank)
    ]
    if sizes:
        # The kernels take extents and strides as i32, as tileport's own launchers
        # check them (`rt::fits_kernel_i32`): never truncated.
        lines.append(f"    if ![{', '.join(sizes)}].into_iter().all(rt::fits_kernel_i32) {{")
        lines.append(_refusal(sym, "an extent or stride is outside the kernel's i32"))
        lines.append("    }")
    unit = [
        f"{_descriptor(a.name)}.strides[{a.unit_stride_dim}] == 1"
        for a in binding.arrays
        if a.unit_stride_dim is not None
    ]
    if unit:
        lines.append(f"    if !({' && '.join(unit)}) {{")
        lines.append(_refusal(sym, "a tensor the port reads contiguously has a stride"))
        lines.append("    }")

    single = len(binding.variants) == 1 and _condition(binding.variants[0], exprs, passed) == "true"
    if not single:
        lines.append("    // The entry that takes this launch: the port spec's variants, in order.")
        conditions = [_condition(v, exprs, passed) for v in binding.variants]
        arms = [f"if {c} {{ {i} }}" for i, c in enumerate(conditions)]
        if conditions[-1] == "true":  # the last variant takes every other launch
            arms[-1] = f"{{ {len(arms) - 1} }};"
            lines.append("    let variant: usize = " + " else ".join(arms))
        else:
            lines.append("    let variant: usize = " + " else ".join(arms) + " else {")
            lines.append(_refusal(sym, "no variant of the port was proven for this launch"))
            lines.append("    };")
    for index, variant in enumerate(binding.variants):
        facts = [_precondition(p, operands) for p in variant.preconditions]
        if facts:
            guard = "" if single else f"variant == {index} && "
            lines.append(f"    // What {variant.entry} assumes of its tensors.")
            lines.append(f"    if {guard}!({' && '.join(facts)}) {{")
            lines.append(_refusal(sym, f"a tensor breaks what {variant.entry} assumes"))
            lines.append("    }")
    if typed:
        names = " | ".join(f'"{ELEMENT_NAMES[d]}"' for d in dtypes)
        lines.append(f"    if !matches!(dty, {names}) {{")
        lines.append(f'        eprintln!("{sym}: no port of {spec.kernel} takes {{dty}}");')
        lines.append("        return rc::UNSUPPORTED_DTYPE;")
        lines.append("    }")
    lines += [
        "    if grid_x == 0 || grid_y == 0 || grid_z == 0 {",
        "        return rc::OK; // nothing to launch",
        "    }",
        "    let stream = raw_stream as *mut c_void;",
        "    let device = match lp::Device::for_launch(device_id) {",
        "        Ok(device) => device,",
        "        Err(error) => {",
        f'            eprintln!("{sym}: {{error}}");',
        "            return rc::DEVICE_INIT_FAILED;",
        "        }",
        "    };",
    ]
    if single:
        launch = _launch(binding.variants[0], exprs, operands)
        start = launch.index("unsafe {")
        launch[start] = "let launched = unsafe {"
        launch[-1] = "};"
        names = _generic_names(binding.variants[0])
        launch.insert(0, f"// {binding.variants[0].entry}; generics <{names}>.")
    else:
        launch = _launches(binding.variants, exprs, operands)
    lines += [f"    {line}" for line in launch]
    lines += [
        "    match launched {",
        "        Ok(()) => rc::OK,",
        "        Err(error) => {",
        f'            eprintln!("{sym}: {{error}}");',
        "            rc::LAUNCH_FAILED",
        "        }",
        "    }",
        "}",
    ]
    if not typed and not any("dty" in line for line in lines if "resolve_dtype" not in line):
        lines = [line for line in lines if "resolve_dtype" not in line]
    # A bound dimension symbol no condition or generic reads is not bound.
    text = "\n".join(lines)
    lines = [
        line
        for line in lines
        if not (found := _BOUND.match(line)) or _reads(text, found[1], twice=True)
    ]
    lines = [
        line
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if line != _BOUND_COMMENT or _BOUND.match(after)
    ]
    body = "\n".join(lines)
    return "\n".join([*signature, *_read_words(sym, params, ranks, body), body]) + "\n"


def _checked_extent(expected: str | int) -> bool:
    """Whether a symbol checks an extent the spec fixes: only an extent of 1, a static
    shape in the IR. Every other extent reaches the entry as its own argument and
    through its facts (the entry's preconditions or fact generics): a literal was
    only the extent every record happened to have, and a symbol or expression shared
    with another array's extent only a relation the records happened to show
    (layer_norm's square inputs); the caller passes the constants, so nothing is
    derived from either."""
    return expected == 1


def _refusal(sym: str, why: str) -> str:
    """The refusal of a launch the port was not proven for, said on stderr as the
    crate's ops say a failed launch."""
    return f'        eprintln!("{sym}: {why}");\n        return rc::INVALID_ARGS;'


def render_file(op: str, functions: list[str], uses: dict[str, list[str]], source: str) -> str:
    """ffi.rs: the header, the imports the functions need, one `ProvenEntry` per entry
    (`uses`: each kernel module and the entries launched from it), the functions."""
    body = "\n".join(functions)
    lines = [
        "// SPDX-License-Identifier: MIT",
        "",
        "//",
        f"// FFI export for the {op} kernels: one C-ABI symbol per kernel.",
        "//",
        *textwrap.wrap(
            f"Generated by tileport from its ports of {source}'s kernels. Each symbol "
            "takes what ct.launch takes and launches the port's entry the port spec "
            "chooses, compiled as the kernel writer proved it; a launch the port was not "
            "proven for gets rc::INVALID_ARGS before any CUDA call.",
            width=88,
            initial_indent="// ",
            subsequent_indent="// ",
        ),
        "",
        "use core::ffi::c_void;",
        "",
    ]
    util = ["rc"] + (["dtype_elem_size"] if "dtype_elem_size(" in body else [])
    lines.append(f"use crate::ffi_util::{{{', '.join(sorted(util, key=str.lower))}}};")
    lines.append(f"use crate::{PROVEN_MODULE} as lp;")
    if "rt::" in body:
        lines.append(f"use crate::{SPEC_ARITH_MODULE} as rt;")
    readers = [name for name in _LAUNCH_READERS if re.search(rf"\b{name}!?(::<|\()", body)]
    if readers:
        lines.append(f"use crate::{LAUNCH_WORDS_MODULE}::{{{', '.join(readers)}}};")
    lines.append("")
    for module, entries in uses.items():
        for entry in dict.fromkeys(entries):
            lines += [proven_entry_static("lp", module, module, entry), ""]
    return "\n".join(lines) + "\n" + body
