"""The semantically equivalent forms docs/PIPELINE.md accepts, recognised in an
alignment. Each detector explains the ops it accounts for (they produce no
other finding), maps the values they compute, and returns `equivalent`
findings.

- ceil_div: `(a + b - 1) / b` (addi, subi, divi rounding zero/negative_inf)
  vs `divi a, b rounding<positive_inf>`.
- min_select: `mini a, b` (maxi, minf, maxf) vs `cmpi` + `select`, or `cmpi`
  + `if` yielding a / b.
- view_addressing: a view built on an element-offset base pointer (`offset`,
  or a strided view) indexed by zeros vs a partition view indexed by tile
  indices, with the same tile shape, padding and element type.
"""

from __future__ import annotations

from schemas.ir_diff import Finding, OpSite, Severity
from tileir.align import Alignment, Pair, Unmatched
from tileir.categories import finding
from tileir.ir import Op
from tileir.side import Side
from tileir.types import parse_view

MIN_OPS = frozenset({"mini", "minf"})
MAX_OPS = frozenset({"maxi", "maxf"})
LESS = frozenset({"less_than", "less_than_or_equal"})
GREATER = frozenset({"greater_than", "greater_than_or_equal"})
VIEW_MEMORY_OPS = frozenset({"load_view_tko", "store_view_tko"})
ADDRESSING_OPS = frozenset(
    {
        "offset",
        "addi",
        "subi",
        "muli",
        "exti",
        "trunci",
        "assume",
        "make_tensor_view",
        "make_partition_view",
        "make_strided_view",
        "get_tile_block_id",
        "int_to_ptr",
    }
)


class _Sides:
    """Compare values across sides whichever side a pattern starts from."""

    def __init__(self, alignment: Alignment) -> None:
        self.al = alignment

    def side(self, label: str) -> Side:
        return self.al.ref if label == "ref" else self.al.gen

    def other(self, label: str) -> str:
        return "gen" if label == "ref" else "ref"

    def same(self, label: str, value: int, other_value: int) -> bool:
        """Does `value` (on side `label`) correspond to `other_value` (other side)?"""
        mine = self.side(label).descriptor(value)
        theirs = self.side(self.other(label)).descriptor(other_value)
        if label == "ref":
            return self.al.corresponds(mine, theirs)
        return self.al.corresponds(theirs, mine)

    def map(self, label: str, value: int, other_value: int) -> None:
        if label == "ref":
            self.al.value_map[value] = other_value
        else:
            self.al.value_map[other_value] = value

    def producer(self, label: str, value: int) -> Op | None:
        side = self.side(label)
        return side.resolved.producer(side.through_transparent(value))

    def operands(self, label: str, op: Op) -> list[int]:
        return self.side(label).resolved.operand_ids(op)

    def constant(self, label: str, value: int) -> str | None:
        descriptor = self.side(label).descriptor(value)
        return descriptor[2] if descriptor[0] == "const" else None


def _const_int(text: str | None) -> int | None:
    if text is None or ":" not in text:
        return None
    try:
        return int(text.split(":", 1)[1])
    except ValueError:
        return None


def _sites(sides: _Sides, label: str, mine: Op, theirs: Op) -> tuple[OpSite, OpSite]:
    """(reference site, generated site) of two ops found from side `label`."""
    site_mine = sides.side(label).site(mine)
    site_theirs = sides.side(sides.other(label)).site(theirs)
    return (site_mine, site_theirs) if label == "ref" else (site_theirs, site_mine)


# -- ceil-div ---------------------------------------------------------------


def _ceil_div(sides: _Sides, pair: Pair) -> Finding | None:
    ref_round = pair.ref.attributes.get("rounding", "zero")
    gen_round = pair.gen.attributes.get("rounding", "zero")
    if pair.ref.name != "divi" or ref_round == gen_round:
        return None
    if ref_round == "positive_inf":
        builtin, hand, hand_label = pair.ref, pair.gen, "gen"
    elif gen_round == "positive_inf":
        builtin, hand, hand_label = pair.gen, pair.ref, "ref"
    else:
        return None
    builtin_label = sides.other(hand_label)
    numerator, divisor = sides.operands(builtin_label, builtin)[:2]
    parts = _hand_ceil_parts(sides, hand_label, hand, numerator, divisor)
    if parts is None:
        return None
    pair.equivalence = "ceil_div"
    sides.al.explained.update(id(op) for op in parts)
    return finding(
        Severity.EQUIVALENT,
        "ceil_div",
        "divi",
        "hand-written ceil-div (a + b - 1) / b on one side, "
        "divi rounding<positive_inf> on the other",
        ref=sides.al.ref.site(pair.ref),
        gen=sides.al.gen.site(pair.gen),
        ref_attributes={"rounding": ref_round},
        gen_attributes={"rounding": gen_round},
    )


def _hand_ceil_parts(
    sides: _Sides, label: str, hand: Op, numerator: int, divisor: int
) -> list[Op] | None:
    """The addi/subi ops building `numerator + divisor - 1` on the hand side."""
    other = sides.other(label)
    hand_numerator, hand_divisor = sides.operands(label, hand)[:2]
    if not sides.same(label, hand_divisor, divisor):
        return None
    top = sides.producer(label, hand_numerator)
    if top is None:
        return None
    left, right = sides.operands(label, top)[:2]
    if top.name == "subi" and _const_int(sides.constant(label, right)) == 1:
        inner = sides.producer(label, left)
        if inner is not None and inner.name == "addi":
            a, b = sides.operands(label, inner)[:2]
            if _is_pair(sides, label, (a, b), (numerator, divisor)):
                return [top, inner]
    if top.name == "addi":
        for a, rest in ((left, right), (right, left)):
            if not sides.same(label, a, numerator):
                continue
            rest_ops = _divisor_minus_one(sides, label, rest, other, divisor)
            if rest_ops is not None:
                return [top, *rest_ops]
    return None


def _is_pair(sides: _Sides, label: str, mine: tuple[int, int], theirs: tuple[int, int]) -> bool:
    straight = sides.same(label, mine[0], theirs[0]) and sides.same(label, mine[1], theirs[1])
    crossed = sides.same(label, mine[0], theirs[1]) and sides.same(label, mine[1], theirs[0])
    return straight or crossed


def _divisor_minus_one(
    sides: _Sides, label: str, value: int, other: str, divisor: int
) -> list[Op] | None:
    """`value` is divisor - 1: a constant one less, or subi(divisor, 1)."""
    mine = _const_int(sides.constant(label, value))
    theirs = _const_int(sides.constant(other, divisor))
    if mine is not None and theirs is not None:
        return [] if mine == theirs - 1 else None
    producer = sides.producer(label, value)
    if producer is None or producer.name != "subi":
        return None
    base, one = sides.operands(label, producer)[:2]
    if _const_int(sides.constant(label, one)) == 1 and sides.same(label, base, divisor):
        return [producer]
    return None


# -- min/max as compare + select/if ----------------------------------------------


def _min_select(
    sides: _Sides, label: str, candidate: Unmatched, pool: list[Unmatched]
) -> Finding | None:
    op = candidate.op
    a, b = sides.operands(label, op)[:2]
    other = sides.other(label)
    for entry in pool:
        choice = entry.op
        if id(choice) in sides.al.explained or choice.name not in ("select", "if"):
            continue
        compare = _picks_extreme(sides, other, choice, op.name in MIN_OPS, (a, b), label)
        if compare is None:
            continue
        sides.map(
            label,
            sides.side(label).resolved.result_ids(op)[0],
            sides.side(other).resolved.result_ids(choice)[0],
        )
        sides.al.explained.update({id(op), id(choice), id(compare)})
        ref_site, gen_site = _sites(sides, label, op, choice)
        return finding(
            Severity.EQUIVALENT,
            "min_select",
            op.name,
            f"`{op.name}` on one side, compare + `{choice.name}` on the other",
            ref=ref_site,
            gen=gen_site,
        )
    return None


def _picks_extreme(
    sides: _Sides, label: str, choice: Op, want_min: bool, extremes: tuple[int, int], other: str
) -> Op | None:
    """The compare op if `choice` (on side `label`) selects min/max of the
    values corresponding to `extremes` (on side `other`)."""
    picked = _choice_values(sides, label, choice)
    if picked is None:
        return None
    condition, when_true, when_false = picked
    compare = sides.producer(label, condition)
    if compare is None or compare.name not in ("cmpi", "cmpf"):
        return None
    lhs, rhs = sides.operands(label, compare)[:2]
    predicate = compare.attributes.get("comparison_predicate", "")
    if predicate in (LESS if want_min else GREATER):
        expected = (lhs, rhs)
    elif predicate in (GREATER if want_min else LESS):
        expected = (rhs, lhs)
    else:
        return None
    if (when_true, when_false) != expected:
        return None
    if not _is_pair(sides, label, (lhs, rhs), extremes):
        return None
    return compare


def _choice_values(sides: _Sides, label: str, choice: Op) -> tuple[int, int, int] | None:
    operands = sides.operands(label, choice)
    if choice.name == "select" and len(operands) == 3:
        return operands[0], operands[1], operands[2]
    if choice.name != "if" or len(choice.regions) != 2 or len(choice.results) != 1:
        return None
    yields = [_single_yield(sides, label, region.ops) for region in choice.regions]
    if yields[0] is None or yields[1] is None:
        return None
    return operands[0], yields[0], yields[1]


def _single_yield(sides: _Sides, label: str, ops: list[Op]) -> int | None:
    real = [op for op in ops if op.name != "constant"]
    if len(real) != 1 or real[0].name != "yield" or len(real[0].operands) != 1:
        return None
    return sides.operands(label, real[0])[0]


# -- view addressing -----------------------------------------------------------


def _view_type(op: Op) -> str | None:
    index = 0 if op.name == "load_view_tko" else 1
    return op.operand_types[index] if len(op.operand_types) > index else None


def _view_addressing(sides: _Sides, pair: Pair) -> Finding | None:
    al = sides.al
    if pair.ref.name not in VIEW_MEMORY_OPS or pair.equivalence is not None:
        return None
    ref_view = parse_view(_view_type(pair.ref) or "")
    gen_view = parse_view(_view_type(pair.gen) or "")
    if ref_view is None or gen_view is None:
        return None
    if (ref_view.tile_shape, ref_view.padding) != (gen_view.tile_shape, gen_view.padding):
        return None
    same_kind = ref_view.kind == gen_view.kind
    if same_kind and al.operands_correspond(pair.ref, pair.gen):
        return None
    ref_slice = al.ref.backward_slice(al.ref.resolved.operand_ids(pair.ref))
    gen_slice = al.gen.backward_slice(al.gen.resolved.operand_ids(pair.gen))
    offsets = {"offset", "make_strided_view"} & {op.name for op in ref_slice + gen_slice}
    if same_kind and not offsets:
        return None
    unmatched = _unmatched_in(al, ref_slice, gen_slice)
    if any(op.name not in ADDRESSING_OPS for op in unmatched):
        return None
    _explain_slices(al, pair, ref_slice, gen_slice, unmatched)
    return finding(
        Severity.EQUIVALENT,
        "view_addressing",
        pair.ref.name,
        "the same tile addressed through an element-offset (or strided) view on one side "
        "and partition-view tile indices on the other",
        ref=al.ref.site(pair.ref),
        gen=al.gen.site(pair.gen),
        ref_attributes={"view": ref_view.kind, "tile": "x".join(ref_view.tile_shape)},
        gen_attributes={"view": gen_view.kind, "tile": "x".join(gen_view.tile_shape)},
    )


def _unmatched_in(al: Alignment, ref_slice: list[Op], gen_slice: list[Op]) -> list[Op]:
    unmatched = {id(u.op) for u in al.unmatched_ref + al.unmatched_gen}
    return [op for op in ref_slice + gen_slice if id(op) in unmatched]


def _explain_slices(
    al: Alignment, pair: Pair, ref_slice: list[Op], gen_slice: list[Op], unmatched: list[Op]
) -> None:
    pair.equivalence = "view_addressing"
    al.explained.update(id(op) for op in unmatched)
    ref_ids = {id(op) for op in ref_slice}
    gen_ids = {id(op) for op in gen_slice}
    for other in al.pairs:
        if id(other.ref) in ref_ids and id(other.gen) in gen_ids:
            other.explained_operands.update(range(len(other.ref.operands)))


# -- driver -----------------------------------------------------------------------


def detect(alignment: Alignment) -> list[Finding]:
    sides = _Sides(alignment)
    found: list[Finding] = []
    for pair in alignment.pairs:
        hit = _ceil_div(sides, pair)
        if hit is not None:
            found.append(hit)
    for label in ("ref", "gen"):
        mine = alignment.unmatched_ref if label == "ref" else alignment.unmatched_gen
        theirs = alignment.unmatched_gen if label == "ref" else alignment.unmatched_ref
        for candidate in mine:
            if (
                candidate.op.name in MIN_OPS | MAX_OPS
                and id(candidate.op) not in alignment.explained
            ):
                hit = _min_select(sides, label, candidate, theirs)
                if hit is not None:
                    found.append(hit)
    for pair in alignment.pairs:
        hit = _view_addressing(sides, pair)
        if hit is not None:
            found.append(hit)
    alignment.still_unmatched()
    return found
