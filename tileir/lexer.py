"""Tokens of `cuda_tile` MLIR text, as printed by `tileirdisasm` or by cutile-rs.

Type and attribute bodies in angle brackets (`tile<1x1024xf32>`,
`partition_view<tile=(1x1024), padding_value = neg_inf, ...>`, `<i32: 1>`,
`div_by<16>`) are kept whole as one token: the parser never needs to look
inside them, and the attribute functions parse them on demand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    VALUE = "value"  # %name, %1#0
    SYMBOL = "symbol"  # @name
    HASH = "hash"  # #loc3, #cuda_tile.x (alias or attribute name)
    STRING = "string"
    NUMBER = "number"  # 12, -3, 1.5e+00, 0xFF800000, inf, -inf, nan
    IDENT = "ident"  # load_view_tko, weak, f32
    ANGLE = "angle"  # tile<...>, <i32: 1>, div_by<16>, #cuda_tile.bounded<0, ?>
    LABEL = "label"  # ^bb0
    LOC = "loc"  # loc(#loc3), loc("f.py":4:0)
    ARROW = "arrow"  # ->
    PUNCT = "punct"  # ( ) [ ] { } , : = ?


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    line: int
    col: int

    def is_punct(self, text: str) -> bool:
        return self.kind is Kind.PUNCT and self.text == text


class IRSyntaxError(ValueError):
    """Text that is not `cuda_tile` MLIR as either printer writes it."""

    def __init__(self, message: str, line: int, col: int = 0, source_line: str = "") -> None:
        self.message = message
        self.line = line
        self.col = col
        self.source_line = source_line
        where = f"line {line}" + (f", column {col}" if col else "")
        shown = f"\n  {source_line.strip()}" if source_line.strip() else ""
        super().__init__(f"{where}: {message}{shown}")


_SIMPLE = [
    (Kind.STRING, r'"(?:[^"\\\n]|\\.)*"'),
    (Kind.VALUE, r"%[A-Za-z0-9_$.\-]+(?:#\d+)?"),  # `%cst_-1_i32` is a name
    (Kind.SYMBOL, r'@(?:[A-Za-z0-9_$.\-]+|"(?:[^"\\\n]|\\.)*")'),
    (Kind.LABEL, r"\^[A-Za-z0-9_]+"),
    (Kind.ARROW, r"->"),
    (
        Kind.NUMBER,
        r"0x[0-9A-Fa-f]+|-?\d+\.\d*(?:[eE][+-]?\d+)?|-?\d+[eE][+-]?\d+|-?\d+"
        r"|-?(?:inf|nan)(?![A-Za-z0-9_])",
    ),
    (Kind.PUNCT, r"[()\[\]{},:=?*+]"),
]
_SIMPLE_RE = [(kind, re.compile(pattern)) for kind, pattern in _SIMPLE]
_WORD_RE = re.compile(r"#?[A-Za-z_][A-Za-z0-9_.$]*")
_SPACE_RE = re.compile(r"[ \t\r]+")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.tokens: list[Token] = []

    def source_line(self, line: int) -> str:
        lines = self.text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def fail(self, message: str, line: int | None = None, col: int | None = None) -> IRSyntaxError:
        at_line = self.line if line is None else line
        at_col = (self.pos - self.line_start + 1) if col is None else col
        return IRSyntaxError(message, at_line, at_col, self.source_line(at_line))

    def emit(self, kind: Kind, end: int) -> None:
        col = self.pos - self.line_start + 1
        self.tokens.append(Token(kind, self.text[self.pos : end], self.line, col))
        self.pos = end

    def run(self) -> list[Token]:
        while self.pos < len(self.text):
            self.step()
        return self.tokens

    def step(self) -> None:
        text, pos = self.text, self.pos
        char = text[pos]
        if char == "\n":
            self.pos += 1
            self.line += 1
            self.line_start = self.pos
            return
        space = _SPACE_RE.match(text, pos)
        if space:
            self.pos = space.end()
            return
        if text.startswith("//", pos):
            newline = text.find("\n", pos)
            self.pos = len(text) if newline < 0 else newline
            return
        if text.startswith("loc(", pos):
            self.emit(Kind.LOC, self.balanced(pos + 3, "(", ")"))
            return
        if char == "<":
            self.emit(Kind.ANGLE, self.balanced(pos, "<", ">"))
            return
        for kind, pattern in _SIMPLE_RE:
            found = pattern.match(text, pos)
            if found:
                self.emit(kind, found.end())
                return
        word = _WORD_RE.match(text, pos)
        if word is None:
            raise self.fail(f"unexpected character {char!r}")
        end = word.end()
        if end < len(text) and text[end] == "<":
            self.emit(Kind.ANGLE, self.balanced(end, "<", ">"))
        else:
            self.emit(Kind.HASH if char == "#" else Kind.IDENT, end)

    def balanced(self, start: int, opener: str, closer: str) -> int:
        """End of the bracketed text opening at `start` (strings skipped, and
        the `>` of a `->` inside angle brackets not counted)."""
        depth = 0
        pos = start
        text = self.text
        while pos < len(text):
            char = text[pos]
            if char == '"':
                pos = self.string_end(pos)
                continue
            if char == "\n":
                break
            if char == opener:
                depth += 1
            elif char == closer and not (closer == ">" and text[pos - 1] == "-"):
                depth -= 1
                if depth == 0:
                    return pos + 1
            pos += 1
        raise self.fail(f"unterminated {opener!r}: no matching {closer!r} on this line")

    def string_end(self, start: int) -> int:
        found = _SIMPLE_RE[0][1].match(self.text, start)
        if found is None:
            raise self.fail("unterminated string")
        return found.end()


def tokenize(text: str) -> list[Token]:
    """Split IR text into tokens; raises IRSyntaxError with the line on bad input."""
    return _Scanner(text).run()
