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
class RustEntry:
    name: str
    generics: tuple[GenericParam, ...]
    params: tuple[EntryParam, ...]
    assumptions: tuple[Assumption, ...] = field(default=())

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
