"""What the host builder needs to know about a cutile-rs kernel source.

From the text of a `kernel.rs` it reads the `#[cutile::module]` module, each
`#[cutile::entry]` function's generic parameters and parameters, and every
`assume_div_by::<_, K>(...)` (or the kernel writer's `divisible::<_, K>(...)`)
the kernel states about an entry parameter. The launcher must honour those
statements: a literal K is a precondition the caller's arguments must meet; a
const generic K is a launch fact the launcher derives from the arguments, as a
cuTile launch would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


class RustSourceError(ValueError):
    """The kernel source does not have the shape the host builder can bind."""


@dataclass(frozen=True)
class GenericParam:
    name: str
    kind: str  # "type" or "const"
    const_type: str | None = None


@dataclass(frozen=True)
class EntryParam:
    name: str
    rust_type: str

    @property
    def pointee(self) -> str | None:
        """The element type of a raw pointer parameter (`*mut T` / `*const T`)."""
        match = re.fullmatch(r"\*\s*(?:mut|const)\s+(\w+(?:::\w+)*)", self.rust_type)
        return match.group(1) if match else None


@dataclass(frozen=True)
class Assumption:
    """`assume_div_by::<_, divisor>(...)` applied to entry parameter `param`."""

    param: str
    divisor: str  # an integer literal or a const generic's name

    @property
    def literal(self) -> int | None:
        return int(self.divisor) if self.divisor.isdigit() else None


@dataclass(frozen=True)
class ColumnAssumption:
    """`assume_div_by::<_, divisor>(...)` applied to a value read from column `column`
    of the table of list parameter `param` (0: the address, then shapes, then strides)."""

    param: str
    column: int
    divisor: str

    @property
    def literal(self) -> int | None:
        return int(self.divisor) if self.divisor.isdigit() else None


@dataclass(frozen=True)
class TableReads:
    """What the kernel states about the columns of its list tables."""

    assumptions: tuple[ColumnAssumption, ...] = ()
    element_pointees: tuple[tuple[str, str], ...] = ()  # (table parameter, element type)

    def pointees(self, table: str) -> set[str]:
        """The element types `int_to_ptr` gives the addresses read from `table`."""
        return {pointee for param, pointee in self.element_pointees if param == table}


@dataclass(frozen=True)
class RustEntry:
    name: str
    generics: tuple[GenericParam, ...]
    params: tuple[EntryParam, ...]
    assumptions: tuple[Assumption, ...] = field(default=())
    body: str = field(default="", repr=False, compare=False)

    def table_reads(self, tables: set[str]) -> TableReads:
        """What the body states about the columns of the list tables `tables` (names
        of table parameters)."""
        return table_reads(self.body, tables)

    def param(self, name: str) -> EntryParam:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)

    def generic(self, name: str) -> GenericParam | None:
        return next((g for g in self.generics if g.name == name), None)


@dataclass(frozen=True)
class RustKernelModule:
    path: Path
    module: str
    entries: tuple[RustEntry, ...]

    def entry(self, name: str) -> RustEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        known = ", ".join(e.name for e in self.entries) or "none"
        raise RustSourceError(f"{self.path.name}: no #[cutile::entry] fn {name} (has {known})")


_MODULE = re.compile(r"#\[cutile::module[^\]]*\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)")
_ENTRY = re.compile(
    r"#\[cutile::entry[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?"
    r"(?:unsafe\s+)?fn\s+(\w+)\s*"
)
_ASSUME = re.compile(r"(?:assume_div_by|divisible)\s*::\s*<\s*_\s*,\s*(\w+)\s*>\s*\(")
_WRAPPERS = re.compile(
    r"(?:pointer_to_tile|assume_bounds_lower\s*::\s*<[^>]*>|assume_bounds\s*::\s*<[^>]*>)\s*\("
)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def _balanced(text: str, start: int, open_char: str, close_char: str) -> tuple[str, int]:
    """The text between the bracket at `start` and its match, and the index after it."""
    if text[start] != open_char:
        raise RustSourceError(f"expected {open_char!r} at offset {start}")
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == open_char:
            depth += 1
        elif char == close_char:
            depth -= 1
            if depth == 0:
                return text[start + 1 : index], index + 1
    raise RustSourceError(f"unbalanced {open_char!r} from offset {start}")


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside (), [], {}, <> (ignoring `->`)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    previous = ""
    for char in text:
        if char in "([{" or (char == "<"):
            depth += 1
        elif char in ")]}" or (char == ">" and previous != "-"):
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        previous = char
    tail = "".join(current).strip()
    if tail:
        parts.append(tail)
    return parts


def _parse_generics(text: str) -> tuple[GenericParam, ...]:
    generics: list[GenericParam] = []
    for item in _split_top_level(text):
        const = re.fullmatch(r"const\s+(\w+)\s*:\s*(.+)", item, flags=re.DOTALL)
        if const:
            generics.append(GenericParam(const.group(1), "const", const.group(2).strip()))
            continue
        plain = re.fullmatch(r"(\w+)\s*(?::.*)?", item, flags=re.DOTALL)
        if not plain:
            raise RustSourceError(f"cannot read generic parameter {item!r}")
        generics.append(GenericParam(plain.group(1), "type"))
    return tuple(generics)


def _parse_params(text: str) -> tuple[EntryParam, ...]:
    params: list[EntryParam] = []
    for item in _split_top_level(text):
        match = re.fullmatch(r"(?:mut\s+)?(\w+)\s*:\s*(.+)", item, flags=re.DOTALL)
        if not match:
            raise RustSourceError(f"cannot read entry parameter {item!r}")
        params.append(EntryParam(match.group(1), " ".join(match.group(2).split())))
    return tuple(params)


def _assumptions(body: str, param_names: set[str]) -> tuple[Assumption, ...]:
    """Every `assume_div_by::<_, K>(p)` whose argument is an entry parameter `p`,
    possibly wrapped in `pointer_to_tile(...)` or `assume_bounds_lower::<_, n>(...)`."""
    found: list[Assumption] = []
    for match in _ASSUME.finditer(body):
        rest = body[match.end() :]
        while True:
            wrapper = _WRAPPERS.match(rest.lstrip())
            if not wrapper:
                break
            rest = rest.lstrip()[wrapper.end() :]
        name = re.match(r"\s*(\w+)\s*\)", rest)
        if name and name.group(1) in param_names:
            found.append(Assumption(param=name.group(1), divisor=match.group(1)))
    return tuple(dict.fromkeys(found))


# -- values read from a list's table --------------------------------------------------

_LET = re.compile(r"\blet\s+(?:mut\s+)?(\w+|\([^)]*\))\s*")
_CALL = re.compile(r"(\w+)\s*(?:::\s*<([^()]*)>)?\s*\(")
_METHOD = re.compile(r"(\w+)\s*\.\s*(\w+)\s*(?:::\s*<[^()]*>)?\s*\(")
_INT = re.compile(r"(\d+)(?:i32|i64|u32|u64|usize)?")
_CONSTANT = re.compile(r"constant\s*\(\s*(\d+)(?:i32|i64)?\s*,")
_POINTER_TILE = re.compile(r"PointerTile\s*<\s*\*\s*(?:mut|const)\s+(\w+(?:::\w+)*)")
# Ops that keep what a value is: a view of the table stays the table, a column
# reshaped, narrowed, cast to a pointer or assumed about stays that column.
_TABLE_OPS = frozenset(
    {"pointer_to_tile", "make_tensor_view", "make_partition_view", "load_view_raw",
     "load_view_tko", "assume_div_by", "divisible", "assume_bounds_lower", "assume_bounds"}
)  # fmt: skip
_COLUMN_OPS = frozenset(
    {"reshape", "int_to_ptr", "tile_to_scalar", "scalar_to_tile", "assume_div_by",
     "divisible", "assume_bounds_lower", "assume_bounds"}
)  # fmt: skip
_ASSUMING = frozenset({"assume_div_by", "divisible"})


@dataclass(frozen=True)
class _Origin:
    """A local that is a list's table (or a view or rows of it), or one of its columns."""

    table: str
    column: int | None = None


@dataclass(frozen=True)
class _Let:
    names: list[str]
    type_text: str
    expression: str


def _end_of(text: str, start: int, stops: str) -> int:
    """The index of the first character of `stops` at bracket depth 0 from `start`
    (an `=` that is part of `==`, `=>`, `<=`, `>=` or `!=` does not count)."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if depth == 0 and char in stops:
            around = text[index - 1 : index + 2]
            if char != "=" or not re.search(r"[=<>!]=|=[=>]", around):
                return index
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return len(text)


def _lets(body: str) -> list[_Let]:
    """Every `let` statement of a body, in text order: its names, type and value."""
    found: list[_Let] = []
    for match in _LET.finditer(body):
        equals = _end_of(body, match.end(), "=;")
        if equals >= len(body) or body[equals] != "=":
            continue
        type_text = body[match.end() : equals].strip().removeprefix(":").strip()
        end = _end_of(body, equals + 1, ";")
        names = re.findall(r"\w+", match.group(1))
        found.append(_Let(names, type_text, body[equals + 1 : end].strip()))
    return found


def _index_value(text: str, constants: dict[str, int]) -> int | None:
    text = text.strip()
    literal = _INT.fullmatch(text)
    if literal:
        return int(literal.group(1))
    return constants.get(text)


class _TableTracer:
    """Follows `let` statements in order (a shadowing `let` replaces the name), from
    each list table parameter to the columns the kernel reads."""

    def __init__(self, tables: set[str]) -> None:
        self.origins: dict[str, _Origin] = {name: _Origin(name) for name in tables}
        self.constants: dict[str, int] = {}
        self.assumptions: list[ColumnAssumption] = []
        self.pointees: list[tuple[str, str]] = []

    def statement(self, let: _Let) -> None:
        constant = _CONSTANT.match(let.expression)
        origin = self._origin(let)
        for name in let.names:
            self.origins.pop(name, None)
            self.constants.pop(name, None)
        if constant and len(let.names) == 1:
            self.constants[let.names[0]] = int(constant.group(1))
        if origin is not None:
            self.origins[let.names[0]] = origin

    def _operand(self, arguments: str) -> _Origin | None:
        first = arguments[: _end_of(arguments, 0, ",)")].strip().removeprefix("&").strip()
        return self.origins.get(first) if first.isidentifier() else None

    def _origin(self, let: _Let) -> _Origin | None:
        expression = let.expression
        if expression.isidentifier():
            return self.origins.get(expression)
        method = _METHOD.match(expression)
        if method and method.group(2) == "reshape":
            origin = self.origins.get(method.group(1))
            return origin if origin is not None and origin.column is not None else None
        call = _CALL.match(expression)
        if call is None:
            return None
        name, turbofish = call.group(1), call.group(2) or ""
        arguments = expression[call.end() :]
        origin = self._operand(arguments)
        if origin is None:
            return None
        if origin.column is None:
            if name == "extract":
                return self._column(origin, arguments)
            return origin if name in _TABLE_OPS else None
        if name not in _COLUMN_OPS and not name.startswith("trunci"):
            return None
        self._note(origin, name, turbofish, let.type_text)
        return origin

    def _column(self, table: _Origin, arguments: str) -> _Origin | None:
        indices = re.search(r"\[([^\[\]]*)\]", arguments)
        if indices is None:
            return None
        column = _index_value(indices.group(1).split(",")[-1], self.constants)
        return None if column is None else _Origin(table.table, column)

    def _note(self, origin: _Origin, name: str, turbofish: str, type_text: str) -> None:
        assert origin.column is not None
        if name in _ASSUMING:
            divisor = turbofish.split(",")[-1].strip()
            if divisor.isidentifier() or divisor.isdigit():
                self.assumptions.append(ColumnAssumption(origin.table, origin.column, divisor))
        pointer = _POINTER_TILE.match(type_text)
        if name == "int_to_ptr" and pointer is not None:
            self.pointees.append((origin.table, pointer.group(1)))


def table_reads(body: str, tables: set[str]) -> TableReads:
    """What the entry `body` states about the columns of the tables `tables` (the names
    of its list table parameters)."""
    if not tables:
        return TableReads()
    tracer = _TableTracer(tables)
    for let in _lets(body):
        tracer.statement(let)
    return TableReads(
        assumptions=tuple(dict.fromkeys(tracer.assumptions)),
        element_pointees=tuple(dict.fromkeys(tracer.pointees)),
    )


def _parse_entry(text: str, match: re.Match[str]) -> RustEntry:
    position = match.end()
    generics: tuple[GenericParam, ...] = ()
    if text[position] == "<":
        inner, position = _balanced(text, position, "<", ">")
        generics = _parse_generics(inner)
    position = text.index("(", position)
    param_text, position = _balanced(text, position, "(", ")")
    params = _parse_params(param_text)
    body, _ = _balanced(text, text.index("{", position), "{", "}")
    return RustEntry(
        name=match.group(1),
        generics=generics,
        params=params,
        assumptions=_assumptions(body, {p.name for p in params}),
        body=body,
    )


def parse_kernel_source(path: Path) -> RustKernelModule:
    """Read a cutile-rs kernel file: its module and entries."""
    try:
        text = _strip_comments(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RustSourceError(f"cannot read {path}: {exc.strerror}") from None
    modules = _MODULE.findall(text)
    if len(modules) != 1:
        raise RustSourceError(f"{path.name}: expected one #[cutile::module], found {len(modules)}")
    entries = tuple(_parse_entry(text, match) for match in _ENTRY.finditer(text))
    if not entries:
        raise RustSourceError(f"{path.name}: no #[cutile::entry] function")
    return RustKernelModule(path=path, module=modules[0], entries=entries)
