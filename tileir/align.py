"""Align the ops of two entries, region by region.

1. Ops that compute the same thing from inputs computed the same way (same
   key and same structural hash of operands) are matched in order (longest
   common subsequence, difflib); then, in what differs, ops with the same key
   (name, attributes, types).
2. Left-over ops with the same key whose operands correspond are matched
   wherever they sit (an op moved past independent ops).
3. Left-overs with the same name inside one differing stretch are paired as
   "modified": the classifier reports what changed between them.
Pairs map result values (and region arguments) from reference to generated,
so that later operand comparisons follow data flow, not names.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from tileir.ir import Op, Region
from tileir.side import Descriptor, Side, op_key


@dataclass
class Pair:
    ref: Op
    gen: Op
    context: tuple[str, ...]
    same_key: bool
    moved: bool = False
    explained_operands: set[int] = field(default_factory=set)
    equivalence: str | None = None  # set when an equivalence accounts for the pair


@dataclass
class Unmatched:
    op: Op
    context: tuple[str, ...]
    group: int  # the differing stretch it came from


@dataclass
class Alignment:
    ref: Side
    gen: Side
    pairs: list[Pair] = field(default_factory=list)
    unmatched_ref: list[Unmatched] = field(default_factory=list)
    unmatched_gen: list[Unmatched] = field(default_factory=list)
    value_map: dict[int, int] = field(default_factory=dict)
    explained: set[int] = field(default_factory=set)  # id(op) accounted for by an equivalence

    def corresponds(self, ref_desc: Descriptor, gen_desc: Descriptor) -> bool:
        if ref_desc[0] == "const" or gen_desc[0] == "const":
            return ref_desc == gen_desc
        return self.value_map.get(int(ref_desc[1])) == int(gen_desc[1])

    def operands_correspond(self, ref_op: Op, gen_op: Op) -> bool:
        ref_descs = self.ref.operand_descriptors(ref_op)
        gen_descs = self.gen.operand_descriptors(gen_op)
        return len(ref_descs) == len(gen_descs) and all(
            self.corresponds(r, g) for r, g in zip(ref_descs, gen_descs, strict=True)
        )

    def map_values(self, ref_values: list[int], gen_values: list[int]) -> None:
        for ref_value, gen_value in zip(ref_values, gen_values, strict=False):
            self.value_map[ref_value] = gen_value

    def map_results(self, ref_op: Op, gen_op: Op) -> None:
        self.map_values(self.ref.resolved.result_ids(ref_op), self.gen.resolved.result_ids(gen_op))

    def still_unmatched(self) -> None:
        """Drop from the unmatched lists what an equivalence has explained."""
        self.unmatched_ref = [u for u in self.unmatched_ref if id(u.op) not in self.explained]
        self.unmatched_gen = [u for u in self.unmatched_gen if id(u.op) not in self.explained]


class _Aligner:
    def __init__(self, ref: Side, gen: Side) -> None:
        self.out = Alignment(ref, gen)
        self.groups = itertools.count()

    def run(self) -> Alignment:
        self.out.map_values(self.out.ref.resolved.entry_args, self.out.gen.resolved.entry_args)
        self.region(self.out.ref.entry.body, self.out.gen.entry.body, ())
        return self.out

    def region(self, ref_region: Region, gen_region: Region, context: tuple[str, ...]) -> None:
        for ref_block, gen_block in zip(ref_region.blocks, gen_region.blocks, strict=False):
            self.out.map_values(
                self.out.ref.resolved.block_args[id(ref_block)],
                self.out.gen.resolved.block_args[id(gen_block)],
            )
        ref_ops = self.out.ref.compared_ops(ref_region)
        gen_ops = self.out.gen.compared_ops(gen_region)
        stretches: dict[int, tuple[list[Op], list[Op]]] = {}
        for ref_left, gen_left in self.match_keys(ref_ops, gen_ops, context, self.strong_key):
            stretches.update(self.match_keys_in(ref_left, gen_left, context))
        self.match_moved(stretches, context)
        for group, (ref_left, gen_left) in stretches.items():
            self.match_same_names(ref_left, gen_left, context, group)

    @staticmethod
    def strong_key(op: Op, side: Side) -> str:
        """The op key plus how its operands were computed."""
        return f"{op_key(op)}#{side.operands_hash(op)}"

    @staticmethod
    def weak_key(op: Op, side: Side) -> str:
        return op_key(op)

    def match_keys(
        self,
        ref_ops: list[Op],
        gen_ops: list[Op],
        context: tuple[str, ...],
        key: Callable[[Op, Side], str],
    ) -> list[tuple[list[Op], list[Op]]]:
        """Pair ops in common subsequences of keys; return the differing stretches."""
        ref, gen = self.out.ref, self.out.gen
        matcher = SequenceMatcher(
            None, [key(op, ref) for op in ref_ops], [key(op, gen) for op in gen_ops], autojunk=False
        )
        stretches: list[tuple[list[Op], list[Op]]] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for ref_op, gen_op in zip(ref_ops[i1:i2], gen_ops[j1:j2], strict=True):
                    self.pair(ref_op, gen_op, context, same_key=True)
            else:
                stretches.append((ref_ops[i1:i2], gen_ops[j1:j2]))
        return stretches

    def match_keys_in(
        self, ref_ops: list[Op], gen_ops: list[Op], context: tuple[str, ...]
    ) -> dict[int, tuple[list[Op], list[Op]]]:
        stretches = self.match_keys(ref_ops, gen_ops, context, self.weak_key)
        return {next(self.groups): stretch for stretch in stretches}

    def match_moved(
        self, stretches: dict[int, tuple[list[Op], list[Op]]], context: tuple[str, ...]
    ) -> None:
        """Same key, corresponding operands, different place: still the same op."""
        changed = True
        while changed:
            changed = False
            gen_pool = [(g, op) for g, (_, gens) in stretches.items() for op in gens]
            for group, (refs, _) in stretches.items():
                for ref_op in list(refs):
                    match = self.find_moved(ref_op, gen_pool)
                    if match is None:
                        continue
                    gen_group, gen_op = match
                    refs.remove(ref_op)
                    stretches[gen_group][1].remove(gen_op)
                    gen_pool.remove(match)
                    self.pair(ref_op, gen_op, context, same_key=True, moved=group != gen_group)
                    changed = True

    def find_moved(self, ref_op: Op, pool: list[tuple[int, Op]]) -> tuple[int, Op] | None:
        key = op_key(ref_op)
        for group, gen_op in pool:
            if op_key(gen_op) == key and self.out.operands_correspond(ref_op, gen_op):
                return group, gen_op
        return None

    def match_same_names(
        self, ref_ops: list[Op], gen_ops: list[Op], context: tuple[str, ...], group: int
    ) -> None:
        """Pair same-name ops that share something beyond the name (inputs,
        types), best-scoring first, so that a change in one attribute shows as
        that change; what stays unpaired is reported as unmatched."""
        candidates = []
        for i, ref_op in enumerate(ref_ops):
            for j, gen_op in enumerate(gen_ops):
                score = self.similarity(ref_op, gen_op)
                if score > 0:
                    candidates.append((-score, abs(i - j), i, j))
        taken_ref: set[int] = set()
        taken_gen: set[int] = set()
        for _, _, i, j in sorted(candidates):
            if i not in taken_ref and j not in taken_gen:
                taken_ref.add(i)
                taken_gen.add(j)
                self.pair(ref_ops[i], gen_ops[j], context, same_key=False)
        for i, op in enumerate(ref_ops):
            if i not in taken_ref:
                self.out.unmatched_ref.append(Unmatched(op, context, group))
        for j, op in enumerate(gen_ops):
            if j not in taken_gen:
                self.out.unmatched_gen.append(Unmatched(op, context, group))

    def similarity(self, ref_op: Op, gen_op: Op) -> int:
        """0 when the ops should not be paired; higher is a better pairing."""
        if ref_op.name != gen_op.name or not _compatible(ref_op, gen_op):
            return 0
        ref_descs = self.out.ref.operand_descriptors(ref_op)
        gen_descs = self.out.gen.operand_descriptors(gen_op)
        shared = sum(
            1 for r, g in zip(ref_descs, gen_descs, strict=False) if self.out.corresponds(r, g)
        )
        score = shared + (4 if shared == len(ref_descs) == len(gen_descs) else 0)
        score += 2 if ref_op.result_types == gen_op.result_types else 0
        score += 1 if set(ref_op.attributes) == set(gen_op.attributes) else 0
        return score

    def pair(
        self,
        ref_op: Op,
        gen_op: Op,
        context: tuple[str, ...],
        *,
        same_key: bool,
        moved: bool = False,
    ) -> None:
        self.out.pairs.append(Pair(ref_op, gen_op, context, same_key, moved))
        self.out.map_results(ref_op, gen_op)
        inner = (*context, ref_op.name)
        for ref_region, gen_region in zip(ref_op.regions, gen_op.regions, strict=False):
            self.region(ref_region, gen_region, inner)
        group = next(self.groups)
        for region in ref_op.regions[len(gen_op.regions) :]:
            ops = self.out.ref.compared_ops(region)
            self.out.unmatched_ref.extend(Unmatched(op, inner, group) for op in ops)
        for region in gen_op.regions[len(ref_op.regions) :]:
            ops = self.out.gen.compared_ops(region)
            self.out.unmatched_gen.extend(Unmatched(op, inner, group) for op in ops)


def _compatible(ref_op: Op, gen_op: Op) -> bool:
    """Assumes pair only with assumes of the same kind on the same kind of value."""
    if ref_op.name != "assume":
        return True
    same_kind = ("div_by" in ref_op.attributes) == ("div_by" in gen_op.attributes)
    ref_pointer = "ptr<" in "".join(ref_op.result_types)
    gen_pointer = "ptr<" in "".join(gen_op.result_types)
    return same_kind and ref_pointer == gen_pointer


def align(ref: Side, gen: Side) -> Alignment:
    return _Aligner(ref, gen).run()
