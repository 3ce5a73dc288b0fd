"""An op of TileGym's cutile backend, read from its unmodified source as syntax.

`find_op` maps an op name to the module(s) under `ops/cutile/` that register it
with `@register_impl("<op>", backend="cutile")`. `host_code` takes the module's
host side as it is written: the registered function and every module-level
function, class, constant and import it reaches, leaving out the `@ct.kernel`
functions (and what only they use). Nothing is imported: TileGym needs torch
and a GPU to import.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from pathlib import Path

from schemas.tilegym_backend import LAUNCH

CUTILE_OPS = Path("tilegym/ops/cutile")


class OpSourceError(ValueError):
    """The op cannot be found, or its host code cannot be restated; says why."""


@dataclass(frozen=True)
class OpModule:
    path: Path  # relative to the source root, e.g. tilegym/ops/cutile/activation/relu.py
    tree: ast.Module
    function: ast.FunctionDef  # the function registered for the op

    @property
    def parameters(self) -> list[str]:
        return [arg.arg for arg in self.function.args.args]


@dataclass(frozen=True)
class HostCode:
    """The host side of an op's module, ready to be written into another module."""

    imports: list[str]  # absolute imports of the names the code uses
    body: str  # the kept statements in source order, comments and layout as written
    kernels: list[str]  # the kernels it launches, by name


def _registers(decorator: ast.expr, op: str) -> bool:
    if not isinstance(decorator, ast.Call) or ast.unparse(decorator.func) != "register_impl":
        return False
    name = decorator.args[0] if decorator.args else None
    backend = next((k.value for k in decorator.keywords if k.arg == "backend"), None)
    return (
        isinstance(name, ast.Constant)
        and name.value == op
        and isinstance(backend, ast.Constant)
        and backend.value == "cutile"
    )


def find_op(source_root: Path, op: str) -> list[OpModule]:
    """Every cutile module registering `op`, sorted by path; [] when none does."""
    found: list[OpModule] = []
    for path in sorted((source_root / CUTILE_OPS).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                _registers(d, op) for d in node.decorator_list
            ):
                found.append(OpModule(path.relative_to(source_root), tree, node))
    return found


def _is_kernel(node: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).startswith("ct.kernel") for d in node.decorator_list)


def op_kernels(module: OpModule) -> list[str]:
    """The `@ct.kernel` functions the op's registered function reaches: those named in
    it or in the module's functions and classes it names, transitively."""
    top = {
        node.name: node
        for node in module.tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    kernels = {
        name for name, node in top.items() if isinstance(node, ast.FunctionDef) and _is_kernel(node)
    }
    reached: set[str] = set()
    pending: list[ast.AST] = [module.function]
    while pending:
        for node in ast.walk(pending.pop()):
            if isinstance(node, ast.Name) and node.id in top and node.id not in reached:
                reached.add(node.id)
                if node.id not in kernels:
                    pending.append(top[node.id])
    return sorted(reached & kernels)


def _bound_names(node: ast.stmt) -> list[str]:
    """The module-level names a top-level statement defines."""
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [
            n.id for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)
        ]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    return []


def _absolute(module: OpModule, node: ast.ImportFrom) -> str:
    """The module an import names, relative imports resolved against the op's package."""
    if not node.level:
        return node.module or ""
    package = list(module.path.with_suffix("").parts[:-1])
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _import_of(module: OpModule, node: ast.Import | ast.ImportFrom, used: set[str]) -> str:
    """The import statement bringing in only the `used` names it binds."""
    names = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
    if isinstance(node, ast.Import):
        return ast.unparse(ast.Import(names=names))
    return ast.unparse(ast.ImportFrom(module=_absolute(module, node), names=names, level=0))


def _launched(node: ast.AST) -> bool:
    """Whether `node` is a `ct.launch(stream, grid, kernel, args)`."""
    return (
        isinstance(node, ast.Call) and ast.unparse(node.func) == "ct.launch" and len(node.args) == 4
    )


def _refuse_kernel_values(module: OpModule, statement: ast.stmt, kernels: set[str]) -> None:
    """A kernel may be launched, or named and then launched (`k = _a if c else _b`);
    one whose hints are replaced or that is handed to another function (cuTile's
    autotuner) is not something a port stands in for yet."""
    for node in ast.walk(statement):
        inner: list[ast.expr] = []
        if isinstance(node, ast.Attribute):
            inner.append(node.value)
        if isinstance(node, ast.Call) and not _launched(node):
            inner += [*node.args, *(k.value for k in node.keywords)]
        for value in inner:
            if isinstance(value, ast.Name) and value.id in kernels:
                raise OpSourceError(
                    f"{module.path}:{getattr(node, 'lineno', '?')}: `{ast.unparse(node)}` "
                    f"hands the kernel {value.id} to other code than ct.launch (autotuned "
                    "hints are not ported yet)"
                )


def host_code(module: OpModule, source: str) -> HostCode:
    """The statements the registered function needs, from `source` (the module's text)."""
    top: dict[str, ast.stmt] = {}
    for statement in module.tree.body:
        for name in _bound_names(statement):
            top.setdefault(name, statement)
    kernels = {n.name for n in module.tree.body if isinstance(n, ast.FunctionDef) and _is_kernel(n)}
    # `ct` of a routed `ct.launch` is not a use of cuda.tile: the launch is replaced.
    launch_names = {
        id(n.func.value)
        for n in ast.walk(module.tree)
        if _launched(n) and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    kept: dict[int, ast.stmt] = {id(module.function): module.function}
    used: set[str] = set()
    pending: list[ast.AST] = [module.function]
    while pending:
        for node in ast.walk(pending.pop()):
            if not isinstance(node, ast.Name) or node.id in used or id(node) in launch_names:
                continue
            used.add(node.id)
            defined = top.get(node.id)
            if defined is None or node.id in kernels or id(defined) in kept:
                continue
            kept[id(defined)] = defined
            if not isinstance(defined, ast.Import | ast.ImportFrom):
                pending.append(defined)
    imports = [
        _import_of(module, s, used)
        for s in module.tree.body
        if id(s) in kept and isinstance(s, ast.Import | ast.ImportFrom)
    ]
    code = [
        s
        for s in module.tree.body
        if id(s) in kept and not isinstance(s, ast.Import | ast.ImportFrom)
    ]
    launched = sorted(
        {n.id for s in code for n in ast.walk(s) if isinstance(n, ast.Name) and n.id in kernels}
    )
    for statement in code:
        _refuse_kernel_values(module, statement, kernels)
    missing = sorted(
        name
        for name in used
        if name not in top and not hasattr(builtins, name) and not _is_local(module, name)
    )
    if missing:
        raise OpSourceError(
            f"{module.path}: the host code reads {', '.join(missing)}, defined where this "
            "reader does not look (inside a module-level if/try)"
        )
    lines = _rewritten(source.splitlines(), code, module.function)
    body: list[str] = []
    previous: ast.stmt | None = None
    for statement in code:
        first = min([statement.lineno, *(d.lineno for d in _decorators(statement))])
        assert statement.end_lineno is not None
        if previous is not None and _follows(module, previous, statement):
            assert previous.end_lineno is not None
            body += lines[previous.end_lineno : first - 1]  # what separates them in the source
        elif previous is not None:
            body += ["", ""]
        body += lines[first - 1 : statement.end_lineno]
        previous = statement
    return HostCode(imports=imports, body="\n".join(body), kernels=launched)


def _follows(module: OpModule, before: ast.stmt, after: ast.stmt) -> bool:
    """Whether `after` is the module-level statement right after `before`."""
    index = module.tree.body.index(before)
    return index + 1 < len(module.tree.body) and module.tree.body[index + 1] is after


def _decorators(node: ast.stmt) -> list[ast.expr]:
    return node.decorator_list if isinstance(node, ast.FunctionDef | ast.ClassDef) else []


def _is_local(module: OpModule, name: str) -> bool:
    """Whether `name` is bound inside a function or class (a local, a parameter)."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name) == name:
            return True
        if isinstance(node, ast.ExceptHandler) and node.name == name:
            return True
    return False


def _rewritten(lines: list[str], code: list[ast.stmt], registered: ast.FunctionDef) -> list[str]:
    """`lines` with each `ct.launch` of the code calling LAUNCH and the registration
    made for the cutile-rs backend (edits by source position: the rest stays as is)."""
    edits: list[tuple[int, int, int, str]] = []  # line, start column, end column, text
    for statement in code:
        for node in ast.walk(statement):
            if _launched(node) and isinstance(node, ast.Call):
                func = node.func
                assert func.end_col_offset is not None
                edits.append((func.lineno, func.col_offset, func.end_col_offset, LAUNCH))
    for decorator in registered.decorator_list:
        for node in ast.walk(decorator):
            if isinstance(node, ast.keyword) and node.arg == "backend":
                value = node.value
                assert value.end_col_offset is not None
                edits.append((value.lineno, value.col_offset, value.end_col_offset, '"cutile-rs"'))
    out = list(lines)
    for line, start, end, text in sorted(edits, reverse=True):
        # Columns are UTF-8 byte offsets.
        raw = out[line - 1].encode()
        out[line - 1] = (raw[:start] + text.encode() + raw[end:]).decode()
    return out
