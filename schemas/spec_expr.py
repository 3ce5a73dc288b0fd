"""The small expression language of port specs.

Dispatch conditions, launch grids, shapes and constant values are written as
Python expressions over a few names (dimension symbols, constants, scalars,
`dtype`, `num_sms`). They are parsed with `ast` and evaluated by walking the
tree: nothing is ever passed to `eval`, and only the operators and functions
listed here are accepted.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache

Value = int | float | bool | str


class ExprError(ValueError):
    """An expression that cannot be parsed, names something unknown, or fails."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# Past 64 bits no launcher can hold a value: a shift or power beyond is refused
# before Python computes it (an enormous integer would exhaust memory).
_MAX_BITS = 64


def _lshift(a: Value, b: Value) -> Value:
    if isinstance(b, int) and b > _MAX_BITS and a != 0:
        raise ExprError(f"{a} << {b} overflows 64-bit integers")
    shifted: Value = operator.lshift(a, b)
    return shifted


def _pow(a: Value, b: Value) -> Value:
    if isinstance(a, int) and isinstance(b, int) and abs(a) > 1 and b > _MAX_BITS:
        raise ExprError(f"{a} ** {b} overflows 64-bit integers")
    power: Value = operator.pow(a, b)
    return power


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


FUNCTIONS: dict[str, Callable[..., Value]] = {
    "cdiv": _cdiv,
    "next_pow2": _next_pow2,
    "min": min,
    "max": max,
}

_BINARY: dict[type[ast.operator], Callable[[Value, Value], Value]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
    ast.LShift: _lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}

_COMPARE: dict[type[ast.cmpop], Callable[[Value, Value], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


@lru_cache(maxsize=1024)
def parse(text: str) -> ast.expr:
    """Parse and check an expression; raises ExprError naming the offending part."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {text!r}: {exc.msg}") from None
    for node in ast.walk(tree.body):
        _check_node(node, text)
    return tree.body


def names_in(text: str) -> set[str]:
    """The free names an expression reads (function names excluded)."""
    body = parse(text)
    called = {id(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and id(n) not in called}


def _check_node(node: ast.AST, text: str) -> None:
    allowed = (
        ast.BinOp,
        ast.UnaryOp,
        ast.BoolOp,
        ast.Compare,
        ast.IfExp,
        ast.Call,
        ast.Name,
        ast.Constant,
        ast.Load,
        ast.operator,
        ast.unaryop,
        ast.boolop,
        ast.cmpop,
    )
    if not isinstance(node, allowed):
        raise ExprError(f"{type(node).__name__} is not allowed in expression {text!r}")
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
        raise ExprError(f"operator {type(node.op).__name__} is not allowed in {text!r}")
    if isinstance(node, ast.Compare) and any(type(op) not in _COMPARE for op in node.ops):
        raise ExprError(f"only ==, !=, <, <=, >, >= comparisons are allowed in {text!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise ExprError(f"only the functions {known} may be called in {text!r}")
        if node.keywords:
            raise ExprError(f"keyword arguments are not allowed in {text!r}")
    if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str):
        raise ExprError(f"constant {node.value!r} is not allowed in {text!r}")


def evaluate(text: str, env: Mapping[str, Value]) -> Value:
    """Evaluate an expression over `env`; raises ExprError on unknown names or failure."""
    body = parse(text)
    try:
        return _eval(body, env, text)
    except ExprError:
        raise
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise ExprError(f"evaluating {text!r} failed: {exc}") from None


def evaluate_int(text: str | int, env: Mapping[str, Value]) -> int:
    """Evaluate an integer-valued expression (a literal int passes through)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value = evaluate(str(text), env)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExprError(f"expression {text!r} must give an integer, got {value!r}")
    return value


def _eval(node: ast.expr, env: Mapping[str, Value], text: str) -> Value:
    match node:
        case ast.Constant(value=int() | float() | str() as value):
            return value
        case ast.Name(id=name):
            if name not in env:
                known = ", ".join(sorted(env)) or "none"
                raise ExprError(f"unknown name {name!r} in {text!r} (known: {known})")
            return env[name]
        case ast.BinOp(left=left, op=op, right=right):
            return _BINARY[type(op)](_eval(left, env, text), _eval(right, env, text))
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_number(_eval(operand, env, text), text)
        case ast.UnaryOp(op=ast.UAdd(), operand=operand):
            return _number(_eval(operand, env, text), text)
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _eval(operand, env, text)
        case ast.BoolOp(op=ast.And(), values=values):
            return all(_eval(v, env, text) for v in values)
        case ast.BoolOp(op=ast.Or(), values=values):
            return any(_eval(v, env, text) for v in values)
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            return _compare(left, ops, comparators, env, text)
        case ast.IfExp(test=test, body=body, orelse=orelse):
            chosen = body if _eval(test, env, text) else orelse
            return _eval(chosen, env, text)
        case ast.Call(func=ast.Name(id=fname), args=args):
            return FUNCTIONS[fname](*(_eval(a, env, text) for a in args))
    raise ExprError(f"cannot evaluate {ast.dump(node)} in {text!r}")


def _number(value: Value, text: str) -> int | float:
    if isinstance(value, str):
        raise ExprError(f"a string cannot be negated in {text!r}")
    return value


def _compare(
    left: ast.expr,
    ops: list[ast.cmpop],
    comparators: list[ast.expr],
    env: Mapping[str, Value],
    text: str,
) -> bool:
    current = _eval(left, env, text)
    for op, right_node in zip(ops, comparators, strict=True):
        right = _eval(right_node, env, text)
        if not _COMPARE[type(op)](current, right):
            return False
        current = right
    return True
