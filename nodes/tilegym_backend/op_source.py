"""An op of TileGym's cutile backend, read from its unmodified source as syntax.

`find_op` maps an op name to the module(s) under `ops/cutile/` that register it
with `@register_impl("<op>", backend="cutile")`. `host_launch` reads how the
registered function reaches `ct.launch` of one kernel: which of the op's tensors,
through which reshapes and allocations, become the kernel's arrays, and what the
op returns. Nothing is imported: TileGym needs torch and a GPU to import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

CUTILE_OPS = Path("tilegym/ops/cutile")

# Calls a traced host statement may make: views and copies of tensors, and new
# tensors shaped like them. Anything else is host logic this generator does not
# restate, and the op is refused with the statement's line.
_TENSOR_METHODS = frozenset({"reshape", "view", "contiguous", "flatten", "numel", "size"})
_TORCH_ALLOCATORS = frozenset({"empty_like", "zeros_like", "empty", "zeros"})
_TENSOR_ATTRIBUTES = frozenset({"shape", "device", "dtype"})


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
class HostLaunch:
    """How the op's registered function launches one kernel."""

    kernel: str
    arguments: dict[str, str]  # kernel parameter -> the host expression passed
    statements: list[str]  # the host statements the arrays and the result need, in order
    result: str  # the expression the op returns
    roots: dict[str, str]  # kernel array -> the op parameter it is derived from


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


def _is_launch_of(node: ast.AST, kernel: str) -> TypeGuard[ast.Call]:
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "ct.launch"
        and len(node.args) == 4
        and isinstance(node.args[2], ast.Name)
        and node.args[2].id == kernel
    )


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]


def _caller_arguments(module: OpModule, launcher: ast.FunctionDef) -> dict[str, str]:
    """The launcher's parameters as the op's own: the launcher itself, or the
    `forward` of an autograd Function the op calls as `Cls.apply(...)`."""
    if launcher is module.function:
        return {p: p for p in module.parameters}
    for node in ast.walk(module.function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "apply"
            and launcher.name == "forward"
        ):
            params = [a.arg for a in launcher.args.args][1:]  # after ctx
            given = [ast.unparse(a) for a in node.args]
            if len(given) == len(params) and all(g in module.parameters for g in given):
                return dict(zip(params, given, strict=True))
    raise OpSourceError(
        f"{module.path}: {launcher.name} (line {launcher.lineno}) launches the kernel, "
        f"but the registered {module.function.name} does not call it with its own tensors"
    )


class _Tracer(ast.NodeVisitor):
    """Collects the names an expression reads, refusing calls outside the allowed set."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if ast.unparse(node.value) == "torch":
            return  # torch.float32 and the like
        if node.attr not in _TENSOR_ATTRIBUTES | _TENSOR_METHODS:
            raise self._refuse(node)
        self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and ast.unparse(func.value) == "torch":
            if func.attr not in _TORCH_ALLOCATORS:
                raise self._refuse(node)
        elif not (isinstance(func, ast.Attribute) and func.attr in _TENSOR_METHODS):
            raise self._refuse(node)
        self.visit(func)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            self.visit(arg)

    def _refuse(self, node: ast.AST) -> OpSourceError:
        return OpSourceError(
            f"{self.path}:{getattr(node, 'lineno', '?')}: `{ast.unparse(node)}` is host logic "
            "the wrapper generator does not restate (it restates reshapes, views and "
            "allocations of the op's tensors)"
        )


def host_launch(
    module: OpModule, kernel: str, parameters: list[str], arrays: set[str]
) -> HostLaunch:
    """Where the op launches `kernel` with `parameters` (the kernel's, in order), and
    how the host derives the `arrays` among them (constants and scalars are the FFI's)."""
    # Each launch with its innermost enclosing function (walked outermost first).
    by_call: dict[int, tuple[ast.FunctionDef, ast.Call]] = {}
    for function in _functions(module.tree):
        for node in ast.walk(function):
            if _is_launch_of(node, kernel):
                by_call[id(node)] = (function, node)
    sites = list(by_call.values())
    if len(sites) != 1:
        raise OpSourceError(
            f"{module.path}: {len(sites)} ct.launch calls of {kernel}; the wrapper is "
            "generated for an op that launches its kernel from one place"
        )
    launcher, call = sites[0]
    packed = call.args[3]
    if not isinstance(packed, ast.Tuple) or len(packed.elts) != len(parameters):
        raise OpSourceError(
            f"{module.path}:{call.lineno}: the launch does not pass {kernel}'s "
            f"{len(parameters)} arguments as one tuple"
        )
    caller = _caller_arguments(module, launcher)
    assignments = {
        target.id: stmt
        for stmt in ast.walk(launcher)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
        for target in stmt.targets
        if isinstance(target, ast.Name)
    }
    result = next(
        (s.value for s in ast.walk(launcher) if isinstance(s, ast.Return) and s.value), None
    )
    if result is None:
        raise OpSourceError(f"{module.path}: {launcher.name} returns nothing")

    needed: dict[int, ast.Assign] = {}
    roots: dict[str, set[str]] = {}

    def trace(name: str, seen: frozenset[str]) -> set[str]:
        """The launcher parameters `name` derives from, collecting the statements."""
        if name in caller:
            return {name}
        statement = assignments.get(name)
        if statement is None or name in seen:
            return set()
        needed[statement.lineno] = statement
        tracer = _Tracer(module.path)
        tracer.visit(statement.value)
        found: set[str] = set()
        for read in sorted(tracer.names - {"torch"}):
            found |= trace(read, seen | {name})
        return found

    arguments = dict(zip(parameters, (ast.unparse(e) for e in packed.elts), strict=True))
    for param, element in zip(parameters, packed.elts, strict=True):
        if param in arrays and isinstance(element, ast.Name):
            roots[param] = trace(element.id, frozenset())
    result_tracer = _Tracer(module.path)
    result_tracer.visit(result)
    for read in result_tracer.names:
        trace(read, frozenset())

    def renamed(text: str) -> str:
        """Host text with the launcher's parameters named as the op names them."""
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in caller:
                node.id = caller[node.id]
        return ast.unparse(tree)

    return HostLaunch(
        kernel=kernel,
        arguments={p: renamed(a) for p, a in arguments.items()},
        statements=[renamed(ast.unparse(needed[line])) for line in sorted(needed)],
        result=renamed(ast.unparse(result)),
        roots={p: caller[min(r)] for p, r in roots.items() if r},
    )
