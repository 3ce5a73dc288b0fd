"""A kernel library's Python sources read as syntax, never executed.

A source root is a directory on a Python path (TileGym's `src/`); a module is
named in it by its dotted name (`tilegym.ops.cutile.rms_norm`). For each module
this finds the top-level statements that bind each name and the free names a
statement reads, which is what slicing a kernel out of its module needs
(`toolchain.kernel_slice`), and the `@ct.kernel` functions with their `def`
lines, which is what a spec generator needs. Nothing here imports or runs the
user's code.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
BUILTIN_NAMES = frozenset(dir(builtins))


class SourceTreeError(ValueError):
    """A module or kernel cannot be found or read; `file` and `line` say where."""

    def __init__(self, message: str, file: Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line


def _bound_names(node: ast.AST) -> set[str]:
    """Names a top-level statement binds in its module's namespace."""
    match node:
        case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name) | ast.ClassDef(name=name):
            return {name}
        case ast.Import(names=aliases):
            return {a.asname or a.name.split(".")[0] for a in aliases}
        case ast.ImportFrom(names=aliases):
            return {a.asname or a.name for a in aliases if a.name != "*"}
    names: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            names.add(child.id)
        elif isinstance(child, ast.expr):
            names |= _stored_in(child)
        elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case | ast.withitem):
            names |= _bound_names(child)
        if isinstance(child, ast.ExceptHandler) and child.name:
            names.add(child.name)
    return names


def _stored_in(expr: ast.expr) -> set[str]:
    return {
        n.id
        for n in ast.walk(expr)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)
    }


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _function_locals(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    args = node.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    names = {a.arg for a in params}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            names.add(child.id)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
            child is not node
        ):
            names.add(child.name)
    globals_declared = {
        n for child in ast.walk(node) if isinstance(child, ast.Global) for n in child.names
    }
    return names - globals_declared


def free_names(statement: ast.stmt) -> set[str]:
    """Module-level names a top-level statement reads when it runs or when the function
    it defines is called (a function's own locals excluded, builtins too)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
        outer: set[str] = set()
        for decorator in statement.decorator_list:
            outer |= _loaded(decorator)
        for default in [*statement.args.defaults, *statement.args.kw_defaults]:
            if default is not None:
                outer |= _loaded(default)
        for arg in [*statement.args.posonlyargs, *statement.args.args, *statement.args.kwonlyargs]:
            if arg.annotation is not None:
                outer |= _loaded(arg.annotation)
        if statement.returns is not None:
            outer |= _loaded(statement.returns)
        inner = set().union(*(_loaded(s) for s in statement.body)) - _function_locals(statement)
        return (outer | inner) - BUILTIN_NAMES
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return set()
    return _loaded(statement) - _bound_names(statement) - BUILTIN_NAMES


@dataclass(frozen=True)
class KernelDef:
    """A `@ct.kernel` function as its source shows it."""

    name: str
    line: int = field(metadata={"doc": "The `def` line (decorators are above it)."})
    params: tuple[str, ...]
    annotations: dict[str, str]


@dataclass
class ModuleSource:
    """One module's file and syntax tree."""

    name: str
    path: Path
    is_package: bool
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @cached_property
    def binders(self) -> dict[str, list[int]]:
        """Each top-level name -> the indices of the statements that bind it, in order."""
        table: dict[str, list[int]] = {}
        for index, statement in enumerate(self.tree.body):
            for name in _bound_names(statement):
                table.setdefault(name, []).append(index)
        return table

    def absolute(self, module: str | None, level: int) -> str:
        """The absolute name of an import `from <level dots><module> import ...`."""
        if level == 0:
            return module or ""
        parts = self.package.split(".") if self.package else []
        if level - 1 > len(parts) or (level - 1 == len(parts) and not module):
            raise SourceTreeError(
                f"relative import beyond the top-level package in {self.name}", self.path
            )
        base = parts[: len(parts) - (level - 1)]
        return ".".join([*base, *([module] if module else [])])

    def function(self, name: str) -> ast.FunctionDef | None:
        for statement in self.tree.body:
            if isinstance(statement, ast.FunctionDef) and statement.name == name:
                return statement
        return None

    def kernels(self) -> list[KernelDef]:
        """Every top-level function decorated with `@ct.kernel` (or `kernel(...)`)."""
        found = []
        for statement in self.tree.body:
            if isinstance(statement, ast.FunctionDef) and any(
                _is_kernel_decorator(d) for d in statement.decorator_list
            ):
                found.append(_kernel_def(statement))
        return found


def _is_kernel_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    match target:
        case ast.Attribute(attr="kernel"):
            return True
        case ast.Name(id="kernel"):
            return True
    return False


def _kernel_def(node: ast.FunctionDef) -> KernelDef:
    args = [*node.args.posonlyargs, *node.args.args]
    return KernelDef(
        name=node.name,
        line=node.lineno,
        params=tuple(a.arg for a in args),
        annotations={a.arg: ast.unparse(a.annotation) for a in args if a.annotation is not None},
    )


class SourceTree:
    """The modules under one source root, parsed on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        if not self.root.is_dir():
            raise SourceTreeError(f"the source root {root} is not a directory")
        self._parsed: dict[str, ModuleSource] = {}

    def locate(self, module: str) -> tuple[Path, bool] | None:
        """The file of a dotted module name under the root and whether it is a package."""
        if not MODULE_NAME.match(module):
            return None
        base = self.root.joinpath(*module.split("."))
        if (base / "__init__.py").is_file():
            return base / "__init__.py", True
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py"), False
        if base.is_dir():  # a namespace package: a directory without __init__.py
            return base, True
        return None

    def has_module(self, module: str) -> bool:
        return self.locate(module) is not None

    def module(self, name: str) -> ModuleSource:
        if name in self._parsed:
            return self._parsed[name]
        located = self.locate(name)
        if located is None:
            raise SourceTreeError(f"no module {name!r} under the source root {self.root}")
        path, is_package = located
        if path.is_dir():
            tree = ast.Module(body=[], type_ignores=[])
        else:
            text = path.read_text(encoding="utf-8")
            try:
                tree = ast.parse(text, filename=str(path))
            except SyntaxError as exc:
                raise SourceTreeError(f"syntax error: {exc.msg}", path, exc.lineno) from None
        source = ModuleSource(name=name, path=path, is_package=is_package, tree=tree)
        self._parsed[name] = source
        return source

    def kernel(self, module: str, name: str) -> KernelDef | None:
        """The `@ct.kernel` function `name` of `module`; None when `name` is bound some
        other way (`k = ct.kernel(f)`), which only running it can tell; else an error."""
        source = self.module(module)
        kernels = source.kernels()
        for kernel in kernels:
            if kernel.name == name:
                return kernel
        listed = ", ".join(k.name for k in kernels) or "none"
        function = source.function(name)
        if function is not None:
            raise SourceTreeError(
                f"{name!r} is a function, not a @ct.kernel function (kernels in {module}: "
                f"{listed})",
                source.path,
                function.lineno,
            )
        if name in source.binders:
            return None
        raise SourceTreeError(
            f"no kernel {name!r} in {module} (its kernels: {listed})", source.path
        )

    def module_of(self, file: Path) -> str:
        """The dotted name of a file under the root."""
        resolved = file.resolve()
        if not resolved.is_relative_to(self.root):
            raise SourceTreeError(f"{file} is outside the source root {self.root}", file)
        relative = resolved.relative_to(self.root)
        parts = list(relative.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)


def _is_constant_annotation(
    tree: SourceTree, module: str, annotation: ast.expr, depth: int = 0
) -> bool:
    """Whether an annotation is `ct.Constant[...]`, directly or through a module alias."""
    if depth > 8:
        return False
    match annotation:
        case ast.Subscript(value=ast.Attribute(attr="Constant") | ast.Name(id="Constant")):
            return True
        case ast.Attribute(attr="Constant") | ast.Name(id="Constant"):
            return True
        case ast.Name(id=alias):
            source = tree.module(module)
            for index in source.binders.get(alias, []):
                statement = source.tree.body[index]
                value = getattr(statement, "value", None)
                if isinstance(statement, ast.Assign | ast.AnnAssign) and (
                    isinstance(value, ast.expr)
                    and _is_constant_annotation(tree, module, value, depth + 1)
                ):
                    return True
                if isinstance(statement, ast.ImportFrom):
                    target = source.absolute(statement.module, statement.level)
                    original = next(
                        (a.name for a in statement.names if (a.asname or a.name) == alias), alias
                    )
                    if tree.has_module(target):
                        name = ast.Name(id=original, ctx=ast.Load())
                        if _is_constant_annotation(tree, target, name, depth + 1):
                            return True
    return False


def constant_parameters(tree: SourceTree, module: str, kernel: str) -> dict[str, bool]:
    """Each parameter of a kernel -> whether it is a `ct.Constant` (compile-time) one."""
    function = tree.module(module).function(kernel)
    if function is None:
        raise SourceTreeError(f"no function {kernel!r} in {module}", tree.module(module).path)
    args = [*function.args.posonlyargs, *function.args.args]
    return {
        a.arg: a.annotation is not None and _is_constant_annotation(tree, module, a.annotation)
        for a in args
    }


def _imported(
    statement: ast.stmt, source: ModuleSource, tree: SourceTree
) -> Iterator[tuple[str, str | None, str]]:
    """(module, name or None for the whole module, bound alias) for each source-root
    module a top-level import statement reaches."""
    if isinstance(statement, ast.ImportFrom):
        target = source.absolute(statement.module, statement.level)
        for alias in statement.names:
            submodule = f"{target}.{alias.name}"
            if tree.has_module(submodule):
                yield submodule, None, alias.asname or alias.name
            elif tree.has_module(target):
                yield target, alias.name, alias.asname or alias.name
    elif isinstance(statement, ast.Import):
        for alias in statement.names:
            if tree.has_module(alias.name):
                yield alias.name, None, alias.asname or alias.name.split(".")[0]


def needed_files(tree: SourceTree, module: str, name: str) -> set[Path]:
    """The files of the modules that slicing `name` out of `module` reads, found
    statically: the statements binding each needed name, the names they read, and the
    modules their imports reach (an `import m` needs the attributes read off `m`)."""
    files: set[Path] = set()
    seen: set[tuple[str, str]] = set()
    pending = [(module, name)]
    while pending:
        current, wanted = pending.pop()
        if (current, wanted) in seen:
            continue
        seen.add((current, wanted))
        source = tree.module(current)
        files.add(source.path)
        for index in source.binders.get(wanted, []):
            statement = source.tree.body[index]
            pending += [(current, n) for n in free_names(statement)]
            for target, imported, alias in _imported(statement, source, tree):
                files.add(tree.module(target).path)
                if imported is not None:
                    pending.append((target, imported))
                    continue
                for user in (
                    source.tree.body[i] for names in source.binders.values() for i in names
                ):
                    for node in ast.walk(user):
                        if (
                            isinstance(node, ast.Attribute)
                            and isinstance(node.value, ast.Name)
                            and node.value.id == alias
                        ):
                            pending.append((target, node.attr))
    return {f for f in files if f.is_file()}
