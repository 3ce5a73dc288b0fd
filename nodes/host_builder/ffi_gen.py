"""The one launcher generator: the Rust that launches a port's entries.

Every C ABI a port ships with launches the same way, written once here: the
entry's `ProvenEntry` (`proven_entry_static`), its generic arguments
(`generic_argument`: constants, derived values, launch facts, element type) and its
parameters in order through proven.rs (`proven_launch`: no launch-time divisibility
hint of cutile-rs's launcher, docs/UPSTREAM_GAPS.md G17). An ABI says only how its
launcher reads what it was given (`LaunchOperands`): tileport's library ABI here
(`generate_operator_rs`, `ffi/<op>.rs`: descriptors, the dispatch condition,
constants and grid derived from the spec, one `check`/`derive`/`launch` per
operator in `templates/operator.rs.j2`), TileGym's `ct.launch`-shaped symbols in
`tilegym_ffi.py`. A list of arrays is a `ListArg` (`rt::list_arg`): its elements
are checked like arrays, and its table is written on the stream right before the
launch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from nodes.host_builder.abi import DType, camel, list_params
from nodes.host_builder.binding import (
    ArrayBinding,
    BindingError,
    ExtentKind,
    GenericRule,
    OperatorBinding,
    ParamSource,
    Precondition,
    VariantBinding,
)
from nodes.host_builder.rust_expr import Kind, TranspileError, Transpiler, Variable
from schemas.spec_expr import names_in

TEMPLATES = Path(__file__).parent / "templates"


class LaunchOperands(Protocol):
    """How one ABI's launcher reads what a launch is made of, each as a Rust
    expression; the launch itself is `generic_argument` and `proven_launch`."""

    generic: str  # how the launcher names proven.rs's `Generic`

    def element(self, array: str) -> str:
        """The array's element type, as its ABI's `Generic::Element` takes it."""
        ...

    def itemsize(self, array: str) -> str:
        """The array's bytes per element (i64)."""
        ...

    def address(self, array: str) -> str:
        """The array's base address (u64)."""
        ...

    def extent(self, array: str, dim: int) -> str:
        """One of the array's extents (i64)."""
        ...

    def stride(self, array: str, dim: int) -> str:
        """One of the array's strides, in elements (i64)."""
        ...

    def list_fact(self, rule: GenericRule) -> str | None:
        """A list's launch fact, the weakest over its elements; None for an array."""
        ...

    def integer_generic(self, value: str, name: str) -> str:
        """An i64 value for an `i32` generic, checked to fit (never truncated)."""
        ...

    def constant(self, name: str) -> str:
        """The value of one of the launch's constants (i64 or bool)."""
        ...

    def parameter(self, source: ParamSource) -> str:
        """What one entry parameter receives, of the entry's type."""
        ...


def launch_fact(rule: GenericRule, operands: LaunchOperands) -> str:
    """The launch fact cuTile Python states for an array (`binding.fact_value`), as an
    i64 computed by tileport's `spec_arith` rules."""
    array = rule.array or ""
    if rule.extent is ExtentKind.ADDRESS:
        return f"rt::address_fact({operands.address(array)})"
    if rule.extent is ExtentKind.SHAPE:
        return f"rt::shape_fact({operands.extent(array, rule.dim or 0)})"
    stride = operands.stride(array, rule.dim or 0)
    return f"rt::stride_fact({stride}, {operands.itemsize(array)})"


def generic_argument(
    rule: GenericRule, operands: LaunchOperands, derived: Callable[[str], str]
) -> str:
    """One generic argument of an entry at launch; `derived` writes a spec
    expression over the launch's constants as an i64."""
    generic = operands.generic
    if rule.kind == "derived" and rule.expression is not None:
        value = operands.integer_generic(derived(rule.expression), rule.name)
        return f"{generic}::Int({value})"
    if rule.kind == "element":
        return f"{generic}::Element({operands.element(rule.arrays[0])})"
    if rule.kind == "element_bytes":
        return f"{generic}::Int({operands.itemsize(rule.arrays[0])})"
    if rule.kind == "fact" and rule.array is not None and rule.extent is not None:
        return f"{generic}::Int({operands.list_fact(rule) or launch_fact(rule, operands)})"
    if rule.kind != "constant" or rule.constant is None:
        raise BindingError(f"generic {rule.name} ({rule.kind}) has no launch value")
    value = operands.constant(rule.constant)
    if rule.const_type == "bool":
        return f"{generic}::Bool({value})"
    if rule.const_type == "i32":
        return f"{generic}::Int({operands.integer_generic(value, rule.name)})"
    if rule.const_type == "i64":
        return f"{generic}::Int({value})"
    raise BindingError(
        f"const generic {rule.name} has type {rule.const_type}; the launchers pass i32, i64 or bool"
    )


_INT_SCALARS = {DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16}
_WIDE_SCALARS = {DType.UINT32, DType.UINT64}


def _dim_var(symbol: str) -> str:
    return f"d_{symbol.lower()}"


def _case_unique(name: str, names: list[str]) -> str:
    """`name` in lower case; numbered where two of `names` differ only in case (`n`, `N`)."""
    lower = name.lower()
    if [other.lower() for other in names].count(lower) > 1:
        return f"{lower}_{names.index(name)}"
    return lower


def _const_var(name: str, names: list[str]) -> str:
    """`c_<name>` of one of the spec's constants `names` (`block_n` and `BLOCK_N` are
    two constants, each its own generic: their variables are numbered)."""
    return f"c_{_case_unique(name, names)}"


def _scalar_field(name: str, names: list[str]) -> str:
    """`s_<name>` of one of the scalars `names`."""
    return f"s_{_case_unique(name, names)}"


def _scalar_variable(name: str, dtype: DType, prefix: str, names: list[str]) -> Variable:
    field = f"{prefix}{_scalar_field(name, names)}"
    if dtype is DType.BOOL:
        return Variable(field, Kind.BOOL)
    if dtype in _INT_SCALARS or dtype is DType.UINT32:
        return Variable(f"i64::from({field})", Kind.INT)
    if dtype in _WIDE_SCALARS:
        return Variable(f"({field} as i64)", Kind.INT)
    return Variable(f"f64::from({field})", Kind.FLOAT)


class _LibraryOperands:
    """tileport's library ABI: the launch reads `args` (`TensorArg`s and `ListArg`s,
    the caller's scalars) and the constants `derive` computed (`c_<name>`)."""

    generic = "Generic"

    def __init__(self, lists: set[str], scalar_names: list[str], constant_names: list[str]) -> None:
        self.lists = lists
        self.scalar_names = scalar_names
        self.constant_names = constant_names

    def tensor_ref(self, array: str) -> str:
        """A `&TensorArg` of the array; a list's first element (all share its dtype)."""
        return f"args.{array}.first()" if array in self.lists else f"&args.{array}"

    def element(self, array: str) -> str:
        return f"args.{array}.dtype"

    def itemsize(self, array: str) -> str:
        tensor = f"args.{array}.first()" if array in self.lists else f"args.{array}"
        return f"{tensor}.dtype.itemsize()"

    def address(self, array: str) -> str:
        return f"args.{array}.data"

    def extent(self, array: str, dim: int) -> str:
        return f"args.{array}.dim({dim})"

    def stride(self, array: str, dim: int) -> str:
        return f"args.{array}.stride({dim})"

    def list_fact(self, rule: GenericRule) -> str | None:
        if rule.array not in self.lists:
            return None
        array = f"args.{rule.array}"
        if rule.extent is ExtentKind.ADDRESS:
            return f"{array}.address_fact()"
        method = "shape_fact" if rule.extent is ExtentKind.SHAPE else "stride_fact"
        return f"{array}.{method}({rule.dim})"

    def integer_generic(self, value: str, name: str) -> str:
        return f'i64::from(rt::to_i32({value}, "{name}")?)'

    def constant(self, name: str) -> str:
        return _const_var(name, self.constant_names)

    def parameter(self, source: ParamSource) -> str:
        if source.kind == "table":
            return f"args.{source.array}.table.data"
        if source.kind == "length":
            return f"args.{source.array}.len_i32()"
        if source.kind == "pointer":
            return f"args.{source.array}.data"
        if source.kind == "shape":
            return f"args.{source.array}.shape_i32({source.dim})"
        if source.kind == "stride":
            return f"args.{source.array}.stride_i32({source.dim})"
        field = f"args.{_scalar_field(source.scalar or '', self.scalar_names)}"
        return f"{field} as {source.reinterpret}" if source.reinterpret else field


class _Generator:
    def __init__(self, binding: OperatorBinding) -> None:
        self.binding = binding
        self.dims = binding.bound_symbols
        self.lists = {a.name for a in binding.arrays if a.is_list}
        first = binding.arrays[0].name
        self.base_vars: dict[str, Variable] = {
            symbol: Variable(f"args.{_dim_var(symbol)}", Kind.INT) for symbol in self.dims
        }
        self.base_vars["dtype"] = Variable(f"args.{first}.dtype", Kind.DTYPE)
        # A constant the caller passes can decide the variant.
        self.base_vars.update(
            {
                s.name: _scalar_variable(
                    s.name, s.dtype, "args.", [a.name for a in binding.scalars]
                )
                for s in binding.scalars
                if s.constant
            }
        )
        self.base_vars["num_sms"] = Variable("num_sms", Kind.INT)
        self.imports = {"self as rt", "AbiResult", "Generic", "TensorArg"}
        self.scalar_names = [s.name for s in binding.scalars]
        self.constant_names = list(
            dict.fromkeys(name for v in binding.variants for name, _, _ in v.constants)
        )
        self.operands = _LibraryOperands(self.lists, self.scalar_names, self.constant_names)

    # -- check(): descriptors and dimensions ----------------------------------------

    def check_lines(self) -> list[str]:
        lines = [self._read_line(a) for a in self.binding.arrays]
        lines += [
            f"{a.name}.require_unit_stride({a.unit_stride_dim})?;"
            for a in self.binding.arrays
            if a.unit_stride_dim is not None
        ]
        local = Transpiler({s: Variable(_dim_var(s), Kind.INT) for s in self.dims})
        for array in self.binding.arrays:
            lines += self._dim_lines(array, local, set(self.dims))
        return lines

    @staticmethod
    def _read_line(array: ArrayBinding) -> str:
        if not array.is_list:
            return (
                f"let {array.name} = unsafe {{ "
                f'rt::tensor_arg({array.name}, "{array.name}", {array.rank})? }};'
            )
        params = list_params(array.name)
        names = ", ".join(f'"{name}"' for name in params)
        return (
            f"let {array.name} = unsafe {{ rt::list_arg({', '.join(params)}, "
            f"[{names}], {array.rank})? }};"
        )

    def _length_lines(self, array: ArrayBinding, local: Transpiler, dims: set[str]) -> list[str]:
        rule = array.length
        if rule is None:
            return []
        if rule.binds:
            return [f"let {_dim_var(rule.binds)} = {array.name}.len();"]
        if rule.expected is not None and _names(rule.expected) <= dims:
            code = self._expr(local, rule.expected, Kind.INT)
            return [f'{array.name}.require_len({code}, "{rule.expected}")?;']
        return []

    def _dim_lines(self, array: ArrayBinding, local: Transpiler, dims: set[str]) -> list[str]:
        lines = self._length_lines(array, local, dims)
        for rule in array.dims:
            if rule.binds:
                lines.append(f"let {_dim_var(rule.binds)} = {array.name}.dim({rule.dim});")
                if array.is_list:
                    # The first element binds the symbol; every element must agree.
                    var = _dim_var(rule.binds)
                    lines.append(f'{array.name}.require_dim({rule.dim}, {var}, "{rule.binds}")?;')
            elif _names(rule.expected) <= dims and rule.expected is not None:
                code = self._expr(local, rule.expected, Kind.INT)
                lines.append(f'{array.name}.require_dim({rule.dim}, {code}, "{rule.expected}")?;')
        return lines

    def array_fields(self) -> list[str]:
        return [f"{a.name}: {'ListArg' if a.is_list else 'TensorArg'}" for a in self.binding.arrays]

    def kept_dims(self, derive_body: list[str]) -> list[str]:
        """The symbols derive() reads; the others are only checked, in check()."""
        text = "\n".join(derive_body)
        return [s for s in self.dims if re.search(rf"\bargs\.{_dim_var(s)}\b", text)]

    def args_fields(self, dims: list[str]) -> list[str]:
        fields = [a.name for a in self.binding.arrays] + [_dim_var(s) for s in dims]
        return fields + [
            f"{_scalar_field(s.name, self.scalar_names)}: {s.name}" for s in self.binding.scalars
        ]

    def extra_fields(self, dims: list[str]) -> list[str]:
        fields = [f"{_dim_var(s)}: i64" for s in dims]
        return fields + [
            f"{_scalar_field(s.name, self.scalar_names)}: {s.rust_type}"
            for s in self.binding.scalars
        ]

    # -- derive(): one block per variant ------------------------------------------------

    def derive_body(self) -> list[str]:
        """The statements of derive(): the first variant whose condition holds wins;
        an unconditional variant ends the chain."""
        lines: list[str] = []
        for variant in self.binding.variants:
            condition, body = self._variant(variant)
            if condition == "true" and not variant.literals:
                return [*lines, *body, _derived(variant.index)]
            done = f"return {_derived(variant.index)};"
            lines.append(f"if {condition} {{")
            if variant.literals:  # the body ends inside its literal guard
                lines += [f"    {line}" for line in [*body, f"    {done}", "}"]]
            else:
                lines += [f"    {line}" for line in [*body, done]]
            lines.append("}")
        return [*lines, 'rt::fail(Status::BadShape, "no variant\'s dispatch condition holds")']

    def _variant(self, variant: VariantBinding) -> tuple[str, list[str]]:
        """The variant's condition and body; a literal entry's body opens a guard on its
        constants (closed by the caller after the return)."""
        # A value the entry holds as a literal, from a constant the caller passes, must
        # be the caller's (binding.held_values); otherwise the next variant is tried.
        passed = {s.name for s in self.binding.scalars if s.constant}
        held = variant.held_conditions(passed)
        when = " and ".join(f"({part})" for part in [variant.when, *held]) if held else variant.when
        condition = self._expr(Transpiler(self.base_vars), when, Kind.BOOL)
        variables = dict(self.base_vars)
        variables.update(
            {
                s.name: _scalar_variable(s.name, s.dtype, "args.", self.scalar_names)
                for s in self.binding.scalars
            }
        )
        head: list[str] = []
        for name, kind, value in variant.constants:
            want = {"int": Kind.INT, "float": Kind.FLOAT, "bool": Kind.BOOL}[kind]
            code = self._expr(Transpiler(variables), value, want)
            local = _const_var(name, self.constant_names)
            head.append(f"let {local}: {want.value} = {code};")
            variables[name] = Variable(local, want)
        body: list[str] = []
        body += self._deferred_dim_checks(Transpiler(variables))
        body += self._dtype_lines(variant)
        body += [self._precondition_line(p) for p in variant.preconditions]
        grid = ", ".join(self._expr(Transpiler(variables), g, Kind.INT) for g in variant.grid)
        body.append(f"let grid = [{grid}];")
        body.append("rt::launch_grid(grid)?;")
        transpiler = Transpiler(variables)
        generics = ", ".join(
            generic_argument(
                rule, self.operands, lambda text: self._expr(transpiler, text, Kind.INT)
            )
            for rule in variant.generics
        )
        body.append(f"let generics = vec![{generics}];")
        if not variant.literals:
            return condition, _underscore_unused_constants(head + body)
        guard = " && ".join(
            f"{_const_var(name, self.constant_names)} == {value}"
            for name, value in variant.literals
        )
        inner = [f"    {line}" for line in body]
        return condition, _underscore_unused_constants([*head, f"if {guard} {{", *inner])

    def _deferred_dim_checks(self, transpiler: Transpiler) -> list[str]:
        lines: list[str] = []
        for array in self.binding.arrays:
            length = array.length.expected if array.length is not None else None
            if length is not None and not _names(length) <= set(self.dims):
                code = self._expr(transpiler, length, Kind.INT)
                lines.append(f'args.{array.name}.require_len({code}, "{length}")?;')
            for rule in array.dims:
                if rule.binds or rule.expected is None or _names(rule.expected) <= set(self.dims):
                    continue
                code = self._expr(transpiler, rule.expected, Kind.INT)
                lines.append(
                    f'args.{array.name}.require_dim({rule.dim}, {code}, "{rule.expected}")?;'
                )
        return lines

    def _dtype_lines(self, variant: VariantBinding) -> list[str]:
        lines = []
        for array, dtypes in variant.allowed_dtypes.items():
            listed = ", ".join(f"Dtype::{camel(d.name)}" for d in dtypes)
            lines.append(f"args.{array}.require_dtype(&[{listed}])?;")
        for rule in variant.generics:
            if rule.kind == "element" and len(rule.arrays) > 1:
                refs = ", ".join(self.operands.tensor_ref(a) for a in rule.arrays)
                lines.append(f'rt::require_same_dtype(&[{refs}], "{rule.name}")?;')
        return lines

    def _precondition_line(self, pre: Precondition) -> str:
        if pre.kind == "address":
            return f"args.{pre.array}.require_address_divisible({pre.divisor})?;"
        if pre.kind == "table":
            return f"args.{pre.array}.require_table_divisible({pre.divisor})?;"
        if pre.kind == "length":
            return f"args.{pre.array}.require_len_divisible({pre.divisor})?;"
        self.imports.add("Extent")
        extent = "Extent::Shape" if pre.kind == "shape" else "Extent::Stride"
        return f"args.{pre.array}.require_divisible({extent}, {pre.dim}, {pre.divisor})?;"

    # -- launch(): one arm per variant ---------------------------------------------------

    def entry_statics(self) -> str:
        """One `rt::ProvenEntry` per entry the variants launch."""
        module = self.binding.rust_module_path.rsplit("::", 1)[-1]
        entries = dict.fromkeys(v.entry for v in self.binding.variants)
        return "\n\n".join(proven_entry_static("rt", "kernel", module, e) for e in entries)

    def launch_arm(self, variant: VariantBinding) -> str:
        """The variant's entry, launched with its parameters in order."""
        lines = [
            "// SAFETY: the entry's parameters in order, each of its type; the descriptors",
            "// passed every check and their memory is the caller's.",
            *proven_launch(
                "rt", variant, self.operands.parameter, "&derived.generics", "grid", "device"
            ),
        ]
        return f"        {variant.index} => {{\n{_indent(chr(10).join(lines), 12)}\n        }}"

    def table_writes(self) -> list[str]:
        """One call writing every list's table (none without lists): the stream's
        capture state is asked once, the context bound once."""
        lists = ", ".join(f"&args.{a.name}" for a in self.binding.arrays if a.is_list)
        return [f"unsafe {{ rt::write_tables(&[{lists}], device, stream)? }};"] if lists else []

    def device_arrays(self) -> str:
        """The `&[&TensorArg]` the device check covers: every array, each list's
        elements and table."""
        plain = ", ".join(f"&args.{a.name}" for a in self.binding.arrays if not a.is_list)
        if not self.lists:
            return f"&[{plain}]"
        lists = ", ".join(f"&args.{a.name}" for a in self.binding.arrays if a.is_list)
        return f"&rt::with_lists(&[{plain}], &[{lists}])"

    def c_params(self) -> list[str]:
        params: list[str] = []
        for array in self.binding.arrays:
            if array.is_list:
                elements, length, table = list_params(array.name)
                params += [
                    f"{elements}: *const Tensor",
                    f"{length}: i32",
                    f"{table}: *const Tensor",
                ]
            else:
                params.append(f"{array.name}: *const Tensor")
        return params + [f"{s.name}: {s.rust_type}" for s in self.binding.scalars]

    def call_args(self) -> list[str]:
        names: list[str] = []
        for array in self.binding.arrays:
            names += list(list_params(array.name)) if array.is_list else [array.name]
        return names + [s.name for s in self.binding.scalars]

    # -- helpers ---------------------------------------------------------------------------

    def _expr(self, transpiler: Transpiler, value: str | int | float | bool, want: Kind) -> str:
        try:
            return transpiler.expression(value, want)
        except TranspileError as exc:
            raise BindingError(str(exc)) from None


def _derived(index: int) -> str:
    return f"Ok(Derived {{ variant: {index}, grid, generics }})"


def _names(expected: str | int | None) -> set[str]:
    return names_in(expected) if isinstance(expected, str) else set()


def proven_entry_static(launcher: str, module_path: str, module: str, entry: str) -> str:
    """The `ProvenEntry` static of one entry of a port's kernel module: `launcher` is
    how the launcher file names proven.rs, `module_path` how it reaches the module."""
    return (
        f"/// `{entry}`, compiled as the kernel writer proved it.\n"
        f"static {entry_static(entry)}: {launcher}::ProvenEntry = "
        f"{launcher}::ProvenEntry::new(\n"
        f"    {module_path}::__module_ast_self,\n"
        f'    "{module}",\n'
        f'    "{entry}",\n'
        f"    {module_path}::_SOURCE_HASH,\n"
        ");"
    )


def proven_launch(
    launcher: str,
    variant: VariantBinding,
    argument: Callable[[ParamSource], str],
    generics: str,
    grid: str,
    device: str,
    entry: str | None = None,
) -> list[str]:
    """The expression that launches the variant's entry through proven.rs (the one
    launcher of every port) on `stream`: its parameters in order, each of its Rust
    type (a pointer as its device address), `argument` giving each one's value;
    `entry` the expression naming the entry where it is not the variant's static."""
    params = [
        f"{launcher}::param::<{_pushed_type(rust_type)}>(&{_operand(argument(source))}),"
        for (_, rust_type), source in zip(variant.param_types, variant.params, strict=True)
    ]
    return [
        "unsafe {",
        f"    {launcher}::launch_proven(",
        f"        {entry or '&' + entry_static(variant.entry)},",
        f"        {generics},",
        f"        {grid},",
        f"        {device},",
        "        stream,",
        "        &mut [",
        *(f"            {param}" for param in params),
        "        ],",
        "    )",
        "}",
    ]


def entry_static(entry: str) -> str:
    """The name of an entry's `ProvenEntry` static."""
    return entry.strip("_").upper()


def _operand(expression: str) -> str:
    """An expression as the operand of `&`: a cast in parentheses."""
    return f"({expression})" if " as " in expression else expression


def _pushed_type(rust_type: str) -> str:
    """A parameter's type as the launch passes it: a raw pointer is its device address."""
    return "u64" if rust_type.startswith("*") else rust_type


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _underscore_unused_constants(lines: list[str]) -> list[str]:
    """A constant the launcher derives but nothing reads (the spec needs it for the
    reference, the port does not) is bound as `_c_name`."""
    result: list[str] = []
    for index, line in enumerate(lines):
        match = re.match(r"let (c_\w+):", line)
        if match:
            name = match.group(1)
            later = "\n".join(lines[index + 1 :])
            if not re.search(rf"\b{name}\b", later):
                line = line.replace(f"let {name}:", f"let _{name}:", 1)
        result.append(line)
    return result


def generate_operator_rs(binding: OperatorBinding) -> str:
    """The text of `ffi/<op>.rs` for one operator."""
    generator = _Generator(binding)
    check_lines = generator.check_lines()
    derive_body = generator.derive_body()
    kept = generator.kept_dims(derive_body)
    launch_arms = [generator.launch_arm(v) for v in binding.variants]
    c_params = generator.c_params()
    if generator.lists:
        generator.imports.add("ListArg")
    if all(array.is_list for array in binding.arrays):
        generator.imports.discard("TensorArg")
    order = ["self as rt", "AbiResult", "Extent", "Generic", "ListArg", "TensorArg"]
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    text = environment.get_template("operator.rs.j2").render(
        spec_name=binding.spec_path.name,
        kernel_name=binding.kernel_path.name,
        kernel_fn=", ".join(sorted({v.entry for v in binding.variants})),
        symbol=binding.abi.symbol,
        plan_symbol=binding.abi.plan_symbol,
        rust_module_path=binding.rust_module_path,
        runtime_imports=", ".join(name for name in order if name in generator.imports),
        array_fields=generator.array_fields(),
        extra_fields=generator.extra_fields(kept),
        args_fields=generator.args_fields(kept),
        check_lines=check_lines,
        derive_body=derive_body,
        launch_arms=launch_arms,
        entry_statics=generator.entry_statics(),
        c_params=", ".join(c_params),
        c_params_sep=", " if c_params else "",
        call_args=", ".join(generator.call_args()),
        device_arrays=generator.device_arrays(),
        table_writes=generator.table_writes(),
        uses_num_sms=binding.uses_num_sms,
        num_sms_param="num_sms" if binding.uses_num_sms else "_num_sms",
    )
    return text
