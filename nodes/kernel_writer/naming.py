"""Names for the Rust port, taken from the Python source where possible.

The reference export keeps source locations (`tileirdisasm -g`), so each op
knows the Python line it came from. The kernel's AST says which variable a
line assigns: the last value computed on an assignment's lines takes the
variable's name, `for k in range(...)` names the induction variable `k`, and
the kernel's parameters name the entry arguments. Everything else is named
after what its op computes. Names are made unique per function.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

RUST_KEYWORDS = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "crate",
        "else",
        "enum",
        "extern",
        "false",
        "fn",
        "for",
        "if",
        "impl",
        "in",
        "let",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "pub",
        "ref",
        "return",
        "self",
        "Self",
        "static",
        "struct",
        "super",
        "trait",
        "true",
        "type",
        "unsafe",
        "use",
        "where",
        "while",
        "async",
        "await",
        "dyn",
        "abstract",
        "become",
        "box",
        "do",
        "final",
        "macro",
        "override",
        "priv",
        "typeof",
        "unsized",
        "virtual",
        "yield",
        "try",
        "gen",
        "union",
    }
)
# Names the generated code uses for its own items, and the functions it calls:
# a local variable of the same name would shadow the function.
RESERVED = frozenset(
    {
        "token",
        "E",
        "exp",
        "exp2",
        "log",
        "log2",
        "rsqrt",
        "sqrt",
        "tanh",
        "negf",
        "absf",
        "fma",
        "select",
        "iota",
        "mmaf",
        "cmpi",
        "cmpf",
        "exti",
        "trunci",
        "itof",
        "ftof",
        "permute",
        "extract",
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "reduce_prod",
        "scan_sum",
        "maxf",
        "minf",
        "maxi",
        "mini",
        "max",
        "min",
        "addf",
        "subf",
        "mulf",
        "divf",
        "addi",
        "subi",
        "muli",
        "divi",
        "shli",
        "constant",
        "join_tokens",
        "int_to_ptr",
        "addptr_tile",
        "load_view_raw",
        "store_view_raw",
        "load_ptr_tko",
        "store_ptr_tko",
        "atomic_rmw_tko",
        "make_tensor_view",
        "make_partition_view",
        "get_index_space_shape",
        "pointer_to_tile",
        "tile_to_scalar",
        "scalar_to_tile",
        "convert_tile",
        "divisible",
        "generic_value",
        "tile_block_id",
        "num_tile_blocks",
        "shape",
        "sin",
        "cos",
        "floor",
        "ceil",
        "new_token_unordered",
    }
)
_IDENT = re.compile(r"[^0-9A-Za-z_]+")
_LOCATION_LINE = re.compile(r":(\d+):\d+$")


@dataclass
class Statement:
    first_line: int
    last_line: int
    targets: list[str]
    text: str


@dataclass
class SourceNames:
    """What the kernel's Python source says about names."""

    params: list[str] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    loop_vars: dict[int, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def statement_at(self, line: int) -> Statement | None:
        best: Statement | None = None
        for statement in self.statements:
            if statement.first_line <= line <= statement.last_line and (
                best is None or statement.first_line >= best.first_line
            ):
                best = statement
        return best


def location_line(location: str | None) -> int | None:
    if not location:
        return None
    found = _LOCATION_LINE.search(location)
    return int(found.group(1)) if found else None


def _targets(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [name for element in node.elts for name in _targets(element)]
    return []


class _Collector(ast.NodeVisitor):
    def __init__(self, names: SourceNames, lines: list[str]) -> None:
        self.names = names
        self.lines = lines

    def _statement(self, node: ast.stmt, targets: list[str]) -> None:
        last = node.end_lineno or node.lineno
        text = " ".join(line.strip() for line in self.lines[node.lineno - 1 : last])
        self.names.statements.append(Statement(node.lineno, last, targets, text))

    def visit_Assign(self, node: ast.Assign) -> None:
        self._statement(node, [n for target in node.targets for n in _targets(target)])

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._statement(node, _targets(node.target))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._statement(node, _targets(node.target))

    def visit_Expr(self, node: ast.Expr) -> None:
        self._statement(node, [])

    def visit_For(self, node: ast.For) -> None:
        targets = _targets(node.target)
        if len(targets) == 1:
            self.names.loop_vars[node.lineno] = targets[0]
        self.generic_visit(node)


def read_source(source: Path, kernel: str) -> SourceNames:
    """Parameter, assignment and loop-variable names of `kernel` in `source`.
    A source that cannot be read or parsed gives no names (IR names are used)."""
    try:
        text = source.read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return SourceNames()
    lines = text.splitlines()
    names = SourceNames(lines=lines)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            names.params = [arg.arg for arg in node.args.args]
            _Collector(names, lines).visit(node)
    return names


def snake(name: str) -> str:
    """A Rust-friendly snake_case identifier for `name`."""
    text = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    text = _IDENT.sub("_", text).strip("_") or "v"
    if text[0].isdigit():
        text = "v_" + text
    if text in RUST_KEYWORDS:
        text += "_"
    return text


class NameAllocator:
    """Unique identifiers within one Rust function."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.used: set[str] = set(RESERVED) | set(taken or ())

    def fresh(self, base: str) -> str:
        stem = snake(base)
        if stem not in self.used:
            self.used.add(stem)
            return stem
        index = 1
        while f"{stem}_{index}" in self.used:
            index += 1
        name = f"{stem}_{index}"
        self.used.add(name)
        return name

    def reserve(self, name: str) -> str:
        self.used.add(name)
        return name
