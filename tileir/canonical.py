"""The canonical form of a module: the text two IRs must share to be `exact`.

Canonicalising (a) renames every value by definition order (`%a0..` for entry
arguments, `%0..` for everything else, block arguments included), (b) drops
constants that no op uses, (c) drops the entry symbol and debug-only entry
attributes, and (d) spells literals, spacing, region syntax and the `cuda_tile.` prefix one way.
Nothing else is forgiven: see docs/PIPELINE.md, "Levels of sameness".
"""

from __future__ import annotations

from dataclasses import dataclass

from tileir import attrs
from tileir.header import default_rounding, dict_attributes, group_end, region_def_positions
from tileir.ir import Entry, Module, Op, Region
from tileir.lexer import Kind, Token
from tileir.resolve import Resolved, is_dead_constant, resolve

DEBUG_ENTRY_ATTRIBUTES = frozenset({"di_name", "sym_name", "function_type"})
INDENT = "  "
_NO_SPACE_BEFORE = frozenset({",", ")", "]"})
_NO_SPACE_AFTER = frozenset({"(", "["})


@dataclass(frozen=True)
class CanonicalEntry:
    text: str
    dead_constants: int


@dataclass(frozen=True)
class CanonicalModule:
    entries: list[CanonicalEntry]

    @property
    def text(self) -> str:
        return "\n".join(entry.text for entry in self.entries)


class _Printer:
    def __init__(self, entry: Entry, index: int) -> None:
        self.entry = entry
        self.index = index
        self.resolved: Resolved = resolve(entry)
        self.names: dict[int, str] = {}
        self.counter = 0
        self.lines: list[str] = []
        self.dead = 0

    def name(self, value: int) -> str:
        return self.names[value]

    def define(self, value: int) -> str:
        self.names[value] = f"%{self.counter}"
        self.counter += 1
        return self.names[value]

    def print(self) -> CanonicalEntry:
        args = []
        for i, value in enumerate(self.resolved.entry_args):
            self.names[value] = f"%a{i}"
            args.append(f"%a{i}: {attrs.squash(self.entry.args[i].type)}")
        self.lines.append(
            f"entry @entry{self.index}({', '.join(args)}){self.entry_attributes()} {{"
        )
        self.region_ops(self.entry.body, 1)
        self.lines.append("}")
        return CanonicalEntry("\n".join(self.lines) + "\n", self.dead)

    def entry_attributes(self) -> str:
        kept = {
            key: value
            for key, value in sorted(self.entry.attributes.items())
            if key not in DEBUG_ENTRY_ATTRIBUTES and value
        }
        return "".join(f" {key}=<{value}>" for key, value in kept.items())

    def region_ops(self, region: Region, depth: int) -> None:
        for index, block in enumerate(region.blocks):
            if index > 0:
                ids = self.resolved.block_args[id(block)]
                label_args = ", ".join(
                    f"{self.define(v)}: {attrs.squash(self.resolved.type_of(v))}" for v in ids
                )
                self.lines.append(f"{INDENT * (depth - 1)}^bb{index}({label_args}):")
            for op in block.ops:
                if not (op.name == "yield" and not op.operands):  # implicit terminator
                    self.op(op, depth)

    def op(self, op: Op, depth: int) -> None:
        if is_dead_constant(op, self.resolved):
            self.dead += 1
            return
        results = [self.define(v) for v in self.resolved.result_ids(op)]
        for region in op.regions[:1]:
            for value in self.resolved.block_args[id(region.blocks[0])] if region.blocks else []:
                self.define(value)
        prefix = f"{', '.join(results)} = " if results else ""
        line = INDENT * depth + prefix + self.header(op)
        if not op.regions:
            self.lines.append(line)
            return
        self.regions(op, line, depth)

    def regions(self, op: Op, line: str, depth: int) -> None:
        # An empty else is how one printer spells a missing else.
        regions = op.regions[:1] + [
            r for r in op.regions[1:] if not (op.name == "if" and _is_empty(r))
        ]
        pad = INDENT * depth
        for index, region in enumerate(regions):
            args = self.region_args(op, region, index)
            if index > 0:
                self.lines.append(f"{pad}}} else{args} {{")
            elif args:  # reduce/scan style: arguments on their own line
                self.lines.extend([line, f"{pad}{args.strip()} {{"])
            else:
                self.lines.append(line + " {")
            self.region_ops(region, depth + 1)
        self.lines.append(f"{pad}}}")

    def region_args(self, op: Op, region: Region, index: int) -> str:
        if not region.blocks or (index == 0 and op.region_defs):
            return ""
        ids = self.resolved.block_args[id(region.blocks[0])]
        if not ids:
            return ""
        if index > 0:
            for value in ids:
                self.define(value)
        typed = [f"{self.name(v)}: {attrs.squash(self.resolved.type_of(v))}" for v in ids]
        return f" ({', '.join(typed)})"

    def header(self, op: Op) -> str:
        body = op.header[1:]
        defs = region_def_positions(body)
        operands = iter(self.resolved.operand_ids(op))
        region_ids = (
            iter(self.resolved.block_args[id(op.regions[0].blocks[0])])
            if op.regions and op.regions[0].blocks
            else iter(())
        )
        words = [op.name]
        index = 0
        while index < len(body):
            token = body[index]
            if token.kind is Kind.VALUE:
                source = region_ids if index in defs else operands
                words.append(self.name(next(source)))
                index += 1
                continue
            index = self.literal(op, body, index, words)
        return _join(words)

    def literal(self, op: Op, body: list[Token], index: int, words: list[str]) -> int:
        """Append the normalised spelling of the non-value token(s) at index."""
        token = body[index]
        following = body[index + 1] if index + 1 < len(body) else None
        keyed = token.kind is Kind.IDENT and following is not None and following.is_punct("=")
        if keyed and token.text == "identities":
            words.append(f"identities={op.attributes.get('identities', '')}")
            return group_end(body, index + 2)
        if keyed and token.text == "optimization_hints":
            words.append(f"optimization_hints=<{op.attributes.get('optimization_hints', '')}>")
            return group_end(body, index + 2)
        if token.is_punct("{"):
            end = group_end(body, index)
            entries = dict_attributes(op.name, body[index + 1 : end - 1])
            if entries:
                words.append(
                    "{" + ", ".join(f"{k} = {v}" for k, v in sorted(entries.items())) + "}"
                )
            return end
        if token.kind is Kind.IDENT and token.text == "rounding" and following is not None:
            return index + 2 + self.rounding(op, following.text, words)
        if token.kind is Kind.ANGLE and attrs.split_angle(token.text)[0] == "rounding":
            return index + 1 + self.rounding(op, attrs.split_angle(token.text)[1], words)
        words.append(_normalise_token(token))
        return index + 1

    @staticmethod
    def rounding(op: Op, mode: str, words: list[str]) -> int:
        """Spell a rounding mode `rounding<mode>`, or not at all when it is the default."""
        if attrs.rounding_name(mode) != default_rounding(op.name):
            words.append(f"rounding<{attrs.rounding_name(mode)}>")
        return 0


def _normalise_token(token: Token) -> str:
    if token.kind is Kind.ANGLE:
        name, inner = attrs.split_angle(token.text)
        if not name:
            return f"<{attrs.constant_value(token.text)}>"
        return f"{name}<{attrs.squash(inner)}>"
    if token.kind is Kind.IDENT:
        return token.text.removeprefix("cuda_tile.")
    return token.text


def _join(words: list[str]) -> str:
    out = ""
    previous = ""
    for word in words:
        glued = word in _NO_SPACE_BEFORE or previous in _NO_SPACE_AFTER
        if not out or glued or (word == "[" and previous.startswith("%")):
            out += word
        else:
            out += " " + word
        previous = word
    return out


def _is_empty(region: Region) -> bool:
    return all(op.name == "yield" and not op.operands for op in region.ops)


def canonicalize(module: Module) -> CanonicalModule:
    return CanonicalModule([_Printer(entry, i).print() for i, entry in enumerate(module.entries)])


def canonical_text(module: Module) -> str:
    return canonicalize(module).text
