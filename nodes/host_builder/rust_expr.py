"""Port-spec expressions translated to Rust, with Python's semantics.

The launcher derives constants, the grid and the variant from the call's
arguments exactly as the spec (and so the cuTile Python host) does. Each
expression of `schemas.spec_expr` becomes a Rust expression over typed
variables; integer arithmetic goes through the checked helpers of
`kernels_rs/ported/src/ffi/spec_arith.rs` (`rt::add(a, b)?`, `rt::floordiv(a, b)?`,
...), so an overflow or a division by zero refuses the launch, never wraps around
or panics. It is the one emitter of spec expressions: the pipeline's launchers
and the TileGym delivery's (`nodes/host_builder/tilegym_ffi.py`) both use it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from nodes.host_builder.abi import DType, camel
from schemas.spec_expr import parse


class Kind(StrEnum):
    INT = "i64"
    FLOAT = "f64"
    BOOL = "bool"
    DTYPE = "Dtype"
    STR = "str"


class TranspileError(ValueError):
    """An expression the launcher cannot compute (says which and why)."""


@dataclass(frozen=True)
class Typed:
    code: str
    kind: Kind


@dataclass(frozen=True)
class Variable:
    rust: str
    kind: Kind


_INT_BINARY: dict[type[ast.operator], str] = {
    ast.Add: "rt::add",
    ast.Sub: "rt::sub",
    ast.Mult: "rt::mul",
    ast.FloorDiv: "rt::floordiv",
    ast.Mod: "rt::modulo",
    ast.Pow: "rt::pow",
    ast.LShift: "rt::shift_left",
    ast.RShift: "rt::shift_right",
}
_FLOAT_BINARY: dict[type[ast.operator], str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_COMPARE: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


def propagated(call: str) -> str:
    """A checked helper's value inside a function returning the runtime's result."""
    return f"{call}?"


def abi_dtype(dtype: DType) -> str:
    """A dtype as the C ABI's `Dtype` enum names it."""
    return f"Dtype::{camel(dtype.name)}"


class Transpiler:
    """Translates expressions over a fixed set of typed variables. The checked
    helpers are `rt::*` (`spec_arith.rs`); `checked` says how a launcher takes a
    helper's result (by default `?`), `dtype_literal` how it spells a dtype."""

    def __init__(
        self,
        variables: Mapping[str, Variable],
        checked: Callable[[str], str] = propagated,
        dtype_literal: Callable[[DType], str] = abi_dtype,
    ) -> None:
        self.variables = dict(variables)
        self.checked = checked
        self.dtype_literal = dtype_literal
        self._text = ""

    def expression(self, text: str | int | float | bool, want: Kind) -> str:
        """Rust code of `text`, converted to `want` (int → float allowed)."""
        if isinstance(text, bool):
            typed = Typed("true" if text else "false", Kind.BOOL)
        elif isinstance(text, int):
            typed = Typed(f"{text}i64", Kind.INT)
        elif isinstance(text, float):
            typed = Typed(_float_literal(text), Kind.FLOAT)
        else:
            self._text = text
            typed = self._node(parse(text))
        return self._convert(typed, want, str(text))

    def _convert(self, typed: Typed, want: Kind, text: str) -> str:
        if typed.kind is want:
            return typed.code
        if typed.kind is Kind.INT and want is Kind.FLOAT:
            return f"({typed.code} as f64)"
        raise TranspileError(f"{text!r} gives {typed.kind.name.lower()}, not {want.name.lower()}")

    def _fail(self, why: str) -> TranspileError:
        return TranspileError(f"cannot translate {self._text!r}: {why}")

    def _node(self, node: ast.expr) -> Typed:
        handlers: dict[type[ast.expr], Callable[[ast.expr], Typed]] = {
            ast.Constant: self._constant,
            ast.Name: self._name,
            ast.BinOp: self._binary,
            ast.UnaryOp: self._unary,
            ast.BoolOp: self._bool_op,
            ast.Compare: self._compare,
            ast.IfExp: self._if,
            ast.Call: self._call,
        }
        handler = handlers.get(type(node))
        if handler is None:
            raise self._fail(f"{type(node).__name__} is not supported")
        return handler(node)

    def _constant(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.Constant)
        value = node.value
        if isinstance(value, bool):
            return Typed("true" if value else "false", Kind.BOOL)
        if isinstance(value, int):
            return Typed(f"{value}i64", Kind.INT)
        if isinstance(value, float):
            return Typed(_float_literal(value), Kind.FLOAT)
        if isinstance(value, str):
            return Typed(value, Kind.STR)
        raise self._fail(f"constant {value!r}")

    def _name(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.Name)
        if node.id in ("True", "False"):
            return Typed(node.id.lower(), Kind.BOOL)
        variable = self.variables.get(node.id)
        if variable is None:
            known = ", ".join(sorted(self.variables)) or "none"
            raise self._fail(f"unknown name {node.id!r} (known here: {known})")
        return Typed(variable.rust, variable.kind)

    def _numeric(self, node: ast.expr) -> Typed:
        typed = self._node(node)
        if typed.kind not in (Kind.INT, Kind.FLOAT):
            raise self._fail(f"{ast.unparse(node)!r} is not a number")
        return typed

    def _binary(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.BinOp)
        left, right = self._numeric(node.left), self._numeric(node.right)
        op = type(node.op)
        if op is ast.Div:
            call = _helper("rt::true_div", _as_float(left), _as_float(right))
            return Typed(self.checked(call), Kind.FLOAT)
        if left.kind is Kind.INT and right.kind is Kind.INT:
            helper = _INT_BINARY.get(op)
            if helper is None:
                raise self._fail(f"integer operator {op.__name__}")
            return Typed(self.checked(_helper(helper, left.code, right.code)), Kind.INT)
        symbol = _FLOAT_BINARY.get(op)
        if symbol is None:
            raise self._fail(f"float operator {op.__name__}")
        return Typed(f"({_as_float(left)} {symbol} {_as_float(right)})", Kind.FLOAT)

    def _unary(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.UnaryOp)
        if isinstance(node.op, ast.Not):
            operand = self._node(node.operand)
            if operand.kind is not Kind.BOOL:
                raise self._fail("`not` of a non-boolean")
            return Typed(f"(!{operand.code})", Kind.BOOL)
        operand = self._numeric(node.operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        literal = node.operand
        if isinstance(literal, ast.Constant) and type(literal.value) is int:
            return Typed(f"-{literal.value}i64", Kind.INT)  # a literal: nothing to check
        if operand.kind is Kind.INT:
            return Typed(self.checked(_helper("rt::sub", "0", operand.code)), Kind.INT)
        return Typed(f"(-{operand.code})", Kind.FLOAT)

    def _bool_op(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.BoolOp)
        parts = [self._node(value) for value in node.values]
        if any(part.kind is not Kind.BOOL for part in parts):
            raise self._fail("`and`/`or` of non-booleans")
        joiner = " && " if isinstance(node.op, ast.And) else " || "
        return Typed("(" + joiner.join(part.code for part in parts) + ")", Kind.BOOL)

    def _compare(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.Compare)
        operands = [node.left, *node.comparators]
        links = [
            self._comparison(operands[i], op, operands[i + 1]) for i, op in enumerate(node.ops)
        ]
        code = links[0] if len(links) == 1 else "(" + " && ".join(links) + ")"
        return Typed(code, Kind.BOOL)

    def _comparison(self, left_node: ast.expr, op: ast.cmpop, right_node: ast.expr) -> str:
        left, right = self._node(left_node), self._node(right_node)
        symbol = _COMPARE[type(op)]
        if Kind.DTYPE in (left.kind, right.kind) or Kind.STR in (left.kind, right.kind):
            return self._dtype_comparison(left, symbol, right)
        if left.kind is Kind.BOOL and right.kind is Kind.BOOL and symbol in ("==", "!="):
            return f"({left.code} {symbol} {right.code})"
        if left.kind is Kind.INT and right.kind is Kind.INT:
            return f"({left.code} {symbol} {right.code})"
        if {left.kind, right.kind} <= {Kind.INT, Kind.FLOAT}:
            return f"({_as_float(left)} {symbol} {_as_float(right)})"
        raise self._fail(f"comparison of {left.kind.name.lower()} with {right.kind.name.lower()}")

    def _dtype_comparison(self, left: Typed, symbol: str, right: Typed) -> str:
        pair = {left.kind, right.kind}
        if pair != {Kind.DTYPE, Kind.STR} or symbol not in ("==", "!="):
            raise self._fail("`dtype` can only be compared with == or != to a dtype name")
        name = left.code if left.kind is Kind.STR else right.code
        variable = right.code if left.kind is Kind.STR else left.code
        try:
            member = DType.from_spec_name(name)
        except KeyError:
            raise self._fail(f"{name!r} is not a dtype name") from None
        return f"({variable} {symbol} {self.dtype_literal(member)})"

    def _if(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.IfExp)
        test = self._node(node.test)
        if test.kind is not Kind.BOOL:
            raise self._fail("the condition of `a if c else b` must be boolean")
        body, orelse = self._node(node.body), self._node(node.orelse)
        if body.kind is orelse.kind:
            kind = body.kind
            codes = (body.code, orelse.code)
        elif {body.kind, orelse.kind} <= {Kind.INT, Kind.FLOAT}:
            kind = Kind.FLOAT
            codes = (_as_float(body), _as_float(orelse))
        else:
            raise self._fail("the branches of `a if c else b` have different types")
        condition = unwrapped(test.code)  # rustc warns of parentheses around it
        return Typed(f"(if {condition} {{ {codes[0]} }} else {{ {codes[1]} }})", kind)

    def _call(self, node: ast.expr) -> Typed:
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        name = node.func.id
        args = [self._numeric(arg) for arg in node.args]
        if name in ("cdiv", "next_pow2"):
            arity = 2 if name == "cdiv" else 1
            if len(args) != arity or any(arg.kind is not Kind.INT for arg in args):
                raise self._fail(f"{name} takes {arity} integer argument(s)")
            call = _helper(f"rt::{name}", *(a.code for a in args))
            return Typed(self.checked(call), Kind.INT)
        if not args:
            raise self._fail(f"{name}() needs arguments")
        if all(arg.kind is Kind.INT for arg in args):
            codes, kind = [a.code for a in args], Kind.INT
        else:
            codes, kind = [_as_float(a) for a in args], Kind.FLOAT
        combined = codes[0]
        for code in codes[1:]:
            combined = f"{combined}.{name}({code})"
        return Typed(combined, kind)


def unwrapped(code: str) -> str:
    """`code` without one pair of parentheses around all of it."""
    if not (code.startswith("(") and code.endswith(")")):
        return code
    depth = 0
    for index, char in enumerate(code):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and index < len(code) - 1:
            return code  # the first parenthesis closes before the end
    return code[1:-1]


def _helper(name: str, *arguments: str) -> str:
    """A call of a checked helper; rustc warns of parentheses around an argument."""
    return f"{name}({', '.join(unwrapped(argument) for argument in arguments)})"


def _as_float(typed: Typed) -> str:
    return f"({typed.code} as f64)" if typed.kind is Kind.INT else typed.code


def _float_literal(value: float) -> str:
    text = repr(value)
    if text in ("inf", "-inf", "nan"):
        return {"inf": "f64::INFINITY", "-inf": "f64::NEG_INFINITY", "nan": "f64::NAN"}[text]
    return f"{text}f64" if ("." in text or "e" in text) else f"{text}.0f64"
