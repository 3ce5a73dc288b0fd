"""Which array parameters a kernel reads and which it writes, from its source.

An array is written when it is the first argument of a store (`ct.store`,
`ct.scatter`, an atomic) in the kernel or in a `@ct.function` helper it passes
the array to, across modules of the library; read when it is the first
argument of a load (`ct.load`, `ct.gather`, an atomic). Syntax only: nothing
runs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Final, Literal

from toolchain.source_tree import ModuleSource, SourceTree, SourceTreeError

Role = Literal["in", "out", "inout"]
STORES: Final = frozenset({"store", "scatter", "store_ptr"})
LOADS: Final = frozenset({"load", "gather", "load_ptr"})
MAX_DEPTH: Final = 8


@dataclass
class _Access:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)


def _root_name(node: ast.expr) -> str | None:
    """`y` for `y`, `y.tiled_view(...)`, `y[...]`."""
    while True:
        match node:
            case ast.Name(id=name):
                return name
            case ast.Attribute(value=inner) | ast.Subscript(value=inner):
                node = inner
            case ast.Call(func=ast.Attribute(value=inner)):
                node = inner
            case _:
                return None


def _resolve_helper(
    tree: SourceTree, source: ModuleSource, name: str
) -> tuple[ModuleSource, ast.FunctionDef] | None:
    """The function `name` refers to in `source`: defined there or imported from the tree."""
    function = source.function(name)
    if function is not None:
        return source, function
    for index in source.binders.get(name, []):
        statement = source.tree.body[index]
        if not isinstance(statement, ast.ImportFrom):
            continue
        target = source.absolute(statement.module, statement.level)
        original = next((a.name for a in statement.names if (a.asname or a.name) == name), name)
        if tree.has_module(target):
            return _resolve_helper(tree, tree.module(target), original)
    return None


def _accesses(
    tree: SourceTree, source: ModuleSource, function: ast.FunctionDef, depth: int
) -> _Access:
    access = _Access()
    params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    aliases = _aliases(function, params)
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", None)
        if name is None:
            continue
        first = _root_name(node.args[0])
        first = aliases.get(first, first) if first is not None else None
        if name.startswith("atomic") and first in params:
            access.read.add(first)
            access.written.add(first)
        elif name in STORES and first in params:
            access.written.add(first)
        elif name in LOADS and first in params:
            access.read.add(first)
        elif isinstance(callee, ast.Name) and depth < MAX_DEPTH:
            _through_helper(tree, source, callee.id, node, params, aliases, access, depth)
    return access


def _aliases(function: ast.FunctionDef, params: list[str]) -> dict[str, str]:
    """Local names bound to a parameter or a part of it (`Ci = Cs[g]`, `y = x.view(..)`),
    by the parameter: a store through `Ci` writes `Cs`. Assignments in source order;
    a name bound from two parameters keeps the first."""
    aliases: dict[str, str] = {}
    assignments = sorted(
        (n for n in ast.walk(function) if isinstance(n, ast.Assign)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in assignments:
        root = _root_name(node.value)
        source = aliases.get(root, root) if root is not None else None
        if source not in params:
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id not in params:
                aliases.setdefault(target.id, source)
    return aliases


def _through_helper(
    tree: SourceTree,
    source: ModuleSource,
    name: str,
    call: ast.Call,
    params: list[str],
    aliases: dict[str, str],
    access: _Access,
    depth: int,
) -> None:
    try:
        resolved = _resolve_helper(tree, source, name)
    except SourceTreeError:
        return
    if resolved is None:
        return
    helper_source, helper = resolved
    helper_params = [a.arg for a in [*helper.args.posonlyargs, *helper.args.args]]
    inner = _accesses(tree, helper_source, helper, depth + 1)
    passed = {p: _root_name(a) for p, a in zip(helper_params, call.args, strict=False)}
    passed |= {k.arg: _root_name(k.value) for k in call.keywords if k.arg is not None}
    for helper_param, root in passed.items():
        argument = aliases.get(root, root) if root is not None else None
        if argument not in params:
            continue
        if helper_param in inner.read:
            access.read.add(argument)
        if helper_param in inner.written:
            access.written.add(argument)


def array_roles(tree: SourceTree, module: str, kernel: str, arrays: list[str]) -> dict[str, Role]:
    """in / out / inout for each named array parameter of the kernel."""
    source = tree.module(module)
    function = source.function(kernel)
    if function is None:
        raise SourceTreeError(f"no function {kernel!r} in {module}", source.path)
    access = _accesses(tree, source, function, 0)
    roles: dict[str, Role] = {}
    for name in arrays:
        if name in access.written:
            roles[name] = "inout" if name in access.read else "out"
        else:
            roles[name] = "in"
    return roles
