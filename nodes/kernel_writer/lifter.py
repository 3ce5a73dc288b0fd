"""Lift one reference entry (cuda_tile IR) into the body of a cutile-rs kernel.

Every live op of the reference becomes one Rust statement, in the reference's
order, written with the construct of `op_table` that compiles back to exactly
that op and attributes. Constants are bound where the reference defines them,
so they land at the same place in the generated IR; constants no op uses are
left out (the canonical diff ignores them on both sides).

Values live in Rust in one of a few forms: a scalar (`i32`, `f32`, `bool`), a
`Tile`, a `PointerTile`, a `Token`, a tensor or partition view, or a component
of a tuple/array result (`pid.0`, `tiles[1]`). A use that needs another form
converts with `scalar_to_tile` / `tile_to_scalar`, which emit no IR.

Control flow follows cutile-rs's lowering: loop-carried values are `let mut`
variables (cutile carries them in name order, so names are chosen to sort in
the reference's order), and a `loop` that starts with `if c {} else { break }`
is a `while` loop. An `if` inside a loop is Blocked: cutile would thread every
loop-carried value through it (docs/UPSTREAM_GAPS.md, G8).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from nodes.kernel_writer.elements import ElementTypes, infer_elements
from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.literals import constant_literal, integral_float
from nodes.kernel_writer.naming import NameAllocator, SourceNames, location_line, snake
from nodes.kernel_writer.op_table import SUPPORTED_OPS
from nodes.kernel_writer.rust_types import (
    DTYPE_BYTES,
    ELEMENT_BYTES_GENERIC,
    TileInfo,
    is_float,
    shape_braces,
    shape_macro,
    tile_info,
)
from tileir.ir import Entry, Op, Region
from tileir.resolve import Resolved, resolve
from tileir.types import ViewType, parse_view

Form = Literal["scalar", "tile", "ptr", "token", "tensor", "view"]
INDENT = "    "
FACT_HELPER = "divisible"
SCALAR_ELEMENTS = frozenset({"i32", "u32", "i64", "u64", "f32", "f64", "bool"})
UNMAPPED = "no cutile-rs construct is mapped for it"

ROUNDING = {
    "nearest_even": "rounding::NearestEven",
    "zero": "rounding::Zero",
    "negative_inf": "rounding::NegativeInf",
    "positive_inf": "rounding::PositiveInf",
    "approx": "rounding::Approx",
    "full": "rounding::Full",
    "nearest_int_to_zero": "rounding::NearestIntToZero",
}
OVERFLOW = {
    "no_signed_wrap": "overflow::NoSignedWrap",
    "nsw": "overflow::NoSignedWrap",
    "no_unsigned_wrap": "overflow::NoUnsignedWrap",
    "nuw": "overflow::NoUnsignedWrap",
    "no_wrap": "overflow::NoWrap",
    "nw": "overflow::NoWrap",
}
PREDICATE = {
    "equal": ("predicate::Equal", "=="),
    "not_equal": ("predicate::NotEqual", "!="),
    "less_than": ("predicate::LessThan", "<"),
    "less_than_or_equal": ("predicate::LessThanOrEqual", "<="),
    "greater_than": ("predicate::GreaterThan", ">"),
    "greater_than_or_equal": ("predicate::GreaterThanOrEqual", ">="),
}
ORDERING = {
    "weak": "ordering::Weak",
    "relaxed": "ordering::Relaxed",
    "acquire": "ordering::Acquire",
    "release": "ordering::Release",
    "acq_rel": "ordering::AcqRel",
}
SCOPE = {"tl_blk": "scope::TileBlock", "device": "scope::Device", "sys": "scope::System"}
PADDING = {
    "none": "padding::None",
    "zero": "padding::Zero",
    "neg_zero": "padding::NegZero",
    "nan": "padding::Nan",
    "pos_inf": "padding::PosInf",
    "neg_inf": "padding::NegInf",
}
SIGNEDNESS = {"signed": "signedness::Signed", "unsigned": "signedness::Unsigned"}
ATOMIC_MODE = {
    "add": "atomic::Add",
    "addf": "atomic::AddF",
    "and": "atomic::And",
    "or": "atomic::Or",
    "xor": "atomic::Xor",
    "max": "atomic::Max",
    "min": "atomic::Min",
    "umax": "atomic::Umax",
    "umin": "atomic::Umin",
    "xchg": "atomic::Xchg",
}
BINARY_OPERATORS = {
    "addi": "+",
    "subi": "-",
    "muli": "*",
    "divi": "/",
    "remi": "%",
    "andi": "&",
    "ori": "|",
    "xori": "^",
    "shli": "<<",
    "shri": ">>",
    "addf": "+",
    "subf": "-",
    "mulf": "*",
    "divf": "/",
}
REDUCE_HELPERS = {
    "addf": "reduce_sum",
    "addi": "reduce_sum",
    "mulf": "reduce_prod",
    "muli": "reduce_prod",
    "maxf": "reduce_max",
    "maxi": "reduce_max",
    "minf": "reduce_min",
    "mini": "reduce_min",
}
UNARY_MATH = frozenset(
    {
        "negf",
        "negi",
        "absf",
        "absi",
        "log",
        "log2",
        "sin",
        "cos",
        "tan",
        "sinh",
        "cosh",
        "floor",
        "ceil",
    }
)
# Binary ops with no attributes, written in their function form (`fpowf(x, y)`).
BINARY_MATH = frozenset({"fpowf", "remf", "mulhii", "atan2"})
FTZ_UNARY = frozenset({"exp2", "rsqrt"})
OP_NAMES = {
    "cat": "joined",
    "load_view_tko": "tile",
    "load_ptr_tko": "loaded",
    "reduce": "reduced",
    "scan": "scanned",
    "reshape": "reshaped",
    "broadcast": "bcast",
    "mmaf": "acc",
    "mmai": "acc",
    "mmaf_scaled": "acc",
    "mulhii": "high",
    "atan2": "angle",
    "pack": "packed",
    "unpack": "unpacked",
    "print_tko": "printed",
    "ptr_to_ptr": "cast",
    "alloca": "scratch",
    "ptr_to_int": "address",
    "iota": "lanes",
    "offset": "ptrs",
    "select": "picked",
    "cmpi": "cond",
    "cmpf": "cond",
    "exti": "wide",
    "trunci": "narrow",
    "ftof": "converted",
    "itof": "as_float",
    "ftoi": "as_int",
    "bitcast": "bits",
    "permute": "permuted",
    "extract": "part",
    "constant": "cst",
    "join_tokens": "joined",
    "int_to_ptr": "ptr",
    "if": "chosen",
}


# A launch fact's place: (entry argument, -1) for an array's own argument,
# (entry argument, column) for a column of a list's table.
FactSlot = tuple[int, int]


@dataclass(frozen=True)
class ParamLayout:
    """One kernel parameter as the cuTile Python calling convention passes it:
    an array is a base pointer followed by `ndim` shape and `ndim` stride
    arguments; a list of arrays is the device address of its (length, 1 + 2 *
    ndim) int64 table of element addresses, shapes and strides, then the
    length; a scalar is one argument; constants pass nothing."""

    name: str
    kind: Literal["array", "list", "scalar"]
    dtype: str
    ndim: int = 0
    generic: bool = False

    @property
    def arguments(self) -> int:
        """How many entry arguments the calling convention passes for it."""
        return {"array": 1 + 2 * self.ndim, "list": 2, "scalar": 1}[self.kind]


_MLIR_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|.)")


def mlir_string(text: str) -> str:
    """The value of an MLIR string attribute as printed (`"a\\0Ab"`): the quotes
    dropped, `\\XX` a byte in hex, `\\"` and `\\\\` themselves; the bytes read as UTF-8."""
    body = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    out = bytearray()
    at = 0
    for found in _MLIR_ESCAPE.finditer(body):
        out += body[at : found.start()].encode()
        code = found.group(1)
        out += bytes([int(code, 16)]) if len(code) == 2 else code.encode()
        at = found.end()
    out += body[at:].encode()
    return out.decode()


def rust_string(value: str) -> str:
    """A Rust string literal holding `value` exactly."""
    escaped = []
    for char in value:
        if char in '"\\':
            escaped.append("\\" + char)
        elif char == "\n":
            escaped.append("\\n")
        elif char.isprintable():
            escaped.append(char)
        else:
            escaped.append(f"\\u{{{ord(char):x}}}")
    return '"' + "".join(escaped) + '"'


@dataclass
class Binding:
    expr: str
    form: Form
    rust_type: str
    mutable: bool = False


@dataclass
class LiftedKernel:
    name: str
    params: list[str]
    body: list[str]
    module_items: set[str] = field(default_factory=set)
    constant_lines: dict[int, int] = field(default_factory=dict)  # body line -> op position
    entry_hints: str | None = None
    uses_element_generic: bool = False


@dataclass
class _Scope:
    """Where statements go, and what kind of region they are in."""

    lines: list[str]
    depth: int
    in_loop: bool


class Lifter:
    def __init__(
        self,
        entry: Entry,
        params: list[ParamLayout],
        kernel_name: str,
        source: SourceNames | None = None,
        fact_generics: dict[FactSlot, tuple[int, str]] | None = None,
        scalar_constants: frozenset[int] = frozenset(),
        constant_peers: Mapping[int, list[str]] | None = None,
        *,
        reserved: frozenset[str] = frozenset(),
    ) -> None:
        self.entry = entry
        self.fact_generics = fact_generics or {}
        self.scalar_constants = scalar_constants
        # The n-th constant op's value in the variant's other configurations.
        self.constant_peers = constant_peers or {}
        self.constant_ordinals = {
            id(op): n for n, op in enumerate(o for o in entry.walk() if o.name == "constant")
        }
        self.constant_lines: dict[int, int] = {}
        self.params = params
        self.kernel_name = kernel_name
        self.source = source or SourceNames()
        self.resolved: Resolved = resolve(entry)
        # `reserved`: the entry's possible const generic names, which no `let` may shadow.
        self.names = NameAllocator(set(reserved))
        self.bindings: dict[int, Binding] = {}
        self.module_items: set[str] = set()
        self.positions: dict[int, int] = {}
        self.last_use: dict[int, int] = {}
        self.statement_names: dict[int, str] = {}
        self.token_name: str | None = None
        self.elements = ElementTypes()
        self.generic_element = any(p.generic for p in params)
        self._number_ops()

    # -- entry --------------------------------------------------------------------

    def lift(self) -> LiftedKernel:
        self.check_mapped()
        signature, preamble, signs, generic_values = self.bind_params()
        self.elements = infer_elements(self.entry, self.resolved, signs, generic_values)
        signature, preamble = self.typed_params(signature, preamble)
        self.name_statements(self.entry.body)
        scope = _Scope(lines=[], depth=1, in_loop=False)
        for line in preamble:
            self.emit(scope, line)
        self.emit_region(self.entry.body, scope)
        return LiftedKernel(
            name=self.kernel_name,
            params=signature,
            body=scope.lines,
            module_items=self.module_items,
            constant_lines=self.constant_lines,
            entry_hints=self.entry_hints(),
            uses_element_generic=self.generic_element,
        )

    def check_mapped(self) -> None:
        """Blocked at the first op the op table has no construct for."""
        for op in self.entry.walk():
            if op.name not in SUPPORTED_OPS:
                raise Blocked(op.name, self.where(op), UNMAPPED)

    def typed_params(
        self, signature: list[str], preamble: list[str]
    ) -> tuple[list[str], list[str]]:
        """Put the inferred Rust element type (its sign) into `{value}` holes."""
        out = []
        # An array's dtype names its bits only: where the ops read an integer array
        # unsigned, its pointer is declared with the unsigned element (the C ABI passes
        # the same bits), so every use of the pointer has one type.
        pointees: dict[str, str] = {}
        for value in self.resolved.entry_args:
            element = self.elements.rust.get(value)
            binding = self.bindings.get(value)
            if element is None or binding is None:
                continue
            if binding.form == "scalar":
                binding.rust_type = element
            elif binding.form == "ptr":
                binding.rust_type = f"PointerTile<*mut {element}, {{ [] }}>"
                pointees[binding.expr] = element
        for line in signature:
            name, _, hole = line.partition(": ")
            if hole.startswith("{") and hole.endswith("}"):
                hole = self.elements.rust.get(int(hole[1:-1]), hole)
            elif name in pointees and hole.startswith("*mut ") and hole != "*mut E":
                hole = f"*mut {pointees[name]}"
            out.append(f"{name}: {hole}")
        return out, [_retyped_pointer(line, pointees) for line in preamble]

    def entry_hints(self) -> str | None:
        text = self.entry.attributes.get("optimization_hints", "")
        if not text:
            return None
        parts = []
        for arch, body in _split_hint_arches(text):
            if body:
                parts.append(f"{arch} = ({body},)" if "," not in body else f"{arch} = ({body})")
        return f"optimization_hints = ({', '.join(parts)},)" if parts else None

    def bind_params(self) -> tuple[list[str], list[str], dict[int, str], set[int]]:
        args = self.resolved.entry_args
        expected = sum(p.arguments for p in self.params)
        if expected != len(args):
            raise Blocked(
                "entry",
                f"IR line {self.entry.line}",
                f"the entry takes {len(args)} arguments but the kernel's parameters "
                f"({', '.join(p.name for p in self.params)}) pass {expected}",
            )
        signature: list[str] = []
        preamble: list[str] = []
        signs: dict[int, str] = {}
        generic_values: set[int] = set()
        index = 0
        for param in self.params:
            if param.kind == "scalar":
                value = args[index]
                name = self.names.fresh(param.name)
                element = _dtype_element(param.dtype)
                signature.append(f"{name}: {{{value}}}")
                self.bindings[value] = Binding(name, "scalar", element)
                signs[value] = "unsigned" if element.startswith("u") else "signed"
                index += 1
                continue
            if param.kind == "list":
                table, length = args[index], args[index + 1]
                name = self.names.fresh(param.name)
                length_name = self.names.fresh(f"{param.name}_len")
                table_type = "PointerTile<*mut i64, { [] }>"
                signature += [f"{name}: *mut i64", f"{length_name}: i32"]
                preamble.append(f"let {name}: {table_type} = pointer_to_tile({name});")
                self.bindings[table] = Binding(name, "ptr", table_type)
                self.bindings[length] = Binding(length_name, "scalar", "i32")
                signs[table] = signs[length] = "signed"
                if param.generic:
                    generic_values |= self.pointers_read_from(table)
                index += 2
                continue
            base = args[index]
            name = self.names.fresh(param.name)
            element = "E" if param.generic else _dtype_element(param.dtype)
            if param.generic:
                generic_values.add(base)
            elif element.startswith("u"):
                signs[base] = "unsigned"
            signature.append(f"{name}: *mut {element}")
            pointer_type = f"PointerTile<*mut {element}, {{ [] }}>"
            preamble.append(f"let {name}: {pointer_type} = pointer_to_tile({name});")
            self.bindings[base] = Binding(name, "ptr", pointer_type)
            for kind, offset in (("shape", 1), ("stride", 1 + param.ndim)):
                for dim in range(param.ndim):
                    value = args[index + offset + dim]
                    arg_name = self.names.fresh(f"{param.name}_{kind}_{dim}")
                    signature.append(f"{arg_name}: i32")
                    self.bindings[value] = Binding(arg_name, "scalar", "i32")
                    signs[value] = "signed"
            index += 1 + 2 * param.ndim
        return signature, preamble, signs, generic_values

    def pointers_read_from(self, table: int) -> set[int]:
        """The `int_to_ptr` results whose address was read from a list's table:
        the list's elements, whose element type follows the dtype."""
        argument = self.resolved.entry_args.index(table)
        pointers = (
            self.resolved.result_ids(op)[0] for op in self.entry.walk() if op.name == "int_to_ptr"
        )
        return {
            pointer
            for pointer in pointers
            if (column := self.table_column(pointer)) and column[0] == argument
        }

    # -- positions and names ------------------------------------------------------

    def _number_ops(self) -> None:
        for position, op in enumerate(self.entry.walk()):
            self.positions[id(op)] = position
        for op in self.entry.walk():
            for value in self.resolved.operand_ids(op):
                here = self.positions[id(op)]
                self.last_use[value] = max(self.last_use.get(value, -1), here)
            if op.name in ("for", "loop"):
                end = max(self.positions[id(inner)] for inner in op.walk())
                for inner in op.walk():
                    for value in self.resolved.operand_ids(inner):
                        if self.last_use.get(value, -1) > self.positions[id(op)]:
                            self.last_use[value] = max(self.last_use[value], end)

    def where(self, op: Op) -> str:
        location = op.location or self.first_location(op)
        return location or f"IR line {op.line}"

    def first_location(self, op: Op) -> str | None:
        for inner in op.walk():
            if inner.location:
                return inner.location
        return None

    def name_statements(self, region: Region) -> None:
        """Name the last value each Python assignment computes after its target."""
        for block in region.blocks:
            last_for_statement: dict[int, Op] = {}
            for op in block.ops:
                line = location_line(self.first_location(op))
                if line is None or not op.results:
                    continue
                statement = self.source.statement_at(line)
                if statement is not None and len(statement.targets) == 1:
                    last_for_statement[statement.first_line] = op
                for inner in op.regions:
                    self.name_statements(inner)
            for first_line, op in last_for_statement.items():
                statement = self.source.statement_at(first_line)
                if statement is not None:
                    self.statement_names[id(op)] = statement.targets[0]

    def base_name(self, op: Op, index: int = 0) -> str:
        named = self.statement_names.get(id(op))
        if named is not None and index == 0:
            return named
        if op.name in BINARY_OPERATORS or op.name in UNARY_MATH:
            return op.name.rstrip("fi") if op.name not in ("divi", "divf") else "quot"
        return OP_NAMES.get(op.name, op.name)

    def fresh(self, base: str) -> str:
        return self.names.fresh(base)

    def shadow_name(self, op: Op, base: str) -> str:
        """The source's `t = f(t)`: shadow the operand's name when it is dead after op."""
        for operand in self.resolved.operand_ids(op):
            binding = self.bindings.get(operand)
            if binding is not None and binding.expr == snake(base):
                return self.shadow_or_fresh(op, operand, base)
        return self.fresh(base)

    def shadow_or_fresh(self, op: Op, operand: int, base: str) -> str:
        """Reuse the operand's variable name when the operand is dead after `op`
        (the reference's `x = f(x)` reads naturally as Rust shadowing)."""
        binding = self.bindings.get(operand)
        here = self.positions[id(op)]
        if (
            binding is not None
            and binding.expr.isidentifier()
            and not binding.mutable
            and self.last_use.get(operand, -1) <= here
            and snake(base) == binding.expr
        ):
            return binding.expr
        return self.fresh(base)

    # -- values -------------------------------------------------------------------

    def tile(self, value: int) -> TileInfo:
        info = tile_info(self.resolved.type_of(value))
        if info is None:
            raise ValueError(f"value {value} is not a tile")
        return info

    def element(self, value: int) -> str:
        return self.elements.of(value)

    def dims(self, value: int) -> tuple[str, ...]:
        return self.tile(value).dims

    def tile_type(self, value: int) -> str:
        info = self.tile(value)
        element = self.element(value)
        if info.pointer:
            return f"PointerTile<*mut {element}, {shape_braces(info.dims)}>"
        return f"Tile<{element}, {shape_braces(info.dims)}>"

    def scalar_type(self, value: int) -> str:
        return self.element(value)

    def prefers_scalar(self, value: int) -> bool:
        info = tile_info(self.resolved.type_of(value))
        return (
            info is not None
            and info.rank == 0
            and not info.pointer
            and self.element(value) in SCALAR_ELEMENTS
        )

    def use(self, value: int, want: Literal["scalar", "tile", "any"] = "any") -> str:
        binding = self.bindings.get(value)
        if binding is None:
            raise ValueError(f"value {self.resolved.values[value].name} used before definition")
        if want == "scalar" and binding.form == "tile":
            element = self.element(value)
            return f"tile_to_scalar::<{element}, {element}>({binding.expr})"
        if want == "tile" and binding.form == "scalar":
            return f"scalar_to_tile::<{self.element(value)}>({binding.expr})"
        return binding.expr

    def bind(self, value: int, expr: str, form: Form, rust_type: str) -> None:
        self.bindings[value] = Binding(expr, form, rust_type)

    def is_live(self, value: int) -> bool:
        return self.resolved.use_count[value] > 0

    def let(
        self,
        scope: _Scope,
        op: Op,
        value: int,
        form: Form,
        rust_type: str,
        rhs: str,
        base: str | None = None,
    ) -> None:
        """`let name: type = rhs;` for the value, naming it after the source."""
        name = self.shadow_name(op, base or self.base_name(op))
        if not self.is_live(value):
            name = "_" + name
        self.emit(scope, f"let {name}: {rust_type} = {rhs};")
        self.bind(value, name, form, rust_type)

    def emit(self, scope: _Scope, line: str) -> None:
        scope.lines.extend(INDENT * scope.depth + part for part in line.split("\n"))

    # -- regions ------------------------------------------------------------------

    def emit_region(self, region: Region, scope: _Scope) -> None:
        for block in region.blocks:
            for op in block.ops:
                self.comment_source(op, scope)
                self.emit_op(op, scope)

    def comment_source(self, op: Op, scope: _Scope) -> None:
        """A `// python line` comment at the first op of each new source statement."""
        line = location_line(self.first_location(op))
        if line is None:
            return
        statement = self.source.statement_at(line)
        if statement is None:
            return
        key = (statement.first_line, scope.depth)
        seen = getattr(scope, "_commented", None)
        if seen is None:
            seen = set()
            scope._commented = seen  # type: ignore[attr-defined]
        if key in seen:
            return
        seen.add(key)
        self.emit(scope, f"// {statement.text}")

    def emit_op(self, op: Op, scope: _Scope) -> None:
        handler: Callable[[Op, _Scope], None] | None = getattr(self, f"op_{op.name}", None)
        if handler is None:
            if op.name in BINARY_OPERATORS or op.name in BINARY_MATH:
                self.binary(op, scope)
                return
            if op.name in ("mini", "maxi", "maxf", "minf"):
                self.binary(op, scope)
                return
            if op.name in UNARY_MATH or op.name in FTZ_UNARY:
                self.unary(op, scope)
                return
            raise Blocked(op.name, self.where(op), "the lifter has no rule for this op")
        handler(op, scope)

    # -- core ops -----------------------------------------------------------------

    def op_make_token(self, op: Op, scope: _Scope) -> None:
        value = self.resolved.result_ids(op)[0]
        if self.token_name is None:
            self.token_name = self.names.reserve("token")
            name = self.token_name
        else:
            name = self.fresh("token")
        self.emit(scope, f"let {name}: Token = new_token_unordered();")
        self.bind(value, name, "token", "Token")

    def op_return(self, op: Op, scope: _Scope) -> None:
        return

    def op_constant(self, op: Op, scope: _Scope) -> None:
        value = self.resolved.result_ids(op)[0]
        if not self.is_live(value):
            return
        info = self.tile(value)
        element = self.element(value)
        peers = self.constant_peers.get(self.constant_ordinals[id(op)], [])
        raw = op.attributes.get("value", "")
        literal = constant_literal(raw, element, self.where(op), op, peers)
        position = self.positions[id(op)]
        self.constant_lines[len(scope.lines)] = position
        if position in self.scalar_constants and info.rank == 0 and element == "i32":
            # A constant generic: `constant(..)` takes literals only, and a bare
            # generic would reuse the value cutile-rs puts at the entry's top.
            self.module_items.add("generic_value")
            number = literal.dense.removesuffix(element)
            self.let(scope, op, value, "scalar", element, f"generic_value::<{number}>()")
            return
        if position in self.scalar_constants:
            # A generic's value as a tile (`cols < N`, `x / N`): `constant(..)` takes
            # no generic, so the scalar is converted and splat, which tileiras folds
            # back into the reference's constant.
            whole = (
                int(literal.dense.removesuffix("i32")) if element == "i32" else integral_float(raw)
            )
            if whole is not None:
                self.module_items.add("generic_value")
                rhs = f"scalar_to_tile::<i32>(generic_value::<{whole}>())"
                if element != "i32":
                    rhs = f"itof({rhs}, rounding::NearestEven)"
                if info.rank:  # typed steps: cutile-rs infers no chained method's type
                    scalar = self.fresh("scalar")
                    self.emit(scope, f"let {scalar}: Tile<{element}, {{ [] }}> = {rhs};")
                    ones = ["1"] * info.rank
                    unit = self.fresh("unit")
                    self.emit(
                        scope,
                        f"let {unit}: Tile<{element}, {shape_braces(ones)}> = "
                        f"{scalar}.reshape({shape_macro(ones)});",
                    )
                    rhs = f"{unit}.broadcast({shape_macro(info.dims)})"
                self.let(scope, op, value, "tile", self.tile_type(value), rhs)
                return
        bits = _constant_bits(element, raw, literal.dense)
        if bits is not None:
            width = "64" if element == "u64" else ""
            function = f"constant_bits{width}_r{info.rank}"
            self.module_items.add(function)
            rhs = f"{function}({bits}, {shape_macro(info.dims)})"
            self.let(scope, op, value, "tile", self.tile_type(value), rhs)
            return
        # Rank 0 too goes through `constant(..)`: a Rust literal would carry an
        # exact value that cutile-rs folds and turns into extra assumes.
        rhs = f"constant({literal.dense}, {shape_macro(info.dims)})"
        if literal.generic_float:
            function = f"constant_float_r{info.rank}"
            self.module_items.add(function)
            rhs = f"{function}({literal.dense}, {shape_macro(info.dims)})"
        if literal.via_f32:
            wide = self.names.fresh("cst_f32")
            self.emit(scope, f"let {wide}: Tile<f32, {shape_braces(info.dims)}> = {rhs};")
            rhs = f"convert_tile({wide})"
        self.let(scope, op, value, "tile", self.tile_type(value), rhs)

    def op_assume(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        binding = self.bindings[operand]
        call = _assume_call(op, self.where(op), self.fact_generic(operand))
        if self.states_element_bytes(op, operand, binding):
            call = f"assume_div_by::<_, {ELEMENT_BYTES_GENERIC}>"
        form = binding.form
        rust_type = binding.rust_type
        source = binding.expr
        base = binding.expr if binding.expr.isidentifier() else "assumed"
        name = self.shadow_or_fresh(op, operand, base)
        self.emit(scope, f"let {name}: {rust_type} = {call}({source});")
        self.bind(value, name, form, rust_type)

    def states_element_bytes(self, op: Op, operand: int, binding: Binding) -> bool:
        """A pointer of the dtype generic computed in the body (a gather's) is
        assumed aligned to its element size, which follows `E`."""
        generic_dtypes = {p.dtype for p in self.params if p.generic}
        if len(generic_dtypes) != 1 or operand in self.resolved.entry_args:
            return False
        divisor = op.attributes.get("div_by", "").strip()
        element_pointer = binding.rust_type.startswith("PointerTile<*mut E,")
        return element_pointer and divisor == str(DTYPE_BYTES.get(generic_dtypes.pop()))

    def fact_generic(self, value: int) -> tuple[int, str] | None:
        """The launch-fact generic of the entry argument an assume chain starts at."""
        producer = self.resolved.producer(value)
        while producer is not None and producer.name == "assume":
            value = self.resolved.operand_ids(producer)[0]
            producer = self.resolved.producer(value)
        if value in self.resolved.entry_args:
            return self.fact_generics.get((self.resolved.entry_args.index(value), -1))
        column = self.table_column(value)
        return None if column is None else self.fact_generics.get(column)

    def table_column(self, value: int) -> FactSlot | None:
        """(entry argument, column) when `value` is a column of a list's table
        (an element's address, shape or stride), read as cuTile Python reads it:
        load a row, extract the column, reshape, convert."""
        producer = self.resolved.producer(value)
        while producer is not None and producer.name in ("trunci", "int_to_ptr", "reshape"):
            producer = self.resolved.producer(self.resolved.operand_ids(producer)[0])
        if producer is None or producer.name != "extract":
            return None
        source, *indices = self.resolved.operand_ids(producer)
        column_op = self.resolved.producer(indices[-1])
        if column_op is None or column_op.name != "constant":
            return None
        column = int(re.findall(r"-?\d+", column_op.attributes.get("value", ""))[-1])
        producer = self.resolved.producer(source)
        while producer is not None and producer.name in (
            "load_view_tko",
            "make_partition_view",
            "make_tensor_view",
            "assume",
        ):
            source = self.resolved.operand_ids(producer)[0]
            producer = self.resolved.producer(source)
        if source not in self.resolved.entry_args:
            return None
        return self.resolved.entry_args.index(source), column

    def op_get_tile_block_id(self, op: Op, scope: _Scope) -> None:
        self.grid_query(op, scope, "pid", "tile_block_id")

    def op_get_num_tile_blocks(self, op: Op, scope: _Scope) -> None:
        self.grid_query(op, scope, "grid", "num_tile_blocks")

    def grid_query(self, op: Op, scope: _Scope, base: str, function: str) -> None:
        """`let pid = get_tile_block_id();`, then `let row: i32 = pid.0;` when the
        source names the one component it uses."""
        results = self.resolved.result_ids(op)
        name = self.fresh(base)
        self.module_items.add(function)
        live = [value for value in results if self.is_live(value)]
        element = self.element(live[0]) if live else "i32"
        if any(self.element(value) != element for value in live):
            raise Blocked(op.name, self.where(op), "grid components used with different signs")
        component = f"Tile<{element}, {{ [] }}>"
        self.emit(
            scope,
            f"let {name}: ({component}, {component}, {component}) = {function}::<{element}>();",
        )
        for axis, value in enumerate(results):
            self.bind(value, f"{name}.{axis}", "tile", component)
        named = self.statement_names.get(id(op))
        if named is not None and len(live) == 1:
            alias = self.fresh(named)
            axis = results.index(live[0])
            self.emit(scope, f"let {alias}: {element} = tile_to_scalar({name}.{axis});")
            self.bind(live[0], alias, "scalar", element)

    # -- views ----------------------------------------------------------------------

    def op_make_tensor_view(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        tensor_type = op.result_types[0]
        from tileir.types import parse_tensor_view

        tensor = parse_tensor_view(tensor_type)
        if tensor is None:
            raise Blocked(op.name, self.where(op), f"unreadable tensor view type {tensor_type}")
        base_binding = self.bindings[operands[0]]
        stem = base_binding.expr if base_binding.expr.isidentifier() else "tensor"
        dynamic = iter(operands[1:])
        shape_dims = ["-1" if d == "?" else d for d in tensor.shape]
        stride_dims = ["-1" if s == "?" else s for s in tensor.strides]
        element = self.element(value)
        shape_name = self.fresh(f"{stem}_shape")
        strides_name = self.fresh(f"{stem}_strides")
        shape_args = ", ".join(
            self.use(next(dynamic), "scalar") if d == "?" else f"{d}i32" for d in tensor.shape
        )
        stride_args = ", ".join(
            self.use(next(dynamic), "scalar") if s == "?" else f"{s}i32" for s in tensor.strides
        )
        shape_type = f"Shape<{shape_braces(shape_dims)}>"
        strides_type = f"Array<{shape_braces(stride_dims)}>"
        self.emit(
            scope,
            f"let {shape_name}: {shape_type} = Shape::<{shape_braces(shape_dims)}> {{\n"
            f"{INDENT}dims: &[{shape_args}],\n}};",
        )
        self.emit(
            scope,
            f"let {strides_name}: {strides_type} = Array::<{shape_braces(stride_dims)}> {{\n"
            f"{INDENT}dims: &[{stride_args}],\n}};",
        )
        tensor_rust = f"Tensor<{element}, {shape_braces(shape_dims)}>"
        name = self.fresh(f"{stem}_view")
        token = self.token_name or "new_token_unordered()"
        self.emit(
            scope,
            f"let {name}: {tensor_rust} =\n{INDENT}make_tensor_view({base_binding.expr}, "
            f"{shape_name}, {strides_name}, {token});",
        )
        self.bind(value, name, "tensor", tensor_rust)

    def op_make_partition_view(self, op: Op, scope: _Scope) -> None:
        tensor = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        view = parse_view(op.result_types[0])
        if view is None or view.kind != "partition_view":
            raise Blocked(op.name, self.where(op), "only partition views are lifted")
        element = self.element(value)
        padding = PADDING.get(view.padding)
        if padding is None:
            raise Blocked(op.name, self.where(op), f"padding value {view.padding}")
        dim_map = "dim_map::Identity"
        if view.dim_map != "identity":
            dim_map = f"const_array![{view.dim_map.replace(',', ', ')}]"
        tensor_binding = self.bindings[tensor]
        stem = tensor_binding.expr.removesuffix("_view")
        name = self.fresh(f"{stem}_tiles")
        rust_type = f"Partition<{element}, {shape_braces(view.tile_shape)}>"
        token = self.token_name or "new_token_unordered()"
        self.emit(
            scope,
            f"let {name}: {rust_type} = make_partition_view(\n{INDENT}&{tensor_binding.expr},\n"
            f"{INDENT}{shape_macro(view.tile_shape)},\n{INDENT}{padding},\n{INDENT}{dim_map},\n"
            f"{INDENT}{token},\n);",
        )
        self.bind(value, name, "view", rust_type)

    def op_make_strided_view(self, op: Op, scope: _Scope) -> None:
        # `array.tiled_view(shape, traversal_steps=..)`: the steps and the dim map
        # are const generics of the annotated StridedView type.
        view = parse_view(op.result_types[0])
        if view is None or view.kind != "strided_view":
            raise Blocked(op.name, self.where(op), "unreadable strided view type")
        rank = len(view.tile_shape)
        dim_map = (
            tuple(str(axis) for axis in range(rank))
            if view.dim_map == "identity"
            else tuple(view.dim_map.split(","))
        )
        element = self.element(self.resolved.result_ids(op)[0])
        rust_type = (
            f"StridedView<{element}, {shape_braces(view.tile_shape)}, "
            f"{shape_braces(view.traversal_strides)}, {shape_braces(dim_map)}>"
        )
        self.emit_raw_view(op, scope, view, "make_strided_view", "strided", rust_type)

    def op_make_gather_scatter_view(self, op: Op, scope: _Scope) -> None:
        # `ct.load_advanced_indexing` / `ct.store_advanced_indexing`: the sparse axis
        # is a const generic of the annotated GatherScatterView type.
        view = parse_view(op.result_types[0])
        if view is None or view.kind != "gather_scatter_view" or view.sparse_dim is None:
            raise Blocked(op.name, self.where(op), "unreadable gather/scatter view type")
        element = self.element(self.resolved.result_ids(op)[0])
        rust_type = (
            f"GatherScatterView<{element}, {shape_braces(view.tile_shape)}, {view.sparse_dim}>"
        )
        self.emit_raw_view(op, scope, view, "make_gather_scatter_view", "gathered", rust_type)

    def emit_raw_view(
        self, op: Op, scope: _Scope, view: ViewType, constructor: str, suffix: str, rust_type: str
    ) -> None:
        """A view of cutile-rs's raw surface (`cutile::tileir`) over the op's tensor:
        `let NAME: TYPE = CONSTRUCTOR(&tensor, tile shape, padding);`."""
        padding = PADDING.get(view.padding)
        if padding is None:
            raise Blocked(op.name, self.where(op), f"padding value {view.padding}")
        self.module_items.add("tileir")
        tensor_binding = self.bindings[self.resolved.operand_ids(op)[0]]
        name = self.fresh(f"{tensor_binding.expr.removesuffix('_view')}_{suffix}")
        self.emit(
            scope,
            f"let {name}: {rust_type} =\n{INDENT}{constructor}(&{tensor_binding.expr}, "
            f"{shape_macro(view.tile_shape)}, {padding});",
        )
        self.bind(self.resolved.result_ids(op)[0], name, "view", rust_type)

    def op_get_index_space_shape(self, op: Op, scope: _Scope) -> None:
        view = self.resolved.operand_ids(op)[0]
        results = self.resolved.result_ids(op)
        stem = self.bindings[view].expr.removesuffix("_tiles")
        name = self.fresh(f"{stem}_grid")
        self.emit(
            scope,
            f"let {name}: [i32; {len(results)}] = get_index_space_shape(&{self.use(view)});",
        )
        for axis, value in enumerate(results):
            self.bind(value, f"{name}[{axis}]", "scalar", "i32")

    def op_get_tensor_shape(self, op: Op, scope: _Scope) -> None:
        # No cuTile Python API writes it; cutile-rs returns the extents as one array.
        view = self.resolved.operand_ids(op)[0]
        results = self.resolved.result_ids(op)
        stem = self.bindings[view].expr.removesuffix("_view")
        name = self.fresh(f"{stem}_extents")
        self.emit(
            scope, f"let {name}: [i32; {len(results)}] = get_tensor_shape(&{self.use(view)});"
        )
        for axis, value in enumerate(results):
            self.bind(value, f"{name}[{axis}]", "scalar", "i32")

    def view_hints(self, op: Op) -> tuple[str, str]:
        """(tma, latency) arguments from the op's optimization hints."""
        hints = op.attributes.get("optimization_hints", "")
        entries = {}
        for arch, body in _split_hint_arches(hints):
            if arch != "default":
                raise Blocked(op.name, self.where(op), f"per-architecture hints ({arch})")
            for item in body.split(","):
                key, _, val = item.partition("=")
                if key.strip():
                    entries[key.strip()] = val.strip()
        tma = "tma::Disabled" if entries.pop("allow_tma", "true") == "false" else "tma::Enabled"
        latency = entries.pop("latency", None)
        if entries:
            raise Blocked(op.name, self.where(op), f"load/store hints {sorted(entries)}")
        return tma, (f"Some({latency})" if latency is not None else "None")

    def ordering_scope(self, op: Op) -> tuple[str, str]:
        ordering = ORDERING[op.attributes.get("memory_ordering", "weak")]
        scope = SCOPE[op.attributes.get("memory_scope", "tl_blk")]
        return ordering, scope

    def op_load_view_tko(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        tile_value, token_value = self.resolved.result_ids(op)
        view, indices, token = self.view_operands(op, operands)
        tma, latency = self.view_hints(op)
        ordering, mem_scope = self.ordering_scope(op)
        tile_type = self.tile_type(tile_value)
        name = self.fresh(self.base_name(op))
        token_name = self.fresh(f"{name}_token")
        if not self.is_live(tile_value):
            name = "_" + name
        if not self.is_live(token_value):
            token_name = "_" + token_name
        index = self.view_index(view, indices)
        inbounds = ", ".join(["false"] * len(indices))
        self.emit(
            scope,
            f"let ({name}, {token_name}): ({tile_type}, Token) = load_view_raw(\n"
            f"{INDENT}&{self.use(view)},\n{INDENT}{index},\n{INDENT}{token},\n"
            f"{INDENT}{ordering},\n{INDENT}{mem_scope},\n{INDENT}{tma},\n{INDENT}{latency},\n"
            f"{INDENT}[{inbounds}],\n{INDENT}{shape_macro(self.dims(tile_value))},\n);",
        )
        self.bind(tile_value, name, "tile", tile_type)
        self.bind(token_value, token_name, "token", "Token")

    def op_store_view_tko(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        token_value = self.resolved.result_ids(op)[0]
        tile = operands[0]
        view, indices, token = self.view_operands(op, operands[1:])
        tma, latency = self.view_hints(op)
        ordering, mem_scope = self.ordering_scope(op)
        name = self.fresh("stored")
        if not self.is_live(token_value):
            name = "_" + name
        index = self.view_index(view, indices)
        inbounds = ", ".join(["false"] * len(indices))
        self.emit(
            scope,
            f"let {name}: Token = store_view_raw(\n{INDENT}&{self.use(view)},\n"
            f"{INDENT}{self.use(tile, 'tile')},\n{INDENT}{index},\n"
            f"{INDENT}{token},\n{INDENT}{ordering},\n{INDENT}{mem_scope},\n"
            f"{INDENT}{tma},\n{INDENT}{latency},\n{INDENT}[{inbounds}],\n);",
        )
        self.bind(token_value, name, "token", "Token")

    def op_atomic_red_view_tko(self, op: Op, scope: _Scope) -> None:
        # A tiled view's `atomic_store_<mode>`: no old values, only the token.
        operands = self.resolved.operand_ids(op)
        token_value = self.resolved.result_ids(op)[0]
        view, *rest = operands
        token = "None"
        if "token" in op.attributes:
            token = f"Some({self.use(rest[-1])})"
            rest = rest[:-1]
        *indices, update = rest
        mode = ATOMIC_MODE[op.attributes["mode"]]
        ordering, mem_scope = self.ordering_scope(op)
        name = self.fresh("reduced")
        if not self.is_live(token_value):
            name = "_" + name
        arguments = "".join(
            f"{INDENT}{argument},\n"
            for argument in [
                f"&{self.use(view)}",
                self.use(update, "tile"),
                self.view_index(view, indices),
                mode,
                ordering,
                mem_scope,
                token,
            ]
        )
        self.emit(scope, f"let {name}: Token = atomic_red_view_raw(\n{arguments});")
        self.bind(token_value, name, "token", "Token")

    def view_index(self, view: int, indices: list[int]) -> str:
        """A view access's index: an array of scalars, or for a gather/scatter view a
        tuple whose sparse axis is the tile of indices."""
        if not self.bindings[view].rust_type.startswith("GatherScatterView<"):
            return "[" + ", ".join(self.use(v, "scalar") for v in indices) + "]"
        parts = [
            self.use(v, "tile") if self.tile(v).rank == 1 else self.use(v, "scalar")
            for v in indices
        ]
        return "(" + ", ".join(parts) + ")"

    def view_operands(self, op: Op, operands: list[int]) -> tuple[int, list[int], str]:
        """A view access's view, its indices, and its token argument: the
        reference may order it after a token or leave it unordered."""
        if "token" not in op.attributes:
            return operands[0], operands[1:], "None"
        return operands[0], operands[1:-1], f"Some({self.use(operands[-1])})"

    def op_join_tokens(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        joined = ", ".join(self.use(v) for v in operands)
        self.let(scope, op, value, "token", "Token", f"join_tokens(&[{joined}])")

    # -- elementwise ----------------------------------------------------------------

    def binary(self, op: Op, scope: _Scope) -> None:
        lhs, rhs = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        scalar = self.prefers_scalar(value)
        operator = BINARY_OPERATORS.get(op.name)
        plain = self.plain_attributes(op)
        if operator is not None and plain:
            want: Literal["scalar", "tile"] = "scalar" if scalar else "tile"
            expr = f"{self.use(lhs, want)} {operator} {self.use(rhs, want)}"
            self.let_value(scope, op, value, scalar, expr)
            return
        if op.name in ("mini", "maxi") or (op.name in ("maxf", "minf") and plain):
            if scalar:
                function = op.name[:3]
                expr = f"{function}({self.use(lhs, 'scalar')}, {self.use(rhs, 'scalar')})"
                self.let_value(scope, op, value, True, expr)
                return
            if op.name in ("mini", "maxi"):
                expr = f"{op.name}({self.use(lhs, 'tile')}, {self.use(rhs, 'tile')})"
                self.let_value(scope, op, value, False, expr)
                return
        args = f"{self.use(lhs, 'tile')}, {self.use(rhs, 'tile')}"
        expr = f"{op.name}({args}{self.attribute_args(op)})"
        self.let_value(scope, op, value, False, expr)

    def plain_attributes(self, op: Op) -> bool:
        """Whether the op carries only what its Rust operator emits by default."""
        rounding = op.attributes.get("rounding")
        if op.name == "divi":
            return rounding in (None, "zero")
        if rounding not in (None, "nearest_even"):
            return False
        return not any(
            key in op.attributes for key in ("flush_to_zero", "propagate_nan", "overflow")
        )

    def attribute_args(self, op: Op) -> str:
        """The static-parameter arguments of the function form of `op`."""
        attributes = op.attributes
        name = op.name
        if name == "negi":
            # negi's bytecode writer defaults a missing overflow to none, which
            # is what cuTile Python's `-x` carries: `overflow::None` reproduces it.
            overflow = attributes.get("overflow")
            return f", {OVERFLOW[overflow]}" if overflow else ", overflow::None"
        if name in ("addi", "subi", "muli", "shli", "trunci"):
            overflow = attributes.get("overflow")
            if overflow is None:
                raise Blocked(
                    name,
                    self.where(op),
                    "cutile-rs 0.5.0 cannot emit this op without overflow flags "
                    "(`overflow::None` drops the attribute the bytecode writer requires)",
                )
            return f", {OVERFLOW[overflow]}"
        if name == "divi":
            return f", {ROUNDING[attributes.get('rounding', 'zero')]}"
        if name in ("addf", "subf", "mulf", "divf", "fma", "sqrt"):
            rounding = ROUNDING[attributes.get("rounding", "nearest_even")]
            return f", {rounding}, {self.ftz(op)}"
        if name in ("maxf", "minf"):
            nan = "nan::Enabled" if "propagate_nan" in attributes else "nan::Disabled"
            return f", {nan}, {self.ftz(op)}"
        if name in ("exp2", "rsqrt"):
            return f", {self.ftz(op)}"
        return ""

    def ftz(self, op: Op) -> str:
        return "ftz::Enabled" if "flush_to_zero" in op.attributes else "ftz::Disabled"

    def let_value(self, scope: _Scope, op: Op, value: int, scalar: bool, expr: str) -> None:
        if scalar:
            self.let(scope, op, value, "scalar", self.scalar_type(value), expr)
        else:
            self.let(scope, op, value, "tile", self.tile_type(value), expr)

    def unary(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        if op.attributes.get("rounding") and op.name in ("exp", "tanh"):
            raise Blocked(op.name, self.where(op), "unexpected rounding")
        expr = f"{op.name}({self.use(operand, 'tile')}{self.attribute_args(op)})"
        self.let_value(scope, op, value, False, expr)

    def op_exp(self, op: Op, scope: _Scope) -> None:
        self.rounded_unary(op, scope, "exp")

    def op_tanh(self, op: Op, scope: _Scope) -> None:
        self.rounded_unary(op, scope, "tanh")

    def rounded_unary(self, op: Op, scope: _Scope, function: str) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        rounding = op.attributes.get("rounding")
        if rounding is None:
            expr = f"{function}({self.use(operand, 'tile')})"
        else:
            expr = f"{function}_with_rounding({self.use(operand, 'tile')}, {ROUNDING[rounding]})"
        self.let_value(scope, op, value, False, expr)

    def op_sqrt(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        expr = f"sqrt({self.use(operand, 'tile')}{self.attribute_args(op)})"
        self.let_value(scope, op, value, False, expr)

    def op_fma(self, op: Op, scope: _Scope) -> None:
        a, b, c = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        args = ", ".join(self.use(v, "tile") for v in (a, b, c))
        self.let_value(scope, op, value, False, f"fma({args}{self.attribute_args(op)})")

    def op_cmpi(self, op: Op, scope: _Scope) -> None:
        self.compare(op, scope, ordering=None)

    def op_cmpf(self, op: Op, scope: _Scope) -> None:
        self.compare(op, scope, ordering=op.attributes.get("comparison_ordering", "ordered"))

    def compare(self, op: Op, scope: _Scope, ordering: str | None) -> None:
        lhs, rhs = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        predicate, operator = PREDICATE[op.attributes["comparison_predicate"]]
        explicit_sign = self.elements.explicit_compares.get(id(op))
        if explicit_sign is not None:
            # The operands' Rust type has the other signedness: the declared
            # compare states the reference's own.
            function = f"cmpi_{explicit_sign}_r{len(self.dims(lhs))}"
            self.module_items.add(function)
            args = f"{self.use(lhs, 'tile')}, {self.use(rhs, 'tile')}, {predicate}"
            self.let_value(scope, op, value, False, f"{function}({args})")
            return
        scalar = self.prefers_scalar(value) and self.prefers_scalar(lhs)
        if scalar and ordering in (None, "ordered"):
            expr = f"{self.use(lhs, 'scalar')} {operator} {self.use(rhs, 'scalar')}"
            self.let(scope, op, value, "scalar", "bool", expr)
            return
        args = f"{self.use(lhs, 'tile')}, {self.use(rhs, 'tile')}, {predicate}"
        if ordering is not None:
            kind = "cmp_ordering::Ordered" if ordering == "ordered" else "cmp_ordering::Unordered"
            self.let_value(scope, op, value, False, f"cmpf({args}, {kind})")
        else:
            self.let_value(scope, op, value, False, f"cmpi({args})")

    def op_select(self, op: Op, scope: _Scope) -> None:
        cond, a, b = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        args = ", ".join(self.use(v, "tile") for v in (cond, a, b))
        self.let_value(scope, op, value, False, f"select({args})")

    def op_iota(self, op: Op, scope: _Scope) -> None:
        value = self.resolved.result_ids(op)[0]
        self.let_value(scope, op, value, False, f"iota({shape_macro(self.dims(value))})")

    # -- conversions ----------------------------------------------------------------

    def op_exti(self, op: Op, scope: _Scope) -> None:
        self.conversion(op, scope, "exti({})")

    def op_trunci(self, op: Op, scope: _Scope) -> None:
        if "overflow" not in op.attributes:
            # cutile-rs's trunci(x, overflow::None) drops the attribute its own
            # bytecode writer requires; the module declares the plain op.
            rank = self.tile(self.resolved.operand_ids(op)[0]).rank
            self.module_items.add(f"trunci_plain_r{rank}")
            self.conversion(op, scope, f"trunci_plain_r{rank}({{}})")
            return
        self.conversion(op, scope, "trunci({}" + self.attribute_args(op) + ")")

    def op_itof(self, op: Op, scope: _Scope) -> None:
        rounding = ROUNDING[op.attributes.get("rounding", "nearest_even")]
        self.conversion(op, scope, "itof({}, " + rounding + ")")

    def op_ftoi(self, op: Op, scope: _Scope) -> None:
        # Tile IR's default for ftoi is truncation: its printed form omits it.
        rounding = ROUNDING[op.attributes.get("rounding", "nearest_int_to_zero")]
        self.conversion(op, scope, "ftoi({}, " + rounding + ")")

    def op_ftof(self, op: Op, scope: _Scope) -> None:
        rounding = op.attributes.get("rounding")
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        if rounding is None and (self.element(operand) == "E" or self.element(value) == "E"):
            # convert_tile is ftof at nearest-even, and nothing when the dtype matches.
            self.conversion(op, scope, "convert_tile({})")
            return
        self.conversion(op, scope, "ftof({}, " + ROUNDING[rounding or "nearest_even"] + ")")

    def op_bitcast(self, op: Op, scope: _Scope) -> None:
        # The annotated result type picks bitcast's target element type.
        self.conversion(op, scope, "bitcast({})")

    def op_pack(self, op: Op, scope: _Scope) -> None:
        # `ct.pack_to_bytes`: the annotated result type picks the byte element type.
        self.conversion(op, scope, "pack({})")

    def op_unpack(self, op: Op, scope: _Scope) -> None:
        # `ct.unpack_from_bytes`: the annotated result type picks the element type.
        self.conversion(op, scope, "unpack({})")

    def op_assert(self, op: Op, scope: _Scope) -> None:
        # `ct.assert_(cond, message)`: cutile-rs compiles the macro to the op itself.
        cond = self.resolved.operand_ids(op)[0]
        message = rust_string(mlir_string(op.attributes.get("string", '""')))
        self.emit(scope, f"cuda_tile_assert!({self.use(cond, 'tile')}, {message});")

    def op_print_tko(self, op: Op, scope: _Scope) -> None:
        # `ct.printf(format, tile)`: cutile-rs's print_tko takes one tile and the
        # format as written; its result token orders what the reference orders after it.
        operands = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        ordered = "token" in op.attributes
        args = operands[:-1] if ordered else operands
        if len(args) != 1:
            raise Blocked(
                op.name, self.where(op), f"print_tko of {len(args)} values (cutile-rs prints one)"
            )
        token = f"Some({self.use(operands[-1])})" if ordered else "None"
        text = rust_string(mlir_string(op.attributes.get("string", '""')))
        self.let(
            scope,
            op,
            value,
            "token",
            "Token",
            f"print_tko({text}, {self.use(args[0], 'tile')}, {token})",
        )

    def conversion(self, op: Op, scope: _Scope, template: str) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        self.let_value(scope, op, value, False, template.format(self.use(operand, "tile")))

    # -- shapes ---------------------------------------------------------------------

    def op_reshape(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        expr = f"{self.use(operand, 'tile')}.reshape({shape_macro(self.dims(value))})"
        form: Form = "ptr" if self.tile(value).pointer else "tile"
        self.let(scope, op, value, form, self.tile_type(value), expr)

    def op_broadcast(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        expr = f"{self.use(operand, 'tile')}.broadcast({shape_macro(self.dims(value))})"
        form: Form = "ptr" if self.tile(value).pointer else "tile"
        self.let(scope, op, value, form, self.tile_type(value), expr)

    def op_permute(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        permutation = op.attributes.get("permutation", "").strip("[]").replace(" ", "")
        array = f"const_array![{', '.join(permutation.split(','))}]"
        self.let_value(scope, op, value, False, f"permute({self.use(operand, 'tile')}, {array})")

    def op_cat(self, op: Op, scope: _Scope) -> None:
        lhs, rhs = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        dim = op.attributes.get("dim", "").strip()
        if not dim.isdigit():
            raise Blocked(op.name, self.where(op), f"cat along dim {dim!r}")
        expr = f"cat({self.use(lhs, 'tile')}, {self.use(rhs, 'tile')}, {dim}i32)"
        self.let_value(scope, op, value, False, expr)

    def op_extract(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        indices = ", ".join(self.use(v, "tile") for v in operands[1:])
        expr = f"extract({self.use(operands[0], 'tile')}, [{indices}])"
        self.let_value(scope, op, value, False, expr)

    def op_mmaf(self, op: Op, scope: _Scope) -> None:
        a, b, acc = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        if op.attributes:
            raise Blocked(op.name, self.where(op), f"mmaf attributes {sorted(op.attributes)}")
        expr = f"mmaf({self.use(a, 'tile')}, {self.use(b, 'tile')}, {self.use(acc, 'tile')})"
        self.let_value(scope, op, value, False, expr)

    def op_mmaf_scaled(self, op: Op, scope: _Scope) -> None:
        # `ct.mma_scaled(x, x_scale, y, y_scale, acc)` is written lhs, rhs, acc,
        # lhs_scale, rhs_scale, the order cutile-rs's mmaf_scaled takes them in.
        if op.attributes:
            unexpected = f"mmaf_scaled attributes {sorted(op.attributes)}"
            raise Blocked(op.name, self.where(op), unexpected)
        operands = ", ".join(self.use(v, "tile") for v in self.resolved.operand_ids(op))
        value = self.resolved.result_ids(op)[0]
        self.let_value(scope, op, value, False, f"mmaf_scaled({operands})")

    def op_mmai(self, op: Op, scope: _Scope) -> None:
        a, b, acc = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        # Each operand's signedness is a word of its own (`signed unsigned`), lhs
        # first; cutile-rs takes both as static parameters, not from the types.
        signs = [flag for flag in op.flags if flag in SIGNEDNESS]
        if len(signs) != 2:
            raise Blocked(op.name, self.where(op), f"mmai signedness {signs}")
        operands = ", ".join(self.use(v, "tile") for v in (a, b, acc))
        lhs_sign, rhs_sign = (SIGNEDNESS[sign] for sign in signs)
        self.let_value(scope, op, value, False, f"mmai({operands}, {lhs_sign}, {rhs_sign})")

    def op_reduce(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        helper = self.reduction_helper(op)
        dim = op.attributes.get("dim", "0")
        expr = f"{helper}({self.use(operand, 'tile')}, {dim}i32)"
        self.let_value(scope, op, value, False, expr)

    def reduction_helper(self, op: Op) -> str:
        body = [inner for inner in op.regions[0].ops if inner.name != "yield"]
        missing = (
            "cutile-rs reduces only with reduce_sum/max/min/prod (add/max/min/mul, no flags, "
            "their own identity): its closure `reduce` ignores the dim and identity"
        )
        if len(body) != 1 or body[0].name not in REDUCE_HELPERS:
            raise Blocked(op.name, self.where(op), missing)
        combiner = body[0]
        args = self.resolved.block_args[id(op.regions[0].blocks[0])]
        if self.resolved.operand_ids(combiner) != args[:2] or not self.plain_attributes(combiner):
            raise Blocked(op.name, self.where(op), missing)
        helper = REDUCE_HELPERS[combiner.name]
        operand = self.resolved.operand_ids(op)[0]
        expected = _identity_for(helper, self.tile(operand).element)
        if _identities(op) != expected:
            raise Blocked(op.name, self.where(op), missing)
        return helper

    def op_scan(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        body = [inner for inner in op.regions[0].ops if inner.name != "yield"]
        element = self.tile(operand).element
        if (
            op.attributes.get("dim") != "0"
            or len(body) != 1
            or body[0].name not in ("addf", "addi")
            or _identities(op) != _identity_for("reduce_sum", element)
        ):
            raise Blocked(
                op.name,
                self.where(op),
                "cutile-rs 0.5.0 scans only along dim 0 with an add and identity 0",
            )
        reverse = (
            "reverse::Reverse" if op.attributes.get("reverse") == "true" else ("reverse::Forward")
        )
        bits = "0x0" if is_float(element) else "0"  # the parser's spelling of a float
        zero = constant_literal(f"{element}:{bits}", self.element(operand), self.where(op), op)
        if zero.via_f32:
            raise Blocked(op.name, self.where(op), "a scan of the dtype generic E")
        expr = f"scan_sum({self.use(operand, 'tile')}, 0i32, {reverse}, {zero.dense})"
        self.let_value(scope, op, value, False, expr)

    # -- pointers -------------------------------------------------------------------

    def op_offset(self, op: Op, scope: _Scope) -> None:
        pointers, offsets = self.resolved.operand_ids(op)
        value = self.resolved.result_ids(op)[0]
        expr = f"addptr_tile({self.use(pointers)}, {self.use(offsets, 'tile')})"
        self.let(scope, op, value, "ptr", self.tile_type(value), expr)

    def op_int_to_ptr(self, op: Op, scope: _Scope) -> None:
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        expr = f"int_to_ptr({self.use(operand, 'tile')})"
        self.let(scope, op, value, "ptr", self.tile_type(value), expr)

    def op_ptr_to_ptr(self, op: Op, scope: _Scope) -> None:
        # The annotated pointer type picks the result's pointee type.
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        expr = f"ptr_to_ptr({self.use(operand, 'tile')})"
        self.let(scope, op, value, "ptr", self.tile_type(value), expr)

    def op_ptr_to_int(self, op: Op, scope: _Scope) -> None:
        # cutile-rs's ptr_to_int types its result as the pointee type; the module
        # declares the op returning i64, as the dialect does.
        operand = self.resolved.operand_ids(op)[0]
        value = self.resolved.result_ids(op)[0]
        function = f"ptr_to_int_r{self.tile(operand).rank}"
        self.module_items.add(function)
        expr = f"{function}({self.use(operand, 'tile')})"
        self.let(scope, op, value, "tile", self.tile_type(value), expr)

    def op_alloca(self, op: Op, scope: _Scope) -> None:
        # No cuTile Python API writes it; the count and alignment are attributes,
        # the pointee type comes from the annotated pointer tile.
        value = self.resolved.result_ids(op)[0]
        visibility = "allocation::Global" if "global" in op.flags else "allocation::Local"
        count = op.attributes["num_elem"]
        alignment = op.attributes["alignment"]
        expr = f"alloca({count}i64, {alignment}i64, {visibility})"
        self.let(scope, op, value, "ptr", self.tile_type(value), expr)

    def op_load_ptr_tko(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        tile_value, token_value = self.resolved.result_ids(op)
        pointers = operands[0]
        types = [tile_info(t) for t in op.operand_types]
        mask = padding = token = None
        rest = operands[1:]
        if "token" in op.attributes:
            token = rest[-1]
            rest = rest[:-1]
        for value, info in zip(rest, types[1 : 1 + len(rest)], strict=False):
            if info is not None and info.element == "i1" and mask is None:
                mask = value
            else:
                padding = value
        ordering, mem_scope = self.ordering_scope(op)
        scope_arg = (
            "None::<scope::TileBlock>" if ordering == ORDERING["weak"] else (f"Some({mem_scope})")
        )
        padding_arg = "None"
        function = "load_ptr_tko"
        if padding is not None:
            # cutile-rs's load_ptr_tko takes a scalar padding and broadcasts it
            # itself; the module declares the op with the tile the reference has.
            function = f"load_ptr_padded_r{self.tile(tile_value).rank}"
            self.module_items.add(function)
            padding_arg = f"Some({self.use(padding, 'tile')})"
        mask_arg = f"Some({self.use(mask, 'tile')})" if mask is not None else "None"
        token_arg = f"Some({self.use(token)})" if token is not None else "None"
        tile_type = self.tile_type(tile_value)
        name = self.fresh(self.base_name(op))
        token_name = self.fresh(f"{name}_token")
        if not self.is_live(token_value):
            token_name = "_" + token_name
        latency = _latency(op)
        self.emit(
            scope,
            f"let ({name}, {token_name}): ({tile_type}, Token) = {function}(\n"
            f"{INDENT}{self.use(pointers)},\n{INDENT}{ordering},\n{INDENT}{scope_arg},\n"
            f"{INDENT}{mask_arg},\n{INDENT}{padding_arg},\n{INDENT}{token_arg},\n"
            f"{INDENT}Latency::<{latency}>,\n);",
        )
        self.bind(tile_value, name, "tile", tile_type)
        self.bind(token_value, token_name, "token", "Token")

    def op_store_ptr_tko(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        token_value = self.resolved.result_ids(op)[0]
        pointers, tile = operands[0], operands[1]
        rest = operands[2:]
        token = None
        if "token" in op.attributes:
            token, rest = rest[-1], rest[:-1]
        mask = rest[0] if rest else None
        ordering, mem_scope = self.ordering_scope(op)
        scope_arg = (
            "None::<scope::TileBlock>" if ordering == ORDERING["weak"] else (f"Some({mem_scope})")
        )
        mask_arg = f"Some({self.use(mask, 'tile')})" if mask is not None else "None"
        token_arg = f"Some({self.use(token)})" if token is not None else "None"
        name = self.fresh("stored")
        if not self.is_live(token_value):
            name = "_" + name
        self.emit(
            scope,
            f"let {name}: Token = store_ptr_tko(\n{INDENT}{self.use(pointers)},\n"
            f"{INDENT}{self.use(tile, 'tile')},\n{INDENT}{ordering},\n{INDENT}{scope_arg},\n"
            f"{INDENT}{mask_arg},\n{INDENT}{token_arg},\n{INDENT}Latency::<{_latency(op)}>,\n);",
        )
        self.bind(token_value, name, "token", "Token")

    def op_atomic_rmw_tko(self, op: Op, scope: _Scope) -> None:
        pointers, arg, *rest = self.resolved.operand_ids(op)
        mode = ATOMIC_MODE[op.attributes["mode"]]
        self.atomic(
            op, scope, "atomic_rmw_tko", [self.use(pointers), self.use(arg, "tile"), mode], rest
        )

    def op_atomic_cas_tko(self, op: Op, scope: _Scope) -> None:
        pointers, expected, desired, *rest = self.resolved.operand_ids(op)
        values = [self.use(pointers), self.use(expected, "tile"), self.use(desired, "tile")]
        self.atomic(op, scope, "atomic_cas_tko", values, rest)

    def atomic(
        self, op: Op, scope: _Scope, function: str, values: list[str], rest: list[int]
    ) -> None:
        """`let (old, token) = function(values.., ordering, scope, mask, token);` where
        `rest` holds the op's optional mask and token operands."""
        old, token_value = self.resolved.result_ids(op)
        token = None
        if "token" in op.attributes:
            token, rest = rest[-1], rest[:-1]
        mask = rest[0] if rest else None
        ordering, mem_scope = self.ordering_scope(op)
        tile_type = self.tile_type(old)
        name = self.fresh("old")
        token_name = self.fresh("atomic_token")
        if not self.is_live(old):
            name = "_" + name
        if not self.is_live(token_value):
            token_name = "_" + token_name
        mask_arg = f"Some({self.use(mask, 'tile')})" if mask is not None else "None"
        token_arg = f"Some({self.use(token)})" if token is not None else "None"
        arguments = "".join(
            f"{INDENT}{argument},\n"
            for argument in [*values, ordering, mem_scope, mask_arg, token_arg]
        )
        self.emit(
            scope,
            f"let ({name}, {token_name}): ({tile_type}, Token) = {function}(\n{arguments});",
        )
        self.bind(old, name, "tile", tile_type)
        self.bind(token_value, token_name, "token", "Token")

    # -- control flow ---------------------------------------------------------------

    def carried_names(self, op: Op, carried: list[int], results: list[int]) -> list[str]:
        """Names for loop-carried variables that sort in the reference's order
        (cutile-rs carries mutated variables in name order)."""
        bases = []
        for index, value in enumerate(carried):
            base = self.carried_base(op, value, results[index] if index < len(results) else None)
            bases.append(snake(base))
        return self.sorted_names(bases)

    def sorted_names(self, bases: list[str]) -> list[str]:
        """Fresh names from `bases` that sort in their order, prefixed `c0_`, `c1_`, ...
        where the bases alone do not (cutile-rs orders mutated variables by name)."""
        names = [self.fresh(base) for base in bases]
        if names != sorted(names) or len(set(names)) != len(names):
            for name in names:
                self.names.used.discard(name)
            names = [self.fresh(f"c{index}_{base}") for index, base in enumerate(bases)]
        return names

    def carried_base(self, op: Op, arg: int, result: int | None) -> str:
        """The source name of a carried value: the variable the loop body assigns."""
        for inner in op.regions[0].ops:
            if inner.name == "continue":
                operands = self.resolved.operand_ids(inner)
                carried = self.resolved.block_args[id(op.regions[0].blocks[0])]
                offset = 1 if op.name == "for" else 0
                index = carried.index(arg) - offset
                if 0 <= index < len(operands):
                    producer = self.resolved.producer(operands[index])
                    if producer is not None and id(producer) in self.statement_names:
                        return self.statement_names[id(producer)]
        form = tile_info(self.resolved.type_of(arg))
        return "carried" if form is not None else "token"

    def carried_type(self, value: int) -> tuple[Form, str]:
        type_text = self.resolved.type_of(value)
        if type_text == "token":
            return "token", "Token"
        if self.prefers_scalar(value):
            return "scalar", self.scalar_type(value)
        info = self.tile(value)
        return ("ptr" if info.pointer else "tile"), self.tile_type(value)

    def declare_carried(self, scope: _Scope, names: list[str], inits: list[int]) -> None:
        for name, init in zip(names, inits, strict=True):
            form, rust_type = self.carried_type(init)
            want: Literal["scalar", "tile", "any"] = "scalar" if form == "scalar" else "any"
            if form == "tile":
                want = "tile"
            self.emit(scope, f"let mut {name}: {rust_type} = {self.use(init, want)};")

    def bind_carried(self, names: list[str], values: list[int]) -> None:
        for name, value in zip(names, values, strict=True):
            form, rust_type = self.carried_type(value)
            self.bindings[value] = Binding(name, form, rust_type, mutable=True)

    def assign_carried(self, scope: _Scope, names: list[str], values: list[int]) -> None:
        """`name = value;` for each carried variable, through temporaries when a
        new value is another carried variable's old one."""
        exprs = []
        for value in values:
            form, _ = self.carried_type(value)
            want: Literal["scalar", "tile", "any"] = "any"
            if form in ("scalar", "tile"):
                want = "scalar" if form == "scalar" else "tile"
            exprs.append(self.use(value, want))
        needs_temps = any(
            expr in names and expr != name for name, expr in zip(names, exprs, strict=True)
        )
        if needs_temps:
            temps = []
            for name, expr in zip(names, exprs, strict=True):
                temp = self.fresh(f"next_{name}")
                self.emit(scope, f"let {temp} = {expr};")
                temps.append(temp)
            exprs = temps
        for name, expr in zip(names, exprs, strict=True):
            if expr != name:
                self.emit(scope, f"{name} = {expr};")

    def op_for(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        results = self.resolved.result_ids(op)
        lower, upper, step, inits = operands[0], operands[1], operands[2], operands[3:]
        body = op.regions[0].blocks[0]
        args = self.resolved.block_args[id(body)]
        names = self.carried_names(op, args[1:], results)
        self.declare_carried(scope, names, inits)
        line = location_line(self.first_location(op))
        loop_var = self.source.loop_vars.get(line or -1) if line is not None else None
        iv = self.fresh(loop_var or "i")
        self.bind(args[0], iv, "scalar", self.scalar_type(args[0]))
        self.bind_carried(names, args[1:])
        bounds = f"{self.loop_bound(lower)}..{self.loop_bound(upper)}"
        self.emit(scope, f"for {iv} in ({bounds}).step_by({self.use(step, 'scalar')} as usize) {{")
        inner = _Scope(lines=scope.lines, depth=scope.depth + 1, in_loop=True)
        for inner_op in body.ops:
            if inner_op.name == "continue":
                self.assign_carried(inner, names, self.resolved.operand_ids(inner_op))
                continue
            self.comment_source(inner_op, inner)
            self.emit_op(inner_op, inner)
        self.emit(scope, "}")
        self.bind_carried(names, results)

    def loop_bound(self, value: int) -> str:
        """A `for` bound; a generic constant goes through `loop_bound` (UPSTREAM_GAPS.md
        G16: cutile-rs would assume the loop variable's range from its known value)."""
        if not self.is_generic_constant(value):
            return self.use(value, "scalar")
        self.module_items.add("loop_bound")
        return f"loop_bound({self.use(value, 'scalar')})"

    def is_generic_constant(self, value: int) -> bool:
        producer = self.resolved.producer(value)
        return producer is not None and self.positions[id(producer)] in self.scalar_constants

    def op_loop(self, op: Op, scope: _Scope) -> None:
        operands = self.resolved.operand_ids(op)
        results = self.resolved.result_ids(op)
        body = op.regions[0].blocks[0]
        args = self.resolved.block_args[id(body)]
        guard = _while_guard(body.ops, args, self.resolved)
        if guard is None:
            raise Blocked(
                "loop",
                self.where(op),
                "only `while`-shaped loops lift: cutile-rs threads every carried value "
                "through an `if` that breaks or continues",
            )
        names = self.carried_names(op, args, results)
        self.declare_carried(scope, names, operands)
        self.bind_carried(names, args)
        cond_scope = _Scope(lines=[], depth=1, in_loop=True)
        for inner_op in body.ops[:guard]:
            self.emit_op(inner_op, cond_scope)
        condition = body.ops[guard]
        cond_value = self.resolved.operand_ids(condition)[0]
        cond_expr = self.use(cond_value, "scalar")
        if cond_scope.lines:
            self.emit(scope, "while {")
            scope.lines.extend(INDENT * scope.depth + line for line in cond_scope.lines)
            self.emit(scope, f"{INDENT}{cond_expr}\n}} {{")
        else:
            self.emit(scope, f"while {cond_expr} {{")
        inner = _Scope(lines=scope.lines, depth=scope.depth + 1, in_loop=True)
        for inner_op in body.ops[guard + 1 :]:
            if inner_op.name == "continue":
                self.assign_carried(inner, names, self.resolved.operand_ids(inner_op))
                continue
            nested_loop = inner_op.name in ("for", "loop")  # its own continue stays inside
            if inner_op.name == "break" or (not nested_loop and _exits_enclosing_loop(inner_op)):
                raise Blocked(
                    inner_op.name,
                    self.where(inner_op),
                    "a break or continue inside an `if`: cutile-rs threads every carried "
                    "value through that `if`",
                )
            self.comment_source(inner_op, inner)
            self.emit_op(inner_op, inner)
        self.emit(scope, "}")
        self.bind_carried(names, results)

    def op_if(self, op: Op, scope: _Scope) -> None:
        results = self.resolved.result_ids(op)
        if _exits_enclosing_loop(op):
            raise Blocked(
                "if",
                self.where(op),
                "a break or continue inside an `if`: cutile-rs threads every carried value "
                "through that `if`",
            )
        if scope.in_loop or len(results) > 1:
            self.if_statement(op, scope)
            return
        cond = self.resolved.operand_ids(op)[0]
        header = f"if {self.use(cond, 'scalar')} {{"
        if results:
            value = results[0]
            form, rust_type = self.carried_type(value)
            name = self.fresh(self.base_name(op))
            header = f"let {name}: {rust_type} = {header}"
        self.emit(scope, header)
        for index, region in enumerate(op.regions):
            if index == 1:
                if not results and _empty_region(region):
                    continue
                self.emit(scope, "} else {")
            self.emit_branch(region, scope, results)
        self.emit(scope, "};" if results else "}")
        if results:
            form, rust_type = self.carried_type(results[0])
            self.bind(results[0], name, form, rust_type)

    def emit_branch(self, region: Region, scope: _Scope, results: list[int]) -> None:
        inner = _Scope(lines=scope.lines, depth=scope.depth + 1, in_loop=scope.in_loop)
        saved = dict(self.bindings)
        for op in region.ops:
            if op.name == "yield":
                values = self.resolved.operand_ids(op)
                if values:
                    form, _ = self.carried_type(results[0])
                    want: Literal["scalar", "tile", "any"] = (
                        "scalar" if form == "scalar" else ("tile" if form == "tile" else "any")
                    )
                    self.emit(inner, self.use(values[0], want))
                continue
            self.comment_source(op, inner)
            self.emit_op(op, inner)
        self.bindings = {**saved, **{k: v for k, v in self.bindings.items() if k not in saved}}

    def if_statement(self, op: Op, scope: _Scope) -> None:
        """An `if` inside a loop, or with several results: a statement whose
        results are mutable variables each branch assigns. cutile-rs yields the
        variables a branch assigns (in name order, so the names sort in result
        order) and, inside a loop, every loop-carried variable besides (G8):
        verification decides whether that is the same machine code."""
        results = self.resolved.result_ids(op)
        if any(self.carried_type(value)[0] == "token" for value in results):
            raise Blocked(op.name, self.where(op), "an `if` that yields a memory token")
        branches = [op.regions[0], op.regions[1] if len(op.regions) > 1 else None]
        yields = [_yielded(region, self.resolved) if region else [] for region in branches]
        names = self.if_result_names(op, results, yields[0])
        initials: list[int | None] = []
        for index, (name, value) in enumerate(zip(names, results, strict=True)):
            _, rust_type = self.carried_type(value)
            # The else branch's value where it exists before the `if` (a value the
            # `if` leaves as it was), else the then branch's, else a zero.
            initial = next(
                (y[index] for y in reversed(yields) if y and y[index] in self.bindings), None
            )
            initials.append(initial)
            expr = self.carried_use(initial) if initial is not None else self.zero_of(op, value)
            self.emit(scope, f"let mut {name}: {rust_type} = {expr};")
        cond = self.resolved.operand_ids(op)[0]
        self.emit(scope, f"if {self.use(cond, 'scalar')} {{")
        self.if_statement_branch(op.regions[0], scope, names)
        else_region = branches[1]
        keeps_initials = else_region is None or (
            all(inner.name == "yield" for inner in else_region.ops) and yields[1] == initials
        )
        if else_region is not None and not keeps_initials:
            self.emit(scope, "} else {")
            self.if_statement_branch(else_region, scope, names)
        self.emit(scope, "}")
        self.bind_carried(names, results)

    def if_result_names(self, op: Op, results: list[int], then_yields: list[int]) -> list[str]:
        bases = []
        for index, value in enumerate(results):
            source = self.source_name_of(value)
            if source is None and index < len(then_yields):
                source = self.source_name_of(then_yields[index])
            bases.append(snake(source or f"r{index}"))
        return self.sorted_names(bases)

    def source_name_of(self, value: int) -> str | None:
        binding = self.bindings.get(value)
        if binding is not None and binding.expr.isidentifier():
            return binding.expr
        producer = self.resolved.producer(value)
        if producer is not None:
            named = self.statement_names.get(id(producer))
            if named is not None:
                return named
        return None

    def carried_use(self, value: int) -> str:
        form, _ = self.carried_type(value)
        want: Literal["scalar", "tile", "any"] = "any"
        if form in ("scalar", "tile"):
            want = "scalar" if form == "scalar" else "tile"
        return self.use(value, want)

    def zero_of(self, op: Op, value: int) -> str:
        """An initial value for a variable both branches assign (dead in the IR)."""
        form, rust_type = self.carried_type(value)
        element = self.element(value)
        if element in ("E", "f16", "bf16"):
            zero = f"{element}::ZERO"
        elif element in ("f32", "f64"):
            zero = f"0.0{element}"
        elif element.startswith(("i", "u")):
            zero = f"0{element}"
        else:
            raise Blocked(op.name, self.where(op), f"an `if` result of type {rust_type}")
        if form == "tile":
            return f"constant({zero}, {shape_macro(self.dims(value))})"
        if form == "scalar" and "::" not in zero:
            return zero
        raise Blocked(op.name, self.where(op), f"an `if` result of type {rust_type}")

    def if_statement_branch(self, region: Region, scope: _Scope, names: list[str]) -> None:
        inner = _Scope(lines=scope.lines, depth=scope.depth + 1, in_loop=scope.in_loop)
        saved = dict(self.bindings)
        for op in region.ops:
            if op.name == "yield":
                self.assign_carried(inner, names, self.resolved.operand_ids(op))
                continue
            self.comment_source(op, inner)
            self.emit_op(op, inner)
        self.bindings = {**saved, **{k: v for k, v in self.bindings.items() if k not in saved}}


def _yielded(region: Region, resolved: Resolved) -> list[int]:
    for op in region.ops:
        if op.name == "yield":
            return resolved.operand_ids(op)
    return []


def _constant_bits(element: str, raw: str, dense: str) -> str | None:
    """The signed spelling of a constant's bits where cutile-rs's own `constant(..)`
    encodes the literal wrongly, else None: unsigned values past i32/i64::MAX (it
    parses them as signed and writes 0, UPSTREAM_GAPS.md G11) and `false` (it
    writes any boolean literal but `0` as true, G14)."""
    if element in ("u32", "u64") and raw.partition(":")[2].strip().startswith("-"):
        return raw.partition(":")[2].strip()
    if element == "bool" and dense == "false":
        return "0"
    return None


def _retyped_pointer(line: str, pointees: dict[str, str]) -> str:
    """The preamble line `let x: PointerTile<*mut T, { [] }> = pointer_to_tile(x);` with
    the pointee the ops read (`pointees[x]`); other lines as they are."""
    name = line[4:].partition(":")[0] if line.startswith("let ") else ""
    if name not in pointees or not line.endswith(f" = pointer_to_tile({name});"):
        return line
    return (
        line
        if "<*mut E," in line
        else f"let {name}: PointerTile<*mut {pointees[name]}, {{ [] }}> = pointer_to_tile({name});"
    )


def _dtype_element(dtype: str) -> str:
    from nodes.kernel_writer.rust_types import DTYPE_ELEMENTS

    return DTYPE_ELEMENTS[dtype]


def _assume_call(op: Op, where: str, fact: tuple[int, str] | None) -> str:
    attributes = op.attributes
    if "div_by" in attributes:
        parts = [p.strip() for p in attributes["div_by"].replace("every", ",").split(",")]
        if len(parts) == 1:
            divisor = parts[0]
            if fact is not None and str(fact[0]) == divisor:
                # A launch fact that varies: stated only when the launch has it.
                return f"{FACT_HELPER}::<_, {fact[1]}>"
            return f"assume_div_by::<_, {divisor}>"
        raise Blocked("assume", where, f"div_by<{attributes['div_by']}>")
    if "bounded" in attributes:
        lower, upper = (p.strip() for p in attributes["bounded"].split(","))
        if upper == "?":
            return f"assume_bounds_lower::<_, {lower}>"
        if lower == "?":
            return f"assume_bounds_upper::<_, {upper}>"
        return f"assume_bounds::<_, {lower}, {upper}>"
    raise Blocked("assume", where, f"predicate {attributes}")


def _latency(op: Op) -> str:
    hints = op.attributes.get("optimization_hints", "")
    for _, body in _split_hint_arches(hints):
        for item in body.split(","):
            key, _, value = item.partition("=")
            if key.strip() == "latency":
                return value.strip()
    return "0"


def _split_hint_arches(text: str) -> list[tuple[str, str]]:
    """`default={a=1, b=2}, sm_90={c=3}` -> [("default", "a = 1, b = 2"), ...]."""
    out = []
    for chunk in text.split("}"):
        arch, _, body = chunk.strip(" ,").partition("={")
        if arch:
            items = [item.strip() for item in body.split(",") if item.strip()]
            out.append((arch.strip(), ", ".join(i.replace("=", " = ") for i in items)))
    return out


def _identity_for(helper: str, element: str) -> str:
    """The identity cutile-rs's reduce helper writes, in the parser's spelling."""
    from tileir import attrs

    if is_float(element):
        value = {
            "reduce_sum": "0",
            "reduce_prod": "1",
            "reduce_max": "-inf",
            "reduce_min": "inf",
        }[helper]
        return "[" + attrs.scalar_literal(value, element) + "]"
    width = int(element[1:])
    value_int = {
        "reduce_sum": 0,
        "reduce_prod": 1,
        "reduce_max": -(1 << (width - 1)),
        "reduce_min": (1 << (width - 1)) - 1,
    }[helper]
    return f"[{element}:{value_int}]"


def _identities(op: Op) -> str:
    """The op's identities as `[type:value]`, whichever spelling the parser kept."""
    from tileir import attrs

    text = op.attributes.get("identities", "").strip().strip("[]")
    info = tile_info(op.operand_types[0]) if op.operand_types else None
    element = info.element if info is not None else ""
    values = []
    for part in text.split(","):
        value, _, type_name = part.partition(":")
        type_name, value = type_name.strip(), value.strip()
        if value in ("f16", "bf16", "f32", "f64") or value.startswith("i"):
            value, type_name = type_name, value  # already `type:value`
        values.append(attrs.scalar_literal(value, type_name or element))
    return "[" + ", ".join(values) + "]"


def _exits_enclosing_loop(op: Op) -> bool:
    """Whether a `break` or `continue` nested in `op` leaves a loop around `op`
    (one that belongs to a loop nested inside `op` does not)."""
    for region in op.regions:
        for inner in region.ops:
            if inner.name in ("break", "continue"):
                return True
            if inner.name not in ("for", "loop") and _exits_enclosing_loop(inner):
                return True
    return False


def _empty_region(region: Region) -> bool:
    return all(op.name == "yield" and not op.operands for op in region.ops)


def _while_guard(ops: list[Op], args: list[int], resolved: Resolved) -> int | None:
    """Index of the `if %c {} else { break <carried> }` that makes a loop a
    `while`, when every op before it only computes the condition."""
    for index, op in enumerate(ops):
        exits = any(x.name in ("break", "continue") for x in op.walk())
        if op.name != "if" or (resolved.result_ids(op) and not exits):
            # An `if` with a value and no exit computes the condition too
            # (`a and b` short-circuits into one).
            if exits:
                return None
            continue
        if resolved.result_ids(op) or len(op.regions) != 2 or not _empty_region(op.regions[0]):
            return None
        else_ops = op.regions[1].ops
        if len(else_ops) != 1 or else_ops[0].name != "break":
            return None
        if resolved.operand_ids(else_ops[0]) != args:
            return None
        return index
    return None
