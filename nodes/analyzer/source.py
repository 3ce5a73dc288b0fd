"""What the kernel's Python source says, read from its syntax tree (nothing is
imported or run): the kernel's parameters, the cuTile operations it and its
helpers call, padding modes, dtype conversions, bounds checking and the
branches whose condition only constants decide.

This is the part of the analysis the Tile IR cannot give: one reference export
shows one dtype and one set of constants, while the source says what must hold
for every configuration (a conversion to float32 whatever the input dtype, a
bounds check the dumped shape happened not to need).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from nodes.analyzer.branches import (
    ConstantBranch,
    collect_branches,
    derived_constants,
    module_literals,
)

MEMORY_ACCESS_CALLS = frozenset(
    {
        "load",
        "store",
        "gather",
        "scatter",
        "atomic_add",
        "atomic_and",
        "atomic_cas",
        "atomic_max",
        "atomic_min",
        "atomic_or",
        "atomic_xchg",
        "atomic_xor",
        "load_advanced_indexing",
        "store_advanced_indexing",
    }
)


class SourceError(ValueError):
    """The source cannot be read as the spec says; `line` locates it when known."""

    def __init__(self, message: str, line: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.field = field


@dataclass(frozen=True)
class Conversion:
    """A `ct.astype(value, dtype)` in the source."""

    value: str
    target: str
    line: int


@dataclass
class KernelSource:
    path: Path
    kernel: str
    line: int
    parameters: list[str]
    constant_parameters: list[str]
    cutile_modules: frozenset[str] = frozenset()
    """The names the module binds cuda.tile to (`ct`)."""
    calls: set[str] = field(default_factory=set)
    padding_modes: set[str] = field(default_factory=set)
    conversions: list[Conversion] = field(default_factory=list)
    unchecked_access_lines: list[int] = field(default_factory=list)
    checked_access_lines: list[int] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    branches: list[ConstantBranch] = field(default_factory=list)
    derived: dict[str, str] = field(default_factory=dict)
    """Locals computed from constants alone, as spec expressions (`derived_constants`)."""

    @property
    def check_bounds(self) -> bool:
        """Whether some memory access checks its bounds (cuTile's default)."""
        return bool(self.checked_access_lines)

    def where(self, line: int) -> str:
        return f"{self.path.name}:{line}"


def read_kernel_source(path: Path, kernel: str) -> KernelSource:
    """Parse `path` and describe `kernel`; SourceError names what is wrong and where."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(
            f"cannot read {path.name}: {exc.strerror or exc}", field="source"
        ) from None
    try:
        module = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise SourceError(f"syntax error: {exc.msg}", line=exc.lineno) from None
    functions = {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}
    if kernel not in functions:
        known = sorted(functions)
        raise SourceError(
            f"{path.name} defines no function {kernel!r} (has {known})", field="kernel"
        )
    aliases = _CuTileNames.of(module)
    definition = functions[kernel]
    described = KernelSource(
        path=path,
        kernel=kernel,
        line=definition.lineno,
        parameters=[arg.arg for arg in definition.args.args],
        constant_parameters=[
            arg.arg for arg in definition.args.args if aliases.is_constant(arg.annotation)
        ],
        cutile_modules=aliases.modules,
    )
    for function in _kernel_and_helpers(definition, functions):
        _OpCollector(described, aliases).visit(function)
        if function is not definition:
            described.helpers.append(function.name)
    described.branches = collect_branches(
        definition,
        constants=set(described.constant_parameters),
        arrays=set(described.parameters) - set(described.constant_parameters),
        cutile_modules=aliases.modules,
        module_values=module_literals(module),
    )
    described.derived = derived_constants(
        definition,
        constants=set(described.constant_parameters),
        cutile_modules=aliases.modules,
        module_values=module_literals(module),
    )
    return described


@dataclass(frozen=True)
class _CuTileNames:
    """How the module refers to cuda.tile: `import cuda.tile as ct` gives `ct`;
    `from cuda.tile import load` gives a direct name; `ConstInt = ct.Constant[int]`
    a constant annotation of its own."""

    modules: frozenset[str]
    direct: dict[str, str]
    constant_aliases: frozenset[str] = frozenset()

    @classmethod
    def of(cls, module: ast.Module) -> _CuTileNames:
        modules: set[str] = set()
        direct: dict[str, str] = {}
        for node in module.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "cuda.tile" and alias.asname:
                        modules.add(alias.asname)
            elif isinstance(node, ast.ImportFrom) and node.module in ("cuda", "cuda.tile"):
                for alias in node.names:
                    local = alias.asname or alias.name
                    if node.module == "cuda" and alias.name == "tile":
                        modules.add(local)
                    elif node.module == "cuda.tile":
                        direct[local] = alias.name
        names = cls(frozenset(modules), direct)
        aliases = {
            target.id
            for node in module.body
            if isinstance(node, ast.Assign) and names.is_constant(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        return cls(frozenset(modules), direct, frozenset(aliases))

    def api_name(self, node: ast.expr) -> str | None:
        """`ct.load` or a directly imported `load` -> "load"."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.attr if node.value.id in self.modules else None
        if isinstance(node, ast.Name):
            return self.direct.get(node.id)
        return None

    def is_constant(self, annotation: ast.expr | None) -> bool:
        if isinstance(annotation, ast.Name) and annotation.id in self.constant_aliases:
            return True
        return isinstance(annotation, ast.Subscript) and self.api_name(annotation.value) == (
            "Constant"
        )


def _kernel_and_helpers(
    kernel: ast.FunctionDef, functions: dict[str, ast.FunctionDef]
) -> list[ast.FunctionDef]:
    """The kernel and every module-level function it calls, transitively."""
    found: list[ast.FunctionDef] = []
    pending = [kernel]
    while pending:
        function = pending.pop()
        if function in found:
            continue
        found.append(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = functions.get(node.func.id)
                if callee is not None and callee not in found:
                    pending.append(callee)
    return found


class _OpCollector(ast.NodeVisitor):
    def __init__(self, into: KernelSource, names: _CuTileNames) -> None:
        self.into = into
        self.names = names

    def visit_Call(self, node: ast.Call) -> None:
        name = self.names.api_name(node.func)
        if name is not None:
            self.into.calls.add(name)
            self._padding(node)
            self._bounds(name, node)
            if name == "astype" and len(node.args) == 2:
                self._conversion(node)
        self.generic_visit(node)

    def _padding(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg == "padding_mode" and isinstance(keyword.value, ast.Attribute):
                self.into.padding_modes.add(keyword.value.attr.lower())
            elif keyword.arg == "padding_value":
                self.into.padding_modes.add(f"value {ast.unparse(keyword.value)}")

    def _bounds(self, name: str, node: ast.Call) -> None:
        if name not in MEMORY_ACCESS_CALLS:
            return
        unchecked = any(
            keyword.arg == "check_bounds"
            and isinstance(keyword.value, ast.Constant)
            and keyword.value.value is False
            for keyword in node.keywords
        )
        lines = self.into.unchecked_access_lines if unchecked else self.into.checked_access_lines
        lines.append(node.lineno)

    def _conversion(self, node: ast.Call) -> None:
        value, target = node.args
        dtype = self.names.api_name(target)
        self.into.conversions.append(
            Conversion(
                value=ast.unparse(value),
                target=dtype if dtype is not None else ast.unparse(target),
                line=node.lineno,
            )
        )
