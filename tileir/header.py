"""Reading one op's header tokens: which `%names` it uses and which it
defines for its region, its attributes (normalised), and its signature types."""

from __future__ import annotations

import re

from tileir import attrs
from tileir.ir import BlockArg, Module, Op, Region
from tileir.lexer import IRSyntaxError, Kind, Token

TERMINATORS = frozenset({"yield", "break", "continue", "return"})
ROUNDING_KEYS = frozenset({"rounding", "rounding_mode"})
NON_ATTRIBUTE_WORDS = frozenset({"in", "to", "step", "iter_values", "else"})
TYPE_NAMES = frozenset(
    {"tile", "ptr", "tensor_view", "partition_view", "strided_view", "gather_scatter_view"}
)
_SCALAR_TYPE = re.compile(r"^(?:i\d+|f\d+|bf16|tf32|f8\w+|f4\w+|token)$")
OP_PREFIX = "cuda_tile."


def is_type_token(token: Token) -> bool:
    if token.kind is Kind.ANGLE:
        name, _ = attrs.split_angle(token.text)
        return name in TYPE_NAMES
    return token.kind is Kind.IDENT and bool(_SCALAR_TYPE.match(token.text))


def split_at_colon(tokens: list[Token]) -> tuple[list[Token], list[Token]]:
    """Tokens before and after the first ':' outside brackets."""
    depth = 0
    for index, token in enumerate(tokens):
        if token.kind is Kind.PUNCT:
            if token.text in "([{":
                depth += 1
            elif token.text in ")]}":
                depth -= 1
            elif token.text == ":" and depth == 0:
                return tokens[:index], tokens[index + 1 :]
    return tokens, []


def group_end(tokens: list[Token], start: int) -> int:
    """Index after the bracket group (or single token) starting at `start`."""
    opener = tokens[start]
    if opener.kind is not Kind.PUNCT or opener.text not in "([{":
        return start + 1
    depth = 0
    for index in range(start, len(tokens)):
        token = tokens[index]
        if token.kind is Kind.PUNCT and token.text in "([{":
            depth += 1
        elif token.kind is Kind.PUNCT and token.text in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(tokens)


def value_text(tokens: list[Token]) -> str:
    """Attribute text with value names blanked (`[%a, 1]` -> `[%_, 1]`)."""
    return attrs.squash(" ".join("%_" if t.kind is Kind.VALUE else t.text for t in tokens))


def region_def_positions(body: list[Token]) -> set[int]:
    """Values the header defines for the op's region: `for %iv in (...)`
    and each `%iterArg = %init` of `iter_values(...)`."""
    defs: set[int] = set()
    for index, token in enumerate(body[:-1]):
        if token.kind is not Kind.VALUE:
            continue
        following = body[index + 1]
        if following.is_punct("=") or (following.kind is Kind.IDENT and following.text == "in"):
            defs.add(index)
    return defs


def signature_types(name: str, post: list[Token], n_results: int) -> tuple[list[str], list[str]]:
    before: list[str] = []
    after: list[str] = []
    seen_arrow = False
    for token in post:
        if token.kind is Kind.ARROW:
            seen_arrow = True
        elif is_type_token(token):
            (after if seen_arrow else before).append(token.text)
    if seen_arrow:
        result_types = after
        operand_types = before
    elif name in TERMINATORS or n_results == 0:
        return before, []
    elif name == "mmaf_scaled":
        # All five operands' types are printed; the result has the accumulator's (the third).
        return before, before[2:3]
    else:
        result_types, operand_types = before[-1:], before[:-1]
    if len(result_types) == 1 and n_results > 1:
        result_types = result_types * n_results
    return operand_types, result_types


class _AttributeReader:
    """Walks the tokens before the signature colon and fills attributes."""

    def __init__(self, op_name: str, tokens: list[Token], element_types: list[str]) -> None:
        self.op_name = op_name
        self.tokens = tokens
        self.element_types = element_types
        self.attributes: dict[str, str] = {}
        self.flags: list[str] = []

    def read(self) -> None:
        index = 0
        while index < len(self.tokens):
            index = self.read_one(index)

    def read_one(self, index: int) -> int:
        token = self.tokens[index]
        following = self.tokens[index + 1] if index + 1 < len(self.tokens) else None
        if token.kind is Kind.IDENT and following is not None and following.is_punct("="):
            end = group_end(self.tokens, index + 2)
            self.set_keyed(token.text, self.tokens[index + 2 : end])
            return end
        worded = token.kind is Kind.IDENT and token.text in attrs.VALUE_KEYWORDS
        if worded and following is not None and following.kind is Kind.IDENT:
            self.set(token.text, following.text)
            return index + 2
        if token.kind is Kind.IDENT:
            self.read_word(token.text)
        elif token.kind is Kind.ANGLE:
            self.read_angle(token.text)
        elif token.kind is Kind.STRING:
            self.attributes["string"] = token.text
        elif token.is_punct("{"):
            end = group_end(self.tokens, index)
            self.read_dict(self.tokens[index + 1 : end - 1])
            return end
        elif token.is_punct("["):
            end = group_end(self.tokens, index)
            self.read_list(index, end)
            return end
        return index + 1

    def set_keyed(self, key: str, value: list[Token]) -> None:
        text = value_text(value)
        if key == "identities":
            text = attrs.identities_value(text, self.element_types)
        elif key == "optimization_hints":
            text = attrs.optimization_hints_value(text)
        self.set(key, text)

    def set(self, key: str, text: str) -> None:
        """Store an attribute, spelled one way; a default rounding is no attribute."""
        if key in ROUNDING_KEYS:
            text = attrs.rounding_name(text)
            if text == default_rounding(self.op_name):
                return
            key = "rounding"
        self.attributes[key] = text

    def read_word(self, word: str) -> None:
        if word in NON_ATTRIBUTE_WORDS:
            return
        self.flags.append(word)
        category = attrs.keyword_category(word)
        if category in ("flush_to_zero", "propagate_nan"):
            self.attributes[category] = "true"
        elif category is not None:
            self.attributes[category] = word
        elif self.op_name.startswith("atomic"):
            self.attributes["mode"] = word

    def read_angle(self, text: str) -> None:
        name, inner = attrs.split_angle(text)
        if name:
            self.set(name, attrs.squash(inner))
        else:
            self.attributes["value"] = attrs.constant_value(text)

    def read_dict(self, tokens: list[Token]) -> None:
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if (
                token.kind is Kind.IDENT
                and index + 1 < len(tokens)
                and tokens[index + 1].is_punct("=")
            ):
                end = group_end(tokens, index + 2)
                self.set_keyed(token.text, tokens[index + 2 : end])
                index = end
            else:
                index += 1

    def read_list(self, start: int, end: int) -> None:
        previous = self.tokens[start - 1] if start > 0 else None
        opener = self.tokens[start]
        if (
            previous is not None
            and previous.kind is Kind.VALUE
            and previous.line == opener.line
            and previous.col + len(previous.text) == opener.col
        ):
            return  # `%view[%i, %j]`: an index list, its values are operands
        self.attributes["permutation" if self.op_name == "permute" else "list"] = value_text(
            self.tokens[start:end]
        )


def default_rounding(op_name: str) -> str:
    """What no rounding attribute means: integer division truncates, float
    ops round to nearest even (and neither printer prints the default)."""
    return "zero" if op_name == "divi" else "nearest_even"


def dict_attributes(op_name: str, tokens: list[Token]) -> dict[str, str]:
    """The normalised entries of an attribute dict `{k = v, ...}` (braces excluded)."""
    reader = _AttributeReader(op_name, [], [])
    reader.read_dict(tokens)
    return reader.attributes


def element_type(type_text: str) -> str:
    """`tile<1x1024xf32>` -> `f32`; `tile<f32>` -> `f32`."""
    _, inner = attrs.split_angle(type_text)
    return inner.split("x")[-1] if inner else type_text


def build_op(name_token: Token, results: list[str], header: list[Token], raw: str) -> Op:
    name = name_token.text.removeprefix(OP_PREFIX)
    body = header[1:]
    defs = region_def_positions(body)
    pre, post = split_at_colon(body)
    if not post:
        pre, post = _split_at_arrow(pre)
    operand_types, result_types = signature_types(name, post, len(results))
    reader = _AttributeReader(name, pre, [element_type(t) for t in operand_types])
    reader.read()
    return Op(
        name=name,
        results=results,
        operands=[t.text for i, t in enumerate(body) if t.kind is Kind.VALUE and i not in defs],
        attributes=reader.attributes,
        flags=reader.flags,
        operand_types=operand_types,
        result_types=result_types,
        header=header,
        raw=raw,
        line=name_token.line,
        region_defs=[body[i].text for i in sorted(defs)],
    )


def _split_at_arrow(tokens: list[Token]) -> tuple[list[Token], list[Token]]:
    """`if %c -> (tile<i32>)` has result types but no colon."""
    for index, token in enumerate(tokens):
        if token.kind is Kind.ARROW:
            return tokens[:index], tokens[index:]
    return tokens, []


def region_args(op: Op) -> list[BlockArg]:
    """Block arguments a `for` or `loop` header defines for its body."""
    if op.name == "for" and op.region_defs:
        iv_type = op.operand_types[0] if op.operand_types else "tile<i32>"
        types = [iv_type, *op.result_types]
    elif op.name == "loop":
        types = list(op.operand_types)
    else:
        types = []
    types += ["?"] * (len(op.region_defs) - len(types))
    return [BlockArg(name, type_) for name, type_ in zip(op.region_defs, types, strict=False)]


def entry_attributes(tokens: list[Token]) -> dict[str, str]:
    attributes: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.kind is Kind.IDENT and index + 2 < len(tokens) and tokens[index + 1].is_punct("="):
            end = group_end(tokens, index + 2)
            text = " ".join(t.text for t in tokens[index + 2 : end])
            if token.text == "optimization_hints":
                text = attrs.optimization_hints_value(text)
            attributes[token.text] = text
            index = end
        else:
            index += 1
    return attributes


def check_scopes(module: Module) -> None:
    """Every use names a value defined before it in an enclosing scope, and
    no scope defines a name twice."""
    for entry in module.entries:
        scopes: list[set[str]] = [{arg.name for arg in entry.args}]
        _check_region(entry.body, scopes)


def _check_region(region: Region, scopes: list[set[str]]) -> None:
    scope: set[str] = set()
    for block in region.blocks:
        for arg in block.args:
            scope.add(arg.name)
    scopes.append(scope)
    for op in region.ops:
        _check_op(op, scopes)
    scopes.pop()


def _check_op(op: Op, scopes: list[set[str]]) -> None:
    for name in op.operands:
        if not any(name in scope for scope in scopes):
            raise IRSyntaxError(f"use of undefined value {name} in `{op.name}`", op.line, 0, op.raw)
    for region in op.regions:
        _check_region(region, scopes)
    for name in op.results:
        if name in scopes[-1]:
            raise IRSyntaxError(f"value {name} is defined twice", op.line, 0, op.raw)
        scopes[-1].add(name)
