"""The structured form of a `cuda_tile` module: entries, ops, regions, blocks.

Values are referred to by the name the printer gave them (`%tile_17`,
`%1#0`); the canonical form renames them. Attributes are kept twice: as a
normalised dict for the diff, and as the op's header tokens for printing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from tileir.lexer import Token


@dataclass
class BlockArg:
    name: str
    type: str


@dataclass
class Block:
    args: list[BlockArg] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)


@dataclass
class Region:
    blocks: list[Block] = field(default_factory=list)

    @property
    def args(self) -> list[BlockArg]:
        return self.blocks[0].args if self.blocks else []

    @property
    def ops(self) -> list[Op]:
        return [op for block in self.blocks for op in block.ops]


@dataclass
class Op:
    """One operation. `header` is the op's tokens after `=` (name included,
    regions and trailing `loc(...)` excluded)."""

    name: str
    results: list[str]
    operands: list[str]
    attributes: dict[str, str]
    flags: list[str]
    operand_types: list[str]
    result_types: list[str]
    header: list[Token]
    raw: str
    line: int
    regions: list[Region] = field(default_factory=list)
    region_defs: list[str] = field(default_factory=list)
    location: str | None = None

    def walk(self) -> Iterator[Op]:
        """This op, then every op nested in its regions, in text order."""
        yield self
        for region in self.regions:
            for op in region.ops:
                yield from op.walk()


@dataclass
class Entry:
    symbol: str
    args: list[BlockArg]
    attributes: dict[str, str]
    body: Region
    line: int

    def walk(self) -> Iterator[Op]:
        for op in self.body.ops:
            yield from op.walk()


@dataclass
class Module:
    name: str | None
    entries: list[Entry]
    globals: list[str] = field(default_factory=list)
    source_printer: str = "tileirdisasm"
