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
# Names a variable never takes, since it would shadow the function or item: every
# function of cutile::core (tests/kernel_writer/test_naming_reserved.py checks the
# pinned crate), then the names the generated module itself declares or uses.
CUTILE_CORE_FUNCTIONS = frozenset(
    {
        "absf",
        "absi",
        "addf",
        "addi",
        "addptr",
        "addptr_tile",
        "alloca",
        "andi",
        "as_ptr",
        "assume_bounds",
        "assume_bounds_lower",
        "assume_bounds_raw",
        "assume_bounds_upper",
        "assume_div_by",
        "assume_div_by_every_along",
        "assume_div_by_raw",
        "assume_same_elements_1d",
        "assume_same_elements_2d",
        "assume_same_elements_3d",
        "assume_same_elements_4d",
        "assume_same_elements_raw",
        "atan2",
        "atomic_add",
        "atomic_cas_tko",
        "atomic_red_view_raw",
        "atomic_rmw_tko",
        "bitcast",
        "broadcast",
        "broadcast_ptr",
        "broadcast_scalar",
        "cast_const",
        "cast_mut",
        "cast_tile_const",
        "cast_tile_mut",
        "cat",
        "ceil",
        "ceil_div",
        "check_bounded_partition_access",
        "check_bounded_partition_access3",
        "check_bounded_partition_access_mut",
        "check_bounded_partition_access_mut3",
        "check_partition_access",
        "check_partition_access_mut",
        "cmpf",
        "cmpi",
        "components",
        "constant",
        "convert_scalar",
        "convert_tile",
        "coord",
        "coord2_as_array",
        "coord3_as_array",
        "coords",
        "cos",
        "cosh",
        "dim_from_i32",
        "dim_new",
        "dim_value",
        "divf",
        "divi",
        "eq_tile",
        "exp",
        "exp2",
        "exp_with_rounding",
        "exti",
        "extract",
        "floor",
        "fma",
        "fpowf",
        "fpowi",
        "ftof",
        "ftoi",
        "ftoi_saturating",
        "gdc_launch_dependents_tko",
        "gdc_wait_tko",
        "ge_tile",
        "get_global",
        "get_index_space_shape",
        "get_num_tile_blocks",
        "get_partition_token",
        "get_partition_token_mut",
        "get_shape_dim",
        "get_tensor_base",
        "get_tensor_shape",
        "get_tensor_shape_meta",
        "get_tensor_token",
        "get_tile_block_id",
        "gt_tile",
        "index",
        "insert",
        "int_to_ptr",
        "iota",
        "iter_indices",
        "iter_indices_with",
        "iter_indices_within",
        "iter_indices_within_with",
        "itof",
        "join_tokens",
        "le_tile",
        "load",
        "load_index",
        "load_pipelined",
        "load_ptr_tko",
        "load_tensor",
        "load_tile",
        "load_tile_like",
        "load_tile_mut",
        "load_view_raw",
        "load_view_tko",
        "load_view_tko_bounded",
        "load_view_tko_mut",
        "log",
        "log2",
        "lt_tile",
        "make_mapped_partition_view",
        "make_nested_partition_view_mut",
        "make_partition_view",
        "make_partition_view_mut",
        "make_tensor_view",
        "max",
        "max_tile",
        "maxf",
        "maxi",
        "memory_fence_alias_tko",
        "min",
        "min_tile",
        "minf",
        "mini",
        "mma",
        "mmaf",
        "mmaf_scaled",
        "mmaf_with_fast_acc",
        "mmai",
        "mulf",
        "mulhii",
        "muli",
        "ne_tile",
        "negf",
        "negi",
        "new",
        "new_token_unordered",
        "noti",
        "num_programs",
        "num_tiles",
        "offset",
        "offset_tile",
        "ori",
        "pack",
        "partition",
        "partition_full_mut",
        "partition_index_coords",
        "partition_mut",
        "partition_permuted",
        "partition_with_bounds",
        "partition_with_bounds3",
        "partition_with_bounds_mut",
        "partition_with_bounds_mut3",
        "permute",
        "permute_array",
        "pointer_to_tile",
        "pow",
        "print_tko",
        "program_id",
        "ptr_to_int",
        "ptr_to_ptr",
        "ptr_with_attr_none",
        "reduce",
        "reduce_max",
        "reduce_min",
        "reduce_prod",
        "reduce_sum",
        "remf",
        "remi",
        "reshape",
        "reshape_ptr",
        "rsqrt",
        "scalar_to_tile",
        "scan",
        "scan_sum",
        "select",
        "set_tensor_token",
        "set_token",
        "shape",
        "shli",
        "shri",
        "sin",
        "sinh",
        "sqrt",
        "store",
        "store_index",
        "store_ptr_tko",
        "store_tile",
        "store_unchecked",
        "store_view_raw",
        "store_view_tko_bounded",
        "store_view_tko_mapped_mut",
        "store_view_tko_mut",
        "subf",
        "subi",
        "swizzle_partition_index_2d",
        "tan",
        "tanh",
        "tanh_with_rounding",
        "tile_to_pointer",
        "tile_to_scalar",
        "token",
        "transpose",
        "true_div",
        "trunci",
        "unpack",
        "validate_partition_store",
        "value",
        "with_bounds",
        "xori",
    }
)
# Functions of cutile::core the generated code never calls (it reshapes and
# broadcasts by method): common words a source's variables keep as they are.
NEVER_CALLED = frozenset(
    {
        "broadcast",
        "components",
        "coord",
        "coords",
        "index",
        "insert",
        "load",
        "mma",
        "new",
        "num_programs",
        "num_tiles",
        "offset",
        "partition",
        "pow",
        "program_id",
        "reduce",
        "reshape",
        "scan",
        "store",
        "transpose",
        "value",
    }
)
RESERVED = (CUTILE_CORE_FUNCTIONS - NEVER_CALLED) | frozenset(
    {
        "E",
        "divisible",
        "generic_value",
        "loop_bound",
        "num_tile_blocks",
        "tile_block_id",
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
