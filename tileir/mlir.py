"""Parse `cuda_tile` MLIR text into the structured form of tileir.ir.

Accepts both printers: tileirdisasm (bare `entry @k(...)`, region arguments
of reduce/scan on their own line, `%1:2` multi-results, `loc(...)` with -g)
and cutile-rs's own (`cuda_tile.module @m { entry ... }`, `^bb0(...):` block
labels, `cuda_tile.loop`). Any other syntax is an IRSyntaxError naming the
line, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tileir import header as hdr
from tileir.ir import Block, BlockArg, Entry, Module, Op, Region
from tileir.lexer import IRSyntaxError, Kind, Token, tokenize

MODULE_KEYWORDS = frozenset({"cuda_tile.module", "module"})
ENTRY_KEYWORDS = frozenset({"entry", "cuda_tile.entry"})
GLOBAL_KEYWORDS = frozenset({"cuda_tile.global", "global"})


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines()
        self.tokens = tokenize(text)
        self.pos = 0
        self.loc_aliases: dict[str, str] = {}

    # -- token access -------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of text", self._last_line())
        self.pos += 1
        return token

    def expect(self, text: str) -> Token:
        token = self.take()
        if token.text != text:
            raise self.error(f"expected {text!r}, found {token.text!r}", token.line, token.col)
        return token

    def expect_kind(self, kind: Kind, what: str) -> Token:
        token = self.take()
        if token.kind is not kind:
            raise self.error(f"expected {what}, found {token.text!r}", token.line, token.col)
        return token

    def at(self, text: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token.text == text and token.kind is not Kind.STRING

    def at_kind(self, kind: Kind) -> bool:
        token = self.peek()
        return token is not None and token.kind is kind

    def rest_of_line(self) -> list[Token]:
        """Tokens from here to the end of the current token's line."""
        first = self.peek()
        if first is None:
            return []
        end = self.pos
        while end < len(self.tokens) and self.tokens[end].line == first.line:
            end += 1
        return self.tokens[self.pos : end]

    def error(self, message: str, line: int, col: int = 0) -> IRSyntaxError:
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return IRSyntaxError(message, line, col, source)

    def _last_line(self) -> int:
        return self.tokens[-1].line if self.tokens else 1

    # -- module level -------------------------------------------------------

    def parse_module(self) -> Module:
        module = Module(name=None, entries=[])
        while self.peek() is not None:
            self.parse_top_level(module)
        if not module.entries:
            raise self.error("no `entry` found: not cuda_tile IR text", self._last_line())
        resolve_locations(module, self.loc_aliases)
        return module

    def parse_top_level(self, module: Module) -> None:
        token = self.peek()
        assert token is not None
        if token.kind is Kind.HASH and self.at("=", 1):
            self.parse_alias()
        elif token.text in MODULE_KEYWORDS:
            self.parse_module_body(module)
        elif token.text in ENTRY_KEYWORDS:
            module.entries.append(self.parse_entry())
        elif token.text in GLOBAL_KEYWORDS:
            module.globals.append(" ".join(t.text for t in self.rest_of_line()))
            self.pos += len(self.rest_of_line())
        else:
            raise self.error(
                f"expected `entry` or `cuda_tile.module`, found {token.text!r}",
                token.line,
                token.col,
            )

    def parse_alias(self) -> None:
        tokens = self.rest_of_line()
        self.pos += len(tokens)
        self.loc_aliases[tokens[0].text] = " ".join(t.text for t in tokens[2:])

    def parse_module_body(self, module: Module) -> None:
        self.take()
        module.source_printer = "cutile-rs"
        if self.at_kind(Kind.SYMBOL):
            module.name = self.take().text[1:]
        self.expect("{")
        while not self.at("}"):
            if self.peek() is None:
                raise self.error("module not closed: missing '}'", self._last_line())
            self.parse_top_level(module)
        self.expect("}")

    def parse_entry(self) -> Entry:
        keyword = self.take()
        symbol = self.expect_kind(Kind.SYMBOL, "the entry symbol (@name)").text[1:]
        self.expect("(")
        args = self.parse_typed_args(")")
        attributes = self.parse_entry_attributes()
        self.expect("{")
        body = self.parse_region_body()
        self.skip_loc()
        return Entry(symbol.strip('"'), args, attributes, body, keyword.line)

    def parse_typed_args(self, closer: str) -> list[BlockArg]:
        args: list[BlockArg] = []
        while not self.at(closer):
            name = self.expect_kind(Kind.VALUE, "an argument (%name: type)")
            self.expect(":")
            type_token = self.take()
            args.append(BlockArg(name.text, type_token.text))
            if self.at_kind(Kind.LOC):
                self.take()
            if not self.at(closer):
                self.expect(",")
        self.expect(closer)
        return args

    def parse_entry_attributes(self) -> dict[str, str]:
        """`optimization_hints=<default = {}>` (tileirdisasm) or
        `optimization_hints = #cuda_tile.optimization_hints<...> di_name = "k"`."""
        start = self.pos
        while not self.at("{"):
            token = self.take()
            if token.kind is Kind.PUNCT and token.text in "}(":
                raise self.error(f"unexpected {token.text!r} in entry header", token.line)
        return hdr.entry_attributes(self.tokens[start : self.pos])

    # -- regions and ops ----------------------------------------------------

    def parse_region_body(self, args: list[BlockArg] | None = None) -> Region:
        """Blocks up to and including the closing '}' (the '{' is consumed)."""
        region = Region(blocks=[Block(args=list(args or []))])
        while not self.at("}"):
            token = self.peek()
            if token is None:
                raise self.error("region not closed: missing '}'", self._last_line())
            if token.kind is Kind.LABEL:
                region.blocks.append(self.parse_block_label(region))
            else:
                region.blocks[-1].ops.append(self.parse_op())
        self.expect("}")
        return region

    def parse_block_label(self, region: Region) -> Block:
        self.take()
        args: list[BlockArg] = []
        if self.at("("):
            self.take()
            args = self.parse_typed_args(")")
        self.expect(":")
        if len(region.blocks) == 1 and not region.blocks[0].ops:
            args = region.blocks[0].args + args
            region.blocks.pop()
        return Block(args=args)

    def skip_loc(self) -> str | None:
        token = self.peek()
        if token is not None and token.kind is Kind.LOC:
            self.take()
            return token.text
        return None

    def parse_op(self) -> Op:
        first = self.peek()
        assert first is not None
        results = self.parse_results()
        name_token = self.take()
        if name_token.kind is not Kind.IDENT:
            raise self.error(
                f"expected an op name, found {name_token.text!r}", name_token.line, name_token.col
            )
        header, opens_region = self.take_header(name_token)
        location = self.skip_loc()
        op = hdr.build_op(name_token, results, header, self.lines[first.line - 1].strip())
        op.location = location
        self.parse_regions(op, opens_region)
        return op

    def parse_results(self) -> list[str]:
        if not self.at_kind(Kind.VALUE):
            return []
        results: list[str] = []
        while True:
            name = self.expect_kind(Kind.VALUE, "a result name").text
            if self.at(":"):
                self.take()
                count = self.expect_kind(Kind.NUMBER, "a result count after ':'")
                results.extend(f"{name}#{i}" for i in range(int(count.text)))
            else:
                results.append(name)
            if not self.at(","):
                break
            self.take()
        self.expect("=")
        return results

    def take_header(self, name: Token) -> tuple[list[Token], bool]:
        """The op's tokens to the end of its line; a '{' ending the line opens
        a region (a '{...}' inside the line is an attribute dict)."""
        header: list[Token] = [name]
        depth = 0
        while True:
            token = self.peek()
            if token is None or token.line != name.line or token.kind is Kind.LOC:
                break
            if token.is_punct("{"):
                following = self.peek(1)
                if depth == 0 and (following is None or following.line != token.line):
                    self.take()
                    return header, True
            depth += _depth_change(token)
            header.append(self.take())
        if depth != 0:
            raise self.error("unbalanced brackets in op", name.line, name.col)
        return header, False

    def parse_regions(self, op: Op, opens_region: bool) -> None:
        if not opens_region and self.next_line_opens_region_with_args(op.line):
            self.take()
            args = self.parse_typed_args(")")
            self.expect("{")
            op.regions.append(self.parse_region_body(args))
        elif opens_region:
            op.regions.append(self.parse_region_body(hdr.region_args(op)))
            while self.at("else"):
                self.take()
                self.expect("{")
                op.regions.append(self.parse_region_body())
        if op.regions:  # -g prints a region op's location after its last '}'
            op.location = self.skip_loc() or op.location

    def next_line_opens_region_with_args(self, line: int) -> bool:
        """tileirdisasm prints reduce/scan region arguments on the next line:
        `(%lhs: tile<f32>, %rhs: tile<f32>) {`."""
        token = self.peek()
        if token is None or not token.is_punct("(") or token.line == line:
            return False
        tokens = self.rest_of_line()
        return tokens[-1].is_punct("{")


def _depth_change(token: Token) -> int:
    if token.kind is not Kind.PUNCT:
        return 0
    if token.text in "([{":
        return 1
    if token.text in ")]}":
        return -1
    return 0


def resolve_locations(module: Module, aliases: dict[str, str]) -> None:
    """Turn `loc(#loc14)` into `file:line:col` through the -g alias table."""
    for entry in module.entries:
        for op in entry.walk():
            if op.location is not None:
                op.location = _resolve_location(op.location, aliases)


def _resolve_location(text: str, aliases: dict[str, str], depth: int = 0) -> str | None:
    inner = text[4:-1] if text.startswith("loc(") else text
    if inner.startswith("#") and depth < 8:
        target = aliases.get(inner.split()[0])
        if target is None:
            return inner
        if target.startswith("#cuda_tile.di_loc<"):
            target = target[len("#cuda_tile.di_loc<") :].split()[0]
        return _resolve_location(target, aliases, depth + 1)
    if inner == "unknown":
        return None
    if inner.startswith("callsite(") and inner.endswith(")") and depth < 8:
        callee, caller = _split_callsite(inner[len("callsite(") : -1])
        inlined = _resolve_location(callee, aliases, depth + 1)
        call = _resolve_location(caller, aliases, depth + 1)
        if inlined is None or call is None:
            return inlined or call
        return f"{inlined} called from {call}"  # the kernel's own line ends the text
    return inner.replace('" :', '":').replace('"', "")


def _split_callsite(text: str) -> tuple[str, str]:
    """`A at B` of `callsite(A at B)`, split at the top-level ` at `."""
    depth = 0
    for index, char in enumerate(text):
        if char in "(<[":
            depth += 1
        elif char in ")>]":
            depth -= 1
        elif depth == 0 and text.startswith(" at ", index):
            return text[:index], text[index + 4 :]
    return text, ""


def parse_module(text: str) -> Module:
    """Parse IR text (either printer). Raises IRSyntaxError with the line."""
    module = Parser(text).parse_module()
    hdr.check_scopes(module)
    return module


def parse_file(path: Path) -> Module:
    return parse_module(path.read_text())


def iter_ops(module: Module) -> Iterator[Op]:
    for entry in module.entries:
        yield from entry.walk()
