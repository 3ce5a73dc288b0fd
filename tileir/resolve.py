"""Resolve printed value names to definitions.

Printers reuse names across sibling regions (`%5` in two reduce bodies), so a
name alone does not identify a value. Each definition gets an integer id;
every use is mapped to the id of the definition in the nearest enclosing
scope. The canonical form and the diff both work on these ids.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tileir.ir import Block, Entry, Op, Region


@dataclass
class ValueInfo:
    id: int
    name: str
    type: str
    producer: Op | None  # None for entry and block arguments
    index: int  # result index, or argument index


@dataclass
class Resolved:
    values: list[ValueInfo] = field(default_factory=list)
    operands: dict[int, list[int]] = field(default_factory=dict)  # id(op) -> value ids
    results: dict[int, list[int]] = field(default_factory=dict)  # id(op) -> value ids
    block_args: dict[int, list[int]] = field(default_factory=dict)  # id(block) -> value ids
    entry_args: list[int] = field(default_factory=list)
    use_count: Counter[int] = field(default_factory=Counter)
    users: dict[int, list[Op]] = field(default_factory=dict)

    def operand_ids(self, op: Op) -> list[int]:
        return self.operands[id(op)]

    def result_ids(self, op: Op) -> list[int]:
        return self.results[id(op)]

    def producer(self, value: int) -> Op | None:
        return self.values[value].producer

    def type_of(self, value: int) -> str:
        return self.values[value].type


class _Resolver:
    def __init__(self) -> None:
        self.out = Resolved()
        self.scopes: list[dict[str, int]] = []

    def define(self, name: str, type_: str, producer: Op | None, index: int) -> int:
        value = len(self.out.values)
        self.out.values.append(ValueInfo(value, name, type_, producer, index))
        self.scopes[-1][name] = value
        return value

    def lookup(self, name: str) -> int:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise KeyError(name)  # the parser's scope check rules this out

    def entry(self, entry: Entry) -> Resolved:
        self.scopes.append({})
        self.out.entry_args = [
            self.define(arg.name, arg.type, None, i) for i, arg in enumerate(entry.args)
        ]
        self.region(entry.body)
        return self.out

    def region(self, region: Region) -> None:
        self.scopes.append({})
        for block in region.blocks:
            self.block_args(block)
        for op in region.ops:
            self.op(op)
        self.scopes.pop()

    def block_args(self, block: Block) -> None:
        self.out.block_args[id(block)] = [
            self.define(arg.name, arg.type, None, i) for i, arg in enumerate(block.args)
        ]

    def op(self, op: Op) -> None:
        operands = [self.lookup(name) for name in op.operands]
        self.out.operands[id(op)] = operands
        for value in operands:
            self.out.use_count[value] += 1
            self.out.users.setdefault(value, []).append(op)
        for region in op.regions:
            self.region(region)
        types = op.result_types + ["?"] * (len(op.results) - len(op.result_types))
        self.out.results[id(op)] = [
            self.define(name, types[i], op, i) for i, name in enumerate(op.results)
        ]


def resolve(entry: Entry) -> Resolved:
    return _Resolver().entry(entry)


def is_dead_constant(op: Op, resolved: Resolved) -> bool:
    return op.name == "constant" and all(
        resolved.use_count[value] == 0 for value in resolved.result_ids(op)
    )
