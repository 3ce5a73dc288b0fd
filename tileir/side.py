"""One side (reference or generated) of a diff, seen the way the diff compares it.

Constants are not ops to align but values: an operand that is a constant is
described by its type and value, wherever and however often the constant was
materialised. Non-negativity assumes (`assume bounded<0, ?>`) and `assume div_by<1>` are
transparent: their result stands for their operand. Both are noise in
docs/PIPELINE.md terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.ir_diff import OpSite
from tileir import attrs
from tileir.ir import Entry, Op, Region
from tileir.resolve import Resolved, is_dead_constant, resolve

NON_NEGATIVE = "0, ?"
HASH_DEPTH = 4

# ("const", type, value) for a constant; ("val", id) for anything else.
Descriptor = tuple[str, ...]


def op_key(op: Op) -> str:
    """What an op is, apart from its operands: name, attributes, types."""
    attributes = ",".join(f"{k}={v}" for k, v in sorted(op.attributes.items()))
    operand_types = ",".join(attrs.squash(t) for t in op.operand_types)
    result_types = ",".join(attrs.squash(t) for t in op.result_types)
    region_args = ";".join(
        ",".join(attrs.squash(a.type) for a in region.args) for region in op.regions
    )
    return f"{op.name}|{attributes}|{operand_types}|{result_types}|{region_args}"


def is_non_negative_assume(op: Op) -> bool:
    return op.name == "assume" and op.attributes.get("bounded") == NON_NEGATIVE


def is_trivial_assume(op: Op) -> bool:
    """`assume div_by<1>` claims nothing."""
    return op.name == "assume" and op.attributes.get("div_by") == "1"


def is_transparent_assume(op: Op) -> bool:
    return is_non_negative_assume(op) or is_trivial_assume(op)


@dataclass
class Side:
    label: str
    entry: Entry
    entry_index: int
    resolved: Resolved = field(init=False)
    value_hash: dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        self.resolved = resolve(self.entry)
        self.value_hash = {}  # filled on first use: exact diffs never align

    def operands_hash(self, op: Op) -> int:
        """Side-independent identity of what an op computes from: equal on
        both sides when its inputs are computed the same way."""
        if not self.value_hash:
            _StructuralHasher(self).entry()
        operands = self.resolved.operand_ids(op)
        return hash(tuple(self.value_hash[self.through_transparent(v)] for v in operands))

    def descriptor(self, value: int) -> Descriptor:
        value = self.through_transparent(value)
        producer = self.resolved.producer(value)
        if producer is not None and producer.name == "constant":
            type_text = attrs.squash(self.resolved.type_of(value))
            return ("const", type_text, producer.attributes.get("value", "?"))
        return ("val", str(value))

    def through_transparent(self, value: int) -> int:
        producer = self.resolved.producer(value)
        while producer is not None and is_transparent_assume(producer):
            value = self.resolved.operand_ids(producer)[0]
            producer = self.resolved.producer(value)
        return value

    def operand_descriptors(self, op: Op) -> list[Descriptor]:
        return [self.descriptor(v) for v in self.resolved.operand_ids(op)]

    def compared_ops(self, region: Region) -> list[Op]:
        """The ops the diff aligns: constants, non-negativity assumes and
        implicit terminators left out."""
        return [op for op in region.ops if not self.is_transparent(op)]

    @staticmethod
    def is_transparent(op: Op) -> bool:
        if op.name == "constant" or is_transparent_assume(op):
            return True
        return op.name == "yield" and not op.operands

    def all_ops(self) -> list[Op]:
        return list(self.entry.walk())

    def dead_constants(self) -> int:
        return sum(1 for op in self.all_ops() if is_dead_constant(op, self.resolved))

    def non_negative_assumes(self) -> int:
        return sum(1 for op in self.all_ops() if is_non_negative_assume(op))

    def trivial_assumes(self) -> int:
        return sum(1 for op in self.all_ops() if is_trivial_assume(op))

    def used_constants(self) -> list[str]:
        return sorted(
            f"{op.attributes.get('value', '?')}:{attrs.squash(''.join(op.result_types[:1]))}"
            for op in self.all_ops()
            if op.name == "constant" and not is_dead_constant(op, self.resolved)
        )

    def site(self, op: Op) -> OpSite:
        return OpSite(
            entry=self.entry_index, line=op.line, op=op.name, text=op.raw, location=op.location
        )

    def backward_slice(self, values: list[int], stop: set[int] | None = None) -> list[Op]:
        """Ops (constants excluded) that `values` depend on, nearest first."""
        seen: set[int] = set()
        out: list[Op] = []
        stack = list(values)
        while stack:
            value = stack.pop()
            producer = self.resolved.producer(value)
            if producer is None or id(producer) in seen or producer.name == "constant":
                continue
            if stop is not None and id(producer) in stop:
                continue
            seen.add(id(producer))
            out.append(producer)
            stack.extend(self.resolved.operand_ids(producer))
        return out


class _StructuralHasher:
    """A hash per value of how it is computed, looking HASH_DEPTH producers
    up: the producing op's name, attributes and types, then its inputs'
    hashes; entry arguments by position, constants by value. The depth limit
    keeps one change from altering the hash of everything downstream, so
    sequence alignment keeps long runs of matching ops."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.local: dict[int, int] = {}
        self.inputs: dict[int, list[int]] = {}

    def entry(self) -> None:
        resolved = self.side.resolved
        for index, value in enumerate(resolved.entry_args):
            self.local[value] = hash(("arg", index))
            self.inputs[value] = []
        self.region(self.side.entry.body)
        level = dict(self.local)
        for _ in range(HASH_DEPTH):
            level = {
                value: hash((own, tuple(level[i] for i in self.inputs[value])))
                for value, own in self.local.items()
            }
        self.side.value_hash.update(level)

    def region(self, region: Region) -> None:
        for op in region.ops:
            self.op(op)

    def op(self, op: Op) -> None:
        side = self.side
        key = (
            ("const", op.attributes.get("value"), tuple(op.result_types))
            if op.name == "constant"
            else (op_key(op),)
        )
        operands = [side.through_transparent(v) for v in side.resolved.operand_ids(op)]
        if op.name == "constant":
            operands = []
        for region_index, region in enumerate(op.regions):
            for block_index, block in enumerate(region.blocks):
                for arg_index, value in enumerate(side.resolved.block_args[id(block)]):
                    self.local[value] = hash((key, region_index, block_index, arg_index))
                    self.inputs[value] = operands
            self.region(region)
        for index, value in enumerate(side.resolved.result_ids(op)):
            self.local[value] = hash((key, "result", index))
            self.inputs[value] = operands
