"""Branches of a kernel that only constants (or array dtypes) decide.

cuTile Python prunes them at compile time, so each side is a different kernel
structure. A port spec's variant must not cover configurations that take
different sides: the Rust port cannot specialise that implicitly, so such a
variant has to be split (docs/PIPELINE.md: "Branches on constants that change tile
rank/shape/memory API become separate Rust entries"). Conditions are evaluated
per configuration with a small interpreter over literals, constants,
`x.dtype`, `ct.<dtype>`, arithmetic, comparisons, boolean operators and the spec
expressions' functions (`ct.cdiv`); anything else leaves the branch undetermined
rather than guessed.

A kernel also decides structure without an `if`: a boolean computed from constants
and handed to a cuTile call (`check_bounds=num_tiles * TILE_SIZE != N`) is a
branch of kind `argument`, with the locals it reads (`derived_constants`) written
out, so that its condition is one spec expression over the constants.
"""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from schemas.spec_expr import FUNCTIONS, ExprError
from schemas.spec_expr import parse as parse_spec_expression

Value = bool | int | float | str

_DTYPE_ALIASES: Final = {"bool_": "bool"}
_BINARY: Final[dict[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Div: operator.truediv,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.eq,
    ast.IsNot: operator.ne,
}


class Undetermined(Exception):
    """The condition needs something the interpreter does not know."""


@dataclass(frozen=True)
class Scope:
    """What a configuration fixes: constant values and each array's dtype."""

    constants: Mapping[str, bool | int | float]
    array_dtypes: Mapping[str, str]


@dataclass(frozen=True)
class ConstantBranch:
    index: int
    kind: str
    line: int
    condition: str
    test: ast.expr
    enclosing: tuple[tuple[int, bool], ...]
    """(index of an enclosing constant branch, the side this one sits on)."""

    def describe(self, file_name: str) -> str:
        return f"`{self.kind} {self.condition}` ({file_name}:{self.line})"

    @property
    def spec_condition(self) -> str | None:
        """The condition as a spec expression (over constants only), else None: one
        that reads a dtype is decided per configuration, not by an expression."""
        try:
            parse_spec_expression(self.condition)
        except ExprError:
            return None
        return self.condition


def collect_branches(
    kernel: ast.FunctionDef,
    *,
    constants: set[str],
    arrays: set[str],
    cutile_modules: frozenset[str],
    module_values: Mapping[str, bool | int | float | str] | None = None,
) -> list[ConstantBranch]:
    """The kernel's branches only constants decide. A module-level name bound once to
    a literal (`GELU_TANH = 1`) reads as its value: the condition compares a
    constant with it as with the literal."""
    body = kernel.body
    if module_values:  # on a copy: the kernel's tree is shared
        inline = _Inline(module_values)
        body = [inline.visit(statement) for statement in copy.deepcopy(kernel.body)]
    derived = _derived_trees(body, constants, cutile_modules)
    collector = _Collector(constants, arrays, cutile_modules, derived)
    collector.statements(body, ())
    return collector.found


def derived_constants(
    kernel: ast.FunctionDef,
    *,
    constants: set[str],
    cutile_modules: frozenset[str],
    module_values: Mapping[str, bool | int | float | str] | None = None,
) -> dict[str, str]:
    """The kernel's locals computed from its constants alone (`num_tiles =
    ct.cdiv(N, TILE_SIZE)`), each as a spec expression over the constants
    (`cdiv(N, TILE_SIZE)`), in source order. cuTile Python folds each into the
    kernel as a number; a port makes it a generic the launcher computes."""
    body = kernel.body
    if module_values:
        inline = _Inline(module_values)
        body = [inline.visit(statement) for statement in copy.deepcopy(kernel.body)]
    derived = _derived_trees(body, constants, cutile_modules)
    return {name: ast.unparse(tree) for name, tree in derived.items()}


def _derived_trees(
    body: list[ast.stmt], constants: set[str], modules: frozenset[str]
) -> dict[str, ast.expr]:
    """`derived_constants` as trees: single assignments (a name bound once in the
    whole kernel, at any depth: a value of constants alone is the same wherever it is
    computed) whose value reads constants and earlier such locals only."""
    bound: dict[str, int] = {}
    assignments: list[ast.Assign] = []
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
            elif isinstance(node, ast.Assign):
                assignments.append(node)
    derived: dict[str, ast.expr] = {}
    for statement in sorted(assignments, key=lambda node: (node.lineno, node.col_offset)):
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            continue
        name = statement.targets[0].id
        if bound.get(name) != 1 or name in constants:
            continue
        tree = _spec_form(statement.value, constants, modules, derived)
        if tree is not None and _reads_constants(tree, constants):
            derived[name] = tree
    return derived


def _spec_form(
    node: ast.expr, constants: set[str], modules: frozenset[str], derived: Mapping[str, ast.expr]
) -> ast.expr | None:
    """`node` as a spec expression over constants (derived locals written out,
    `ct.cdiv` as `cdiv`), or None where it reads anything else."""
    match node:
        case ast.Name(id=name) if name in constants:
            return ast.Name(id=name, ctx=ast.Load())
        case ast.Name(id=name) if name in derived:
            return copy.deepcopy(derived[name])
        case ast.Call(func=function, args=args, keywords=[]):
            called = _function_name(function, modules)
            if called is None:
                return None
            parts = [_spec_form(a, constants, modules, derived) for a in args]
            if any(p is None for p in parts):
                return None
            return ast.Call(
                func=ast.Name(id=called, ctx=ast.Load()),
                args=[p for p in parts if p is not None],
                keywords=[],
            )
    if not isinstance(node, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare | ast.Constant):
        return None
    out = copy.copy(node)
    for field_name, value in ast.iter_fields(node):
        if isinstance(value, ast.expr):
            part = _spec_form(value, constants, modules, derived)
            if part is None:
                return None
            setattr(out, field_name, part)
        elif isinstance(value, list) and value and isinstance(value[0], ast.expr):
            parts = [_spec_form(v, constants, modules, derived) for v in value]
            if any(p is None for p in parts):
                return None
            setattr(out, field_name, parts)
    return out


def _function_name(function: ast.expr, modules: frozenset[str]) -> str | None:
    """The spec function a call names: `ct.cdiv` (a cuTile module's), `min`, `max`."""
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
        if function.value.id in modules and function.attr in FUNCTIONS:
            return function.attr
        return None
    if isinstance(function, ast.Name) and function.id in ("min", "max"):
        return function.id
    return None


def _reads_constants(tree: ast.expr, constants: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in constants for n in ast.walk(tree))


def _is_boolean(tree: ast.expr) -> bool:
    return isinstance(tree, ast.Compare | ast.BoolOp) or (
        isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not)
    )


def module_literals(module: ast.Module) -> dict[str, bool | int | float | str]:
    """The module-level names bound exactly once, to a literal."""
    bound: dict[str, list[ast.expr]] = {}
    for statement in module.body:
        if not isinstance(statement, ast.Assign):
            continue
        for target in statement.targets:
            if isinstance(target, ast.Name):
                bound.setdefault(target.id, []).append(statement.value)
    return {
        name: values[0].value
        for name, values in bound.items()
        if len(values) == 1
        and isinstance(values[0], ast.Constant)
        and isinstance(values[0].value, bool | int | float | str)
    }


class _Inline(ast.NodeTransformer):
    """Module literals in place of their names."""

    def __init__(self, values: Mapping[str, bool | int | float | str]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return ast.copy_location(ast.Constant(self.values[node.id]), node)
        return node


class _Collector:
    def __init__(
        self,
        constants: set[str],
        arrays: set[str],
        modules: frozenset[str],
        derived: Mapping[str, ast.expr],
    ) -> None:
        self.constants = constants
        self.arrays = arrays
        self.modules = modules
        self.derived = derived
        self.found: list[ConstantBranch] = []
        self.arguments: set[str] = set()  # argument conditions found: one branch each

    def statements(self, body: list[ast.stmt], enclosing: tuple[tuple[int, bool], ...]) -> None:
        for statement in body:
            self._expressions(statement, enclosing)
            if isinstance(statement, ast.If | ast.While):
                kind = "if" if isinstance(statement, ast.If) else "while"
                branch = self._branch(kind, statement.test, enclosing)
                inner = enclosing if branch is None else (*enclosing, (branch.index, True))
                outer = enclosing if branch is None else (*enclosing, (branch.index, False))
                self.statements(statement.body, inner)
                self.statements(statement.orelse, outer)
            else:
                for child in _child_bodies(statement):
                    self.statements(child, enclosing)

    def _expressions(self, statement: ast.stmt, enclosing: tuple[tuple[int, bool], ...]) -> None:
        for child in ast.iter_child_nodes(statement):
            if not isinstance(child, ast.expr):
                continue
            for node in ast.walk(child):
                if isinstance(node, ast.IfExp):
                    self._branch("conditional", node.test, enclosing)
                elif isinstance(node, ast.Call):
                    self._arguments(node, enclosing)

    def _arguments(self, call: ast.Call, enclosing: tuple[tuple[int, bool], ...]) -> None:
        """A boolean of constants handed to a call decides its structure (one branch
        per distinct condition: `check_bounds=check_bound` on every access is one)."""
        for keyword in call.keywords:
            tree = _spec_form(keyword.value, self.constants, self.modules, self.derived)
            if tree is None or not _is_boolean(tree) or not _reads_constants(tree, self.constants):
                continue
            condition = ast.unparse(tree)
            if condition in self.arguments:
                continue
            self.arguments.add(condition)
            ast.copy_location(tree, keyword.value)
            self._branch("argument", tree, enclosing)

    def _branch(
        self, kind: str, test: ast.expr, enclosing: tuple[tuple[int, bool], ...]
    ) -> ConstantBranch | None:
        written = _spec_form(test, self.constants, self.modules, self.derived)
        if written is not None and written is not test:
            test = ast.copy_location(written, test)
        if not self._decided_by_constants(test):
            return None
        branch = ConstantBranch(
            index=len(self.found),
            kind=kind,
            line=test.lineno,
            condition=ast.unparse(test),
            test=test,
            enclosing=enclosing,
        )
        self.found.append(branch)
        return branch

    def _decided_by_constants(self, test: ast.expr) -> bool:
        """Only constants, literals, `array.dtype`, `ct.<name>` and the spec
        expressions' functions appear, and at least one constant or dtype does (a
        literal `if True:` is no variant)."""
        relevant = False
        called = {id(n.func) for n in ast.walk(test) if isinstance(n, ast.Call)}
        for node in ast.walk(test):
            if id(node) in called:
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id in self.arrays and node.attr == "dtype":
                    relevant = True
                elif node.value.id not in self.modules:
                    return False
            elif isinstance(node, ast.Name):
                if node.id in self.constants:
                    relevant = True
                elif node.id not in self.arrays and node.id not in self.modules:
                    return False
            elif isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            ):
                return False
        return relevant


def _child_bodies(statement: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        body = getattr(statement, name, None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            yield body
    for handler in getattr(statement, "handlers", []):
        yield handler.body


# -- evaluation ----------------------------------------------------------------------


def branch_outcome(branch: ConstantBranch, scope: Scope, modules: frozenset[str]) -> bool | None:
    """The side a configuration takes: True (body), False (else), None if undetermined."""
    try:
        return bool(_evaluate(branch.test, scope, modules))
    except (Undetermined, ArithmeticError, TypeError):
        return None


def reaches(
    branch: ConstantBranch,
    outcomes: Mapping[int, bool | None],
) -> bool:
    """Whether a configuration reaches the branch: every enclosing constant branch
    takes the side it sits on (an undetermined one might)."""
    return all(outcomes.get(index) in (side, None) for index, side in branch.enclosing)


def _evaluate(node: ast.expr, scope: Scope, modules: frozenset[str]) -> Value:
    match node:
        case ast.Constant(value=bool() | int() | float() | str() as value):
            return value
        case ast.Name(id=name):
            if name in scope.constants:
                return scope.constants[name]
            raise Undetermined(name)
        case ast.Attribute(value=ast.Name(id=base), attr="dtype") if base in scope.array_dtypes:
            return f"dtype:{scope.array_dtypes[base]}"
        case ast.Attribute(value=ast.Name(id=base), attr=attr) if base in modules:
            return f"dtype:{_DTYPE_ALIASES.get(attr, attr)}"
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _evaluate(operand, scope, modules)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_number(_evaluate(operand, scope, modules))
        case ast.BoolOp():
            return _boolean(node, scope, modules)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            return _number_result(
                _BINARY[type(op)](_evaluate(left, scope, modules), _evaluate(right, scope, modules))
            )
        case ast.Compare():
            return _compare(node, scope, modules)
        case ast.Call(func=ast.Name(id=function), args=args) if function in FUNCTIONS:
            return _number_result(
                FUNCTIONS[function](*(_number(_evaluate(a, scope, modules)) for a in args))
            )
    raise Undetermined(ast.unparse(node))


def _boolean(node: ast.BoolOp, scope: Scope, modules: frozenset[str]) -> Value:
    is_and = isinstance(node.op, ast.And)
    result: Value = is_and
    for operand in node.values:
        result = _evaluate(operand, scope, modules)
        if bool(result) != is_and:
            return result
    return result


def _compare(node: ast.Compare, scope: Scope, modules: frozenset[str]) -> bool:
    left = _evaluate(node.left, scope, modules)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        if type(op) not in _COMPARE:
            raise Undetermined(ast.unparse(node))
        right = _evaluate(comparator, scope, modules)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _number(value: Value) -> int | float:
    if isinstance(value, str):
        raise Undetermined(value)
    return value


def _number_result(value: object) -> Value:
    if isinstance(value, bool | int | float | str):
        return value
    raise Undetermined(repr(value))
