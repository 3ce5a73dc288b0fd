"""How the C ABI of one operator binds to its port: the launcher's whole logic, as data.

`bind_operator` reads the port spec, the reference kernel's signature (its
parameter order) and the Rust kernel's entries, and decides for every variant:
which Rust entry runs, which Rust parameter receives which descriptor field,
what each generic argument is (a spec constant, a divisibility of an extent or
stride derived at launch as cuTile does, or the element type), and which
divisibilities the kernel assumes outright (preconditions the launcher checks).

A list of arrays (`list_length` in the spec) reaches the entry as its table
pointer and length; the element facts the kernel states about the table's
columns are const generics named after the list (`WEIGHTS_ALIGN`,
`WEIGHTS_SHAPE_0_DIV`, `WEIGHTS_STRIDE_0_DIV`, as the kernel writer names them)
or literals (preconditions every element must meet). A fact of a list is the
weakest over its elements.

The generator turns a binding into Rust (`ffi_gen`); `plan_for` computes the
same launch plan in Python from a resolved configuration, so tests can hold the
library's own plan (`cutile_<op>_plan`) against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from nodes.analyzer.source import SourceError, read_kernel_source
from nodes.host_builder.abi import (
    RUST_ELEMENT_TYPES,
    SCALAR_C_TYPES,
    DType,
    OperatorAbi,
    ScalarArg,
    list_params,
)
from nodes.host_builder.rust_entry import (
    ColumnAssumption,
    RustEntry,
    RustKernelModule,
    RustSourceError,
)
from nodes.kernel_writer.generics import fact_stem, generic_name
from schemas.gpu import LiteralDispatch
from schemas.port_spec import (
    ITEMSIZE,
    ArrayParam,
    PortSpec,
    PortSpecError,
    ResolvedArray,
    ResolvedConfig,
    kernel_parameter_order,
    spec_relative,
)
from schemas.spec_expr import ExprError, evaluate, evaluate_int, names_in

DEFAULT_NUM_SMS = 132
# A signed integer scalar may reach a parameter of the same width read unsigned.
SAME_BITS = {"i8": "u8", "i16": "u16", "i32": "u32", "i64": "u64"}


class BindingError(ValueError):
    """The port cannot be bound to a C ABI as it stands; the message says why."""


class ExtentKind(StrEnum):
    SHAPE = "shape"
    STRIDE = "stride"
    ADDRESS = "address"


@dataclass(frozen=True)
class DimRule:
    """One extent of an array: binds a dimension symbol, or is checked against an
    expression of symbols bound earlier."""

    dim: int
    binds: str | None = None
    expected: str | int | None = None


@dataclass(frozen=True)
class LengthRule:
    """The length of a list of arrays: binds a symbol, or is checked against an
    expression of symbols bound earlier."""

    binds: str | None = None
    expected: str | int | None = None


@dataclass(frozen=True)
class ArrayBinding:
    name: str
    rank: int
    spec_dtypes: tuple[DType, ...]
    unit_stride_dim: int | None
    dims: tuple[DimRule, ...]
    length: LengthRule | None = None  # set for a list of arrays (`dims` are its elements')

    @property
    def is_list(self) -> bool:
        return self.length is not None

    @property
    def table_columns(self) -> int:
        """Columns of a list's table: an element's address, shapes and strides."""
        return 1 + 2 * self.rank


@dataclass(frozen=True)
class ParamSource:
    """What one Rust entry parameter receives."""

    kind: str  # "pointer", "shape", "stride", "scalar"; for a list: "table", "length"
    array: str | None = None
    dim: int | None = None
    scalar: str | None = None
    pointee: str | None = None  # for pointers: a Rust element type or a type generic
    element: str | None = None  # for tables: the type the kernel reads elements as
    reinterpret: str | None = None  # for scalars: the Rust type the bits are passed as


@dataclass(frozen=True)
class GenericRule:
    """What one generic argument of the entry is at launch."""

    name: str
    # "constant", "derived" (a value the kernel computes from constants), "fact" (a
    # launch fact of an array), "element", "element_bytes"
    kind: str
    constant: str | None = None
    expression: str | None = None  # for "derived": the spec expression over constants
    array: str | None = None
    extent: ExtentKind | None = None
    dim: int | None = None
    arrays: tuple[str, ...] = ()  # for "element": the arrays of that element type
    const_type: str | None = None  # for "constant": the generic's Rust type


@dataclass(frozen=True)
class Precondition:
    """A divisibility the kernel states as a literal: the arguments must meet it (for
    a list: each of its elements; "table" and "length" are the list's own)."""

    array: str
    kind: str  # "address" (bytes), "shape" or "stride" (elements), "table", "length"
    dim: int | None
    divisor: int


@dataclass(frozen=True)
class VariantBinding:
    index: int
    name: str
    when: str
    entry: str
    constants: tuple[tuple[str, str, str | int | float | bool], ...]  # (name, type, value)
    grid: tuple[str | int, str | int, str | int]
    params: tuple[ParamSource, ...]
    generics: tuple[GenericRule, ...]
    preconditions: tuple[Precondition, ...]
    allowed_dtypes: dict[str, tuple[DType, ...]] = field(default_factory=dict)
    # An entry specialised to literal constants is taken only when the call's
    # constants are exactly these (several such entries can share a variant).
    literals: tuple[tuple[str, int], ...] = ()
    # The entry's parameters as (name, Rust type), in the order of `params`.
    param_types: tuple[tuple[str, str], ...] = ()
    # What the entry holds as a literal though the caller decides it: a constant, or
    # a value the kernel derives from constants, no generic and no parameter, with
    # the value every configuration proven on the entry gave it (`held_values`).
    held: tuple[tuple[str, int | float | bool], ...] = ()

    def takes(self, resolved: ResolvedConfig) -> bool:
        """Whether this binding launches `resolved` (its variant, its literals, and
        the values it holds)."""
        return (
            self.name == resolved.variant
            and all(resolved.constants.get(name) == value for name, value in self.literals)
            and all(evaluate(held, resolved.constants) == value for held, value in self.held)
        )

    def held_conditions(self, passed: set[str]) -> list[str]:
        """`(expression) == value` for each value the entry holds that a launcher can
        compare with its caller's: one computed from the constants in `passed` alone."""
        return [f"({e}) == {v!r}" for e, v in self.held if names_in(e) <= passed]


@dataclass(frozen=True)
class OperatorBinding:
    operator: str
    spec_path: Path
    kernel_path: Path
    kernel_module: str
    rust_module_path: str
    arrays: tuple[ArrayBinding, ...]
    scalars: tuple[ScalarArg, ...]
    variants: tuple[VariantBinding, ...]
    uses_num_sms: bool

    @property
    def abi(self) -> OperatorAbi:
        return OperatorAbi(
            name=self.operator,
            arrays=tuple(array.name for array in self.arrays),
            scalars=self.scalars,
            lists=frozenset(array.name for array in self.arrays if array.is_list),
        )

    @property
    def bound_symbols(self) -> list[str]:
        """The symbols the arguments bind (list lengths and extents), in binding order."""
        symbols: list[str] = []
        for array in self.arrays:
            if array.length is not None and array.length.binds:
                symbols.append(array.length.binds)
            symbols += [rule.binds for rule in array.dims if rule.binds]
        return symbols

    def variant_for(self, resolved: ResolvedConfig) -> VariantBinding:
        """The variant binding that launches `resolved` (BindingError when none does)."""
        for variant in self.variants:
            if variant.takes(resolved):
                return variant
        raise BindingError(
            f"no entry of variant {resolved.variant!r} takes configuration {resolved.name!r} "
            f"(its constants {dict(resolved.constants)})"
        )

    def unsupported_dtypes(self) -> dict[str, list[str]]:
        """Per array, the dtypes the spec allows but no variant of the port takes."""
        missing: dict[str, list[str]] = {}
        for array in self.arrays:
            taken = {d for v in self.variants for d in v.allowed_dtypes.get(array.name, ())}
            lacking = [d.spec_name for d in array.spec_dtypes if d not in taken]
            if lacking:
                missing[array.name] = lacking
        return missing


# --- binding ------------------------------------------------------------------------


def _binds(value: str | int, what: str, bound: set[str]) -> str | None:
    """The symbol `value` binds (a name no argument bound yet), else None after checking
    that every name it uses is bound."""
    if isinstance(value, str) and value.isidentifier() and value not in bound:
        bound.add(value)
        return value
    if isinstance(value, str):
        unbound = names_in(value) - bound
        if unbound:
            raise BindingError(
                f"{what} = {value!r} uses {sorted(unbound)} before any array binds them"
            )
    return None


def _array_binding(name: str, param: ArrayParam, bound: set[str]) -> ArrayBinding:
    if param.rank < 1:
        raise BindingError(f"array {name!r} has rank 0: pass it as a scalar")
    length: LengthRule | None = None
    if param.list_length is not None:
        symbol = _binds(param.list_length, f"{name}.list_length", bound)
        length = LengthRule(binds=symbol, expected=None if symbol else param.list_length)
    rules: list[DimRule] = []
    for dim, extent in enumerate(param.shape):
        symbol = _binds(extent, f"{name}.shape[{dim}]", bound)
        rules.append(DimRule(dim=dim, binds=symbol, expected=None if symbol else extent))
    innermost = param.memory_order[-1] if param.memory_order else param.rank - 1
    return ArrayBinding(
        name=name,
        rank=param.rank,
        spec_dtypes=tuple(DType.from_spec_name(d) for d in param.dtypes),
        unit_stride_dim=innermost,
        dims=tuple(rules),
        length=length,
    )


def _entry_for(
    module: RustKernelModule,
    spec: PortSpec,
    variant: str,
    multi: bool,
    entries: dict[str, str] | None,
) -> RustEntry:
    if entries is not None:
        if variant not in entries:
            raise BindingError(f"the kernel writer named no entry for variant {variant!r}")
        return module.entry(entries[variant])
    candidates = [f"{spec.kernel}_{variant}", spec.kernel] if multi else [spec.kernel]
    for name in candidates:
        if any(entry.name == name for entry in module.entries):
            return module.entry(name)
    if len(module.entries) == 1 and not multi:
        return module.entries[0]
    raise BindingError(
        f"no Rust entry for variant {variant!r}: expected one of {candidates} in {module.path.name}"
    )


def _calling_convention(spec: PortSpec, order: list[str]) -> list[ParamSource]:
    """What cuTile Python passes, per parameter: an array's pointer, shapes and strides;
    a list's table and length; a scalar."""
    expected: list[ParamSource] = []
    for name in order:
        if name in spec.arrays and spec.arrays[name].list_length is not None:
            expected += [ParamSource("table", array=name), ParamSource("length", array=name)]
        elif name in spec.arrays:
            rank = spec.arrays[name].rank
            expected.append(ParamSource("pointer", array=name))
            expected += [ParamSource("shape", array=name, dim=d) for d in range(rank)]
            expected += [ParamSource("stride", array=name, dim=d) for d in range(rank)]
        elif name in spec.scalars:
            expected.append(ParamSource("scalar", scalar=name))
    return expected


def _table_source(entry: RustEntry, source: ParamSource, table_param: str) -> ParamSource:
    """A list's table parameter: `*mut i64`, with the element type the kernel reads its
    addresses as (None when it never makes them pointers)."""
    if entry.param(table_param).pointee != "i64":
        raise BindingError(
            f"{entry.name}: parameter {table_param} should be `*mut i64`, the table of list "
            f"{source.array!r}, found `{entry.param(table_param).rust_type}`"
        )
    pointees = entry.table_reads({table_param}).pointees(table_param)
    if len(pointees) > 1:
        raise BindingError(
            f"{entry.name}: the elements of list {source.array!r} are read as several types "
            f"{sorted(pointees)}"
        )
    element = next(iter(pointees), None)
    return ParamSource("table", array=source.array, pointee="i64", element=element)


def _param_sources(spec: PortSpec, order: list[str], entry: RustEntry) -> tuple[ParamSource, ...]:
    expected = _calling_convention(spec, order)
    if len(expected) != len(entry.params):
        raise BindingError(
            f"entry {entry.name} takes {len(entry.params)} parameters; the cuTile calling "
            f"convention of {order} gives {len(expected)} (pointer, shape, strides per array; "
            "table and length per list)"
        )
    sources: list[ParamSource] = []
    for source, param in zip(expected, entry.params, strict=True):
        if source.kind == "table":
            sources.append(_table_source(entry, source, param.name))
        elif source.kind == "pointer":
            if param.pointee is None:
                raise BindingError(
                    f"{entry.name}: parameter {param.name} should be a raw pointer for "
                    f"array {source.array!r}, found `{param.rust_type}`"
                )
            sources.append(ParamSource("pointer", array=source.array, pointee=param.pointee))
        elif source.kind in ("shape", "stride", "length") and param.rust_type != "i32":
            raise BindingError(
                f"{entry.name}: parameter {param.name} ({source.kind} of {source.array}) "
                f"must be i32, found `{param.rust_type}`"
            )
        elif source.kind == "scalar" and source.scalar is not None:
            scalar = ScalarArg(
                source.scalar, DType.from_spec_name(spec.scalars[source.scalar].dtype)
            )
            if scalar.dtype not in SCALAR_C_TYPES:
                raise BindingError(
                    f"{entry.name}: scalar {source.scalar} ({scalar.dtype.spec_name}) has no C type"
                )
            if param.rust_type == scalar.rust_type:
                sources.append(source)
            elif SAME_BITS.get(scalar.rust_type) == param.rust_type:
                # Tile IR integers are signless: the kernel may read the bits unsigned.
                sources.append(replace(source, reinterpret=param.rust_type))
            else:
                raise BindingError(
                    f"{entry.name}: scalar {source.scalar} ({scalar.dtype.spec_name}) cannot be "
                    f"passed to parameter {param.name}: `{param.rust_type}`"
                )
        else:
            sources.append(source)
    return tuple(sources)


def _allowed_dtypes(
    spec: PortSpec, entry: RustEntry, sources: tuple[ParamSource, ...]
) -> dict[str, tuple[DType, ...]]:
    type_generics = {g.name for g in entry.generics if g.kind == "type"}
    allowed: dict[str, tuple[DType, ...]] = {}
    for source in sources:
        typed = source.pointee if source.kind == "pointer" else source.element
        if source.kind not in ("pointer", "table") or source.array is None:
            continue
        spec_dtypes = [DType.from_spec_name(d) for d in spec.arrays[source.array].dtypes]
        if typed is None:
            taken = spec_dtypes  # a list whose elements the kernel never dereferences
        elif typed in type_generics:
            taken = [d for d in spec_dtypes if d in RUST_ELEMENT_TYPES]
        else:
            pointee = typed.split("::")[-1]
            # Integer arrays reach a kernel that reads their bits unsigned as they are.
            taken = [
                d
                for d in spec_dtypes
                if pointee
                in (RUST_ELEMENT_TYPES.get(d), SAME_BITS.get(RUST_ELEMENT_TYPES.get(d, "")))
            ]
        if not taken:
            raise BindingError(
                f"{entry.name}: array {source.array!r} is `*mut {typed}`, which takes "
                f"none of the spec's dtypes {spec.arrays[source.array].dtypes}"
            )
        allowed[source.array] = tuple(taken)
    return allowed


def _param_positions(sources: tuple[ParamSource, ...], entry: RustEntry) -> dict[str, ParamSource]:
    return {param.name: source for param, source in zip(entry.params, sources, strict=True)}


def _typed_by(source: ParamSource, generic: str) -> bool:
    """Whether the array (or list elements) of `source` take the element type `generic`."""
    if source.kind == "pointer":
        return source.pointee == generic
    return source.kind == "table" and source.element == generic


def _generic_rules(
    spec: PortSpec,
    entry: RustEntry,
    sources: tuple[ParamSource, ...],
    arrays: tuple[ArrayBinding, ...],
    derived: dict[str, str],
) -> tuple[GenericRule, ...]:
    by_param = _param_positions(sources, entry)
    rules: list[GenericRule] = []
    for generic in entry.generics:
        if generic.kind == "type":
            typed = tuple(s.array for s in sources if _typed_by(s, generic.name) and s.array)
            if not typed:
                raise BindingError(f"{entry.name}: type generic {generic.name} types no array")
            rules.append(GenericRule(generic.name, "element", arrays=typed))
            continue
        sized = _element_bytes_rule(entry, generic.name, sources)
        if sized is not None:
            rules.append(sized)
            continue
        constant = constant_of_generic(spec, generic.name)
        if constant is not None:
            if spec.constants[constant].type == "float":
                raise BindingError(f"{entry.name}: constant {constant} is a float generic")
            rules.append(
                GenericRule(
                    generic.name,
                    "constant",
                    constant=constant,
                    const_type=generic.const_type,
                )
            )
            continue
        if generic.name in derived:
            rules.append(
                GenericRule(
                    generic.name,
                    "derived",
                    expression=derived[generic.name],
                    const_type=generic.const_type,
                )
            )
            continue
        fact = _fact_rule(entry, generic.name, by_param)
        if fact is None:
            fact = _list_fact_rule(entry, generic.name, sources, arrays)
        if fact is None:
            raise BindingError(
                f"{entry.name}: const generic {generic.name} is neither a spec constant, nor "
                "a value the kernel derives from constants, nor the divisor of an "
                "`assume_div_by`/`divisible` on a pointer, shape or stride, nor a list's "
                "element fact (`<LIST>_ALIGN`, `<LIST>_SHAPE_<d>_DIV`, `<LIST>_STRIDE_<d>_DIV`)"
            )
        rules.append(fact)
    return tuple(rules)


def _element_bytes_rule(
    entry: RustEntry, generic: str, sources: tuple[ParamSource, ...]
) -> GenericRule | None:
    """`<T>_BYTES` for a type generic `T` of the entry: the size of T's elements
    (a kernel's alignment assume that follows the dtype)."""
    type_generics = {g.name for g in entry.generics if g.kind == "type"}
    element = generic.removesuffix("_BYTES")
    if not generic.endswith("_BYTES") or element not in type_generics:
        return None
    typed = tuple(s.array for s in sources if _typed_by(s, element) and s.array)
    return GenericRule(generic, "element_bytes", arrays=typed) if typed else None


def _column(array: ArrayBinding, extent: ExtentKind, dim: int | None) -> int:
    """The table column holding an element's address, shape or stride."""
    if extent is ExtentKind.ADDRESS:
        return 0
    assert dim is not None
    return 1 + dim if extent is ExtentKind.SHAPE else 1 + array.rank + dim


def _column_fact(array: ArrayBinding, column: int) -> tuple[ExtentKind, int | None] | None:
    """The element fact a table column holds, or None past the columns."""
    if column == 0:
        return ExtentKind.ADDRESS, None
    if 1 <= column <= array.rank:
        return ExtentKind.SHAPE, column - 1
    if array.rank < column < array.table_columns:
        return ExtentKind.STRIDE, column - 1 - array.rank
    return None


def _list_fact_names(array: ArrayBinding) -> dict[str, tuple[ExtentKind, int | None]]:
    """The kernel writer's names of a list's element facts."""
    stem = fact_stem(array.name)
    names: dict[str, tuple[ExtentKind, int | None]] = {f"{stem}_ALIGN": (ExtentKind.ADDRESS, None)}
    for dim in range(array.rank):
        names[f"{stem}_SHAPE_{dim}_DIV"] = (ExtentKind.SHAPE, dim)
        names[f"{stem}_STRIDE_{dim}_DIV"] = (ExtentKind.STRIDE, dim)
    return names


def _list_fact_rule(
    entry: RustEntry,
    generic: str,
    sources: tuple[ParamSource, ...],
    arrays: tuple[ArrayBinding, ...],
) -> GenericRule | None:
    """A list's element fact, recognised by its name: the kernel applies it to values it
    reads from the table, which no entry parameter shows."""
    for array in arrays:
        fact = _list_fact_names(array).get(generic) if array.is_list else None
        if fact is None:
            continue
        extent, dim = fact
        for read in _column_assumptions(entry, sources, array.name):
            if read.divisor == generic and read.column != _column(array, extent, dim):
                raise BindingError(
                    f"{entry.name}: {generic} names {extent.value} {dim} of list "
                    f"{array.name!r} but the kernel applies it to table column {read.column}"
                )
        return GenericRule(generic, "fact", array=array.name, extent=extent, dim=dim)
    return None


def _column_assumptions(
    entry: RustEntry, sources: tuple[ParamSource, ...], array: str
) -> tuple[ColumnAssumption, ...]:
    """What the kernel states about the columns of list `array`'s table."""
    by_list = {
        s.array: p.name
        for p, s in zip(entry.params, sources, strict=True)
        if s.kind == "table" and s.array
    }
    table = by_list.get(array)
    if table is None:
        return ()
    return entry.table_reads({table}).assumptions


def _fact_rule(
    entry: RustEntry, generic: str, by_param: dict[str, ParamSource]
) -> GenericRule | None:
    for assumption in entry.assumptions:
        source = by_param.get(assumption.param)
        if assumption.divisor != generic or source is None:
            continue
        if source.kind in ("shape", "stride", "pointer") and source.array is not None:
            extent = ExtentKind.ADDRESS if source.kind == "pointer" else ExtentKind(source.kind)
            return GenericRule(generic, "fact", array=source.array, extent=extent, dim=source.dim)
    return None


def _preconditions(
    entry: RustEntry, sources: tuple[ParamSource, ...], arrays: tuple[ArrayBinding, ...]
) -> tuple[Precondition, ...]:
    by_param = _param_positions(sources, entry)
    found: list[Precondition] = []
    for assumption in entry.assumptions:
        divisor = assumption.literal
        source = by_param.get(assumption.param)
        if divisor is None or divisor <= 1 or source is None or source.array is None:
            continue
        kind = "address" if source.kind == "pointer" else source.kind
        found.append(Precondition(source.array, kind, source.dim, divisor))
    for array in arrays:
        if array.is_list:
            found += _element_preconditions(entry, sources, array)
    return tuple(dict.fromkeys(found))


def _element_preconditions(
    entry: RustEntry, sources: tuple[ParamSource, ...], array: ArrayBinding
) -> list[Precondition]:
    """Literal divisibilities the kernel states about values read from a list's table:
    each element must meet them."""
    found: list[Precondition] = []
    for read in _column_assumptions(entry, sources, array.name):
        divisor = read.literal
        fact = _column_fact(array, read.column)
        if divisor is None or divisor <= 1:
            continue
        if fact is None:
            raise BindingError(
                f"{entry.name}: the kernel assumes column {read.column} of list "
                f"{array.name!r}'s table divisible by {divisor}; the table has "
                f"{array.table_columns} columns"
            )
        extent, dim = fact
        found.append(Precondition(array.name, extent.value, dim, divisor))
    return found


CONSTANT_DTYPES = {"int": DType.INT64, "float": DType.FLOAT64, "bool": DType.BOOL}


def constant_of_generic(spec: PortSpec, generic: str) -> str | None:
    """The spec constant a const generic stands for, by the kernel writer's naming
    rule (`generics.generic_name`: the constant's own name, `block_n` is `block_n`),
    else None."""
    named = [name for name in spec.constants if generic_name(name) == generic]
    if len(named) > 1:
        raise BindingError(f"const generic {generic} names constants {', '.join(named)}")
    return named[0] if named else None


def host_constants(spec: PortSpec) -> tuple[ScalarArg, ...]:
    """The constants some configuration binds: the caller passes them (the launcher
    cannot derive a value the host chose), in the spec's order."""
    bound = {name for config, _ in spec.all_configs() for name in config.constants}
    return tuple(
        ScalarArg(name, CONSTANT_DTYPES[param.type], constant=True)
        for name, param in spec.constants.items()
        if name in bound
    )


def _variant_constants(
    spec: PortSpec, variant_constants: dict[str, str | int | float | bool], passed: set[str]
) -> tuple[tuple[str, str, str | int | float | bool], ...]:
    """Each constant's value at launch: the argument of a passed one, else the
    variant's binding or the default."""
    constants: list[tuple[str, str, str | int | float | bool]] = []
    for name, param in spec.constants.items():
        value = name if name in passed else variant_constants.get(name, param.default)
        if value is None:
            raise BindingError(
                f"constant {name!r} has no default and the variant does not bind it: the "
                "launcher cannot derive it"
            )
        constants.append((name, param.type, value))
    return tuple(constants)


def bind_operator(
    spec: PortSpec,
    spec_path: Path,
    kernel: RustKernelModule,
    rust_module_path: str,
    entries: dict[str, str] | None = None,
    literal_entries: list[LiteralDispatch] | None = None,
) -> OperatorBinding:
    """Decide how `cutile_<op>` launches the port; raises BindingError with the reason.
    `entries` maps each variant to its Rust entry when the kernel writer said so;
    otherwise the entry is `<kernel>_<variant>` or `<kernel>`. A variant with
    `literal_entries` gets one binding per entry, each taken only for its constants."""
    try:
        order = kernel_parameter_order(spec, spec_path)
    except PortSpecError as exc:
        raise BindingError("; ".join(message for _, message in exc.problems)) from None
    bound: set[str] = set()
    arrays = tuple(
        _array_binding(name, spec.arrays[name], bound) for name in order if name in spec.arrays
    )
    _check_c_names(order, arrays)
    passed = host_constants(spec)
    scalars = (
        *(
            ScalarArg(name, DType.from_spec_name(spec.scalars[name].dtype))
            for name in order
            if name in spec.scalars
        ),
        *passed,
    )
    passed_names = {arg.name for arg in passed}
    multi = len(spec.variants) > 1
    derived = _derived_generics(spec, spec_path)
    variants: list[VariantBinding] = []
    for variant in spec.variants:
        literal = [e for e in literal_entries or [] if e.variant == variant.name]
        try:
            chosen = (
                [(kernel.entry(e.entry), tuple(sorted(e.constants.items()))) for e in literal]
                if literal
                else [(_entry_for(kernel, spec, variant.name, multi, entries), ())]
            )
        except RustSourceError as exc:
            raise BindingError(str(exc)) from None
        for entry, literals in chosen:
            sources = _param_sources(spec, order, entry)
            grid = [*(variant.grid or spec.grid)] + [1] * (3 - len(variant.grid or spec.grid))
            variants.append(
                VariantBinding(
                    index=len(variants),
                    name=variant.name,
                    when=variant.when,
                    entry=entry.name,
                    constants=_variant_constants(spec, dict(variant.constants), passed_names),
                    grid=(grid[0], grid[1], grid[2]),
                    params=sources,
                    generics=_generic_rules(spec, entry, sources, arrays, derived),
                    preconditions=_preconditions(entry, sources, arrays),
                    allowed_dtypes=_allowed_dtypes(spec, entry, sources),
                    literals=literals,
                    param_types=tuple((p.name, p.rust_type) for p in entry.params),
                )
            )
            variants[-1] = replace(variants[-1], held=held_values(spec, variants[-1], derived))
    return OperatorBinding(
        operator=spec.name,
        spec_path=spec_path,
        kernel_path=kernel.path,
        kernel_module=kernel.module,
        rust_module_path=rust_module_path,
        arrays=arrays,
        scalars=scalars,
        variants=tuple(variants),
        uses_num_sms=_uses_num_sms(spec),
    )


def held_values(
    spec: PortSpec, variant: VariantBinding, derived: dict[str, str]
) -> tuple[tuple[str, int | float | bool], ...]:
    """Each spec expression the entry holds as a literal, with its value: a constant
    the variant binds to a literal, or one the caller passes, that the entry takes
    neither as a generic nor as a parameter (a float as `eps` is always one), or a
    value the kernel derives from constants (`cdiv(N, TILE_SIZE)`) that it does not
    take as a generic while some constant it derives from is one. Every test
    configuration the entry was proven on gives the same value; a launch giving
    another is not the launch proven, and is refused.
    Where those configurations differ, the entry was proven alike on each, so its
    code does not depend on the value."""
    taken = {rule.constant for rule in variant.generics if rule.kind == "constant"}
    taken |= {s.scalar for s in variant.params if s.kind == "scalar" and s.scalar}
    taken |= {name for name, _ in variant.literals}
    taken_derived = {rule.expression for rule in variant.generics if rule.kind == "derived"}
    held: list[tuple[str, int | float | bool]] = [
        (name, value)
        for name, _, value in variant.constants
        if not isinstance(value, str) and name not in taken
    ]
    passed = [name for name, _, value in variant.constants if value == name]
    candidates = [name for name in passed if name not in taken]
    candidates += [
        expression
        for expression in dict.fromkeys(derived.values())
        if expression not in taken_derived
        and names_in(expression) & taken
        and _bare(expression) != _bare(variant.when)  # the variant's condition checks it
    ]
    proven = [
        resolved
        for resolved in (spec.resolve(config, "test") for config in spec.test_configs)
        if variant.takes(resolved)
    ]
    for expression in candidates:
        try:
            values = {evaluate(expression, resolved.constants) for resolved in proven}
        except ExprError:
            continue  # derived from a name no configuration binds: nothing to compare
        if len(values) == 1 and not isinstance(value := values.pop(), str):
            held.append((expression, value))
    return tuple(held)


def _bare(condition: str) -> str:
    """A condition without spaces, parentheses and a leading `not`: what it tests."""
    return re.sub(r"[()\s]", "", condition).removeprefix("not")


def _derived_generics(spec: PortSpec, spec_path: Path) -> dict[str, str]:
    """The generics the kernel writer names after a local the kernel derives from its
    constants (`num_tiles`), each with the local's spec expression."""
    try:
        source = read_kernel_source(spec_relative(spec_path, spec.source), spec.kernel)
    except SourceError:
        return {}
    return {generic_name(name): expression for name, expression in source.derived.items()}


def _check_c_names(order: list[str], arrays: tuple[ArrayBinding, ...]) -> None:
    """A list's extra C parameters (`<name>_len`, `<name>_table`) must not collide."""
    names = list(order)
    for array in arrays:
        if array.is_list:
            names += list(list_params(array.name)[1:])
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise BindingError(f"C parameter names {clashes} would be declared twice")


def _uses_num_sms(spec: PortSpec) -> bool:
    texts: list[str] = [v.when for v in spec.variants]
    texts += [g for v in spec.variants for g in (v.grid or []) if isinstance(g, str)]
    texts += [g for g in spec.grid if isinstance(g, str)]
    texts += [str(c.default) for c in spec.constants.values() if isinstance(c.default, str)]
    texts += [c for v in spec.variants for c in v.constants.values() if isinstance(c, str)]
    return any("num_sms" in names_in(text) for text in texts)


# --- the plan, computed in Python -------------------------------------------------------


@dataclass(frozen=True)
class LaunchPlan:
    variant: int
    grid: tuple[int, int, int]
    generics: tuple[int, ...]
    generic_texts: tuple[str, ...]


FACT_ALIGNMENT = 16


def divisibility(value: int) -> int:
    """The largest power of two (at most 16) dividing `value`; 16 for zero. This is
    cutile's launch-time hint for a pointer or integer parameter (`DivHint`)."""
    if value == 0:
        return 16
    return min(value & -value, 16)


def fact_value(extent: ExtentKind, value: int, itemsize: int) -> int:
    """The divisibility a cuTile Python launch states (16 or nothing, strides counted
    in elements); the rule of `toolchain.reference_export.launch_facts`."""
    if extent is ExtentKind.STRIDE:
        if value == 1 or (value * itemsize) % FACT_ALIGNMENT:
            return 1
        return max(FACT_ALIGNMENT // itemsize, 1)
    return FACT_ALIGNMENT if value % FACT_ALIGNMENT == 0 else 1


def _generic_value(
    rule: GenericRule, constants: dict[str, bool | int | float], arrays: dict[str, ResolvedArray]
) -> tuple[int, str]:
    if rule.kind == "derived" and rule.expression is not None:
        derived = evaluate_int(rule.expression, constants)
        return derived, str(derived)
    if rule.kind == "constant" and rule.constant is not None:
        value = constants[rule.constant]
        if isinstance(value, bool):
            return int(value), str(value).lower()
        return int(value), str(int(value))
    if rule.kind == "element":
        dtype = DType.from_spec_name(arrays[rule.arrays[0]].dtype)
        return int(dtype), RUST_ELEMENT_TYPES[dtype]
    if rule.kind == "element_bytes":
        size = ITEMSIZE[arrays[rule.arrays[0]].dtype]
        return size, str(size)
    assert rule.array is not None and rule.extent is not None
    array = arrays[rule.array]
    itemsize = ITEMSIZE[array.dtype]
    if rule.extent is ExtentKind.ADDRESS:
        raw = array.storage_offset * itemsize  # a fresh allocation is 256-byte aligned
    else:
        assert rule.dim is not None
        raw = (array.shape if rule.extent is ExtentKind.SHAPE else array.strides)[rule.dim]
    value = fact_value(rule.extent, raw, itemsize)
    return value, str(value)


INTEGER_TYPES = frozenset(SAME_BITS) | frozenset(SAME_BITS.values())


def launch_hints(variant: VariantBinding, resolved: ResolvedConfig) -> dict[str, int]:
    """The divisibility cutile-rs's launcher assumes of each entry parameter at this
    configuration's launch: for every integer scalar and raw pointer it takes the
    argument's value (`divisibility`) and compiles an `assume div_by` into the
    kernel when it is above 1, whatever the kernel itself states. A fresh allocation
    is 256-byte aligned; a list's table is one."""
    hints: dict[str, int] = {}
    for (name, rust_type), source in zip(variant.param_types, variant.params, strict=True):
        value: int | None = None
        array = resolved.arrays.get(source.array or "")
        if source.kind == "pointer" and array is not None:
            value = array.storage_offset * ITEMSIZE[array.dtype]
        elif source.kind == "table":
            value = 0
        elif source.kind in ("shape", "stride") and array is not None and source.dim is not None:
            value = (array.shape if source.kind == "shape" else array.strides)[source.dim]
        elif source.kind == "length" and array is not None:
            value = array.list_length
        elif source.kind == "scalar" and rust_type in INTEGER_TYPES:
            scalar = source.scalar or ""
            if scalar in resolved.scalars or scalar in resolved.constants:
                value = int(resolved.argument(scalar))
        if value is not None and divisibility(value) > 1:
            hints[name] = divisibility(value)
    return hints


def facts_beyond_kernel(
    binding: OperatorBinding, resolved: ResolvedConfig
) -> dict[str, tuple[int, int]]:
    """The parameters whose launch hint (`launch_hints`) is stronger than what the
    kernel states of them at this configuration, a launch fact generic or a literal:
    name -> (the launcher's divisor, the kernel's). Empty: the launcher compiles the
    proven code. Otherwise it compiles other code (docs/UPSTREAM_GAPS.md, G17)."""
    variant = binding.variant_for(resolved)
    plan = plan_for(binding, resolved)
    stated: dict[tuple[str, str, int | None], int] = {}
    for rule, value in zip(variant.generics, plan.generics, strict=True):
        if rule.kind == "fact" and rule.array is not None and rule.extent is not None:
            stated[(rule.array, rule.extent.value, rule.dim)] = value
    for pre in variant.preconditions:
        key = (pre.array, pre.kind, pre.dim)
        stated[key] = max(stated.get(key, 1), pre.divisor)
    hints = launch_hints(variant, resolved)
    beyond: dict[str, tuple[int, int]] = {}
    for (name, _), source in zip(variant.param_types, variant.params, strict=True):
        if name not in hints:
            continue
        kind = "address" if source.kind == "pointer" else source.kind
        own = stated.get((source.array or "", kind, source.dim), 1)
        if hints[name] > own:
            beyond[name] = (hints[name], own)
    return beyond


def plan_for(binding: OperatorBinding, resolved: ResolvedConfig) -> LaunchPlan:
    """The launch plan of one resolved configuration, as `cutile_<op>_plan` computes it."""
    variant = binding.variant_for(resolved)
    env: dict[str, bool | int | float | str] = dict(resolved.dims)
    env.update(resolved.constants)
    env.update(resolved.scalars)
    env["dtype"] = resolved.dtype
    env["num_sms"] = DEFAULT_NUM_SMS
    grid = tuple(evaluate_int(g, env) for g in variant.grid)
    if 0 in grid:
        grid = (0, 0, 0)  # nothing to launch; the library reports it so too
    values = [_generic_value(r, resolved.constants, resolved.arrays) for r in variant.generics]
    return LaunchPlan(
        variant=variant.index,
        grid=(grid[0], grid[1], grid[2]),
        generics=tuple(v for v, _ in values),
        generic_texts=tuple(t for _, t in values),
    )
