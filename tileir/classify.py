"""Turn an alignment into findings: what changed on paired ops (attributes,
types, operands) and what has no counterpart, classified as docs/PIPELINE.md says."""

from __future__ import annotations

from collections.abc import Iterator

from schemas.ir_diff import Finding, Severity
from tileir import attrs
from tileir.align import Alignment, Pair, Unmatched
from tileir.categories import finding
from tileir.ir import Op
from tileir.side import Side
from tileir.types import TileType, ViewType, is_pointer_type, parse_tile, parse_view

CRIT, WARN, NOISE = Severity.CRITICAL, Severity.WARN, Severity.NOISE

MEMORY_OPS = frozenset(
    {
        "load_view_tko",
        "store_view_tko",
        "load_ptr_tko",
        "store_ptr_tko",
        "atomic_rmw_tko",
        "atomic_cas_tko",
        "atomic_red_view_tko",
    }
)
MMA_OPS = frozenset({"mmaf", "mmai", "mmaf_scaled"})
REDUCTION_OPS = frozenset({"reduce", "scan"})
COUNTED_MATH_OPS = frozenset({"exp", "exp2", "rsqrt", "fma"})
CONTROL_OPS = frozenset({"for", "loop", "if", "break", "continue", "yield", "return"})
SHAPE_OPS = frozenset({"permute", "extract", "cat", "insert"})
PLUMBING_OPS = frozenset({"reshape", "broadcast"})
CONVERSION_OPS = frozenset({"ftof", "itof", "ftoi", "bitcast", "pack", "unpack"})
INTEGER_OPS = frozenset(
    {
        "addi",
        "subi",
        "muli",
        "divi",
        "remi",
        "mini",
        "maxi",
        "andi",
        "ori",
        "xori",
        "shli",
        "shri",
        "cmpi",
        "select",
        "negi",
        "absi",
        "mulhii",
        "exti",
        "trunci",
        "offset",
        "int_to_ptr",
        "ptr_to_int",
        "ptr_to_ptr",
        "iota",
    }
)
VIEW_OPS = frozenset(
    {"make_tensor_view", "make_partition_view", "make_strided_view", "get_index_space_shape"}
)
GRID_OPS = frozenset({"get_tile_block_id", "get_num_tile_blocks"})
TOKEN_OPS = frozenset({"make_token", "join_tokens"})
DEBUG_OPS = frozenset({"print", "assert"})
LOOP_BOUND_OPERANDS = 3  # for: lower bound, upper bound, step


def describe(op: Op) -> dict[str, str]:
    """The attributes worth showing for an op: its own, plus its types."""
    shown = {k: v for k, v in op.attributes.items() if v != "%_"}
    if op.result_types:
        shown["type"] = ", ".join(attrs.squash(t) for t in op.result_types)
    return shown


def _in_reduction(context: tuple[str, ...]) -> bool:
    return any(name in REDUCTION_OPS for name in context)


# -- ops with no counterpart ----------------------------------------------------


def unmatched_category(op: Op, label: str, side: Side) -> tuple[Severity, str]:
    name = op.name
    if name in MEMORY_OPS:
        return CRIT, "memory_op_family"
    if name in MMA_OPS:
        return CRIT, "mma"
    if name in REDUCTION_OPS:
        return CRIT, "reduction"
    if name in COUNTED_MATH_OPS:
        return CRIT, "math_op_count"
    if name in CONTROL_OPS:
        return CRIT, "loop_structure"
    if name == "assume":
        return _assume_category(op, label)
    if name in SHAPE_OPS:
        return CRIT, "tile_shape"
    if name in CONVERSION_OPS:
        return CRIT, "conversion"
    return _minor_category(name)


def _minor_category(name: str) -> tuple[Severity, str]:
    table = (
        (PLUMBING_OPS, "shape_plumbing"),
        (INTEGER_OPS, "arith_drift"),
        (VIEW_OPS, "view_setup"),
        (GRID_OPS, "grid_indexing"),
        (TOKEN_OPS, "token_order"),
        (DEBUG_OPS, "debug_ops"),
    )
    for names, category in table:
        if name in names:
            return WARN, category
    if name.endswith("f") or name in ("exp", "log", "log2", "tanh", "sqrt", "pow", "atan2"):
        return CRIT, "float_arith"
    return CRIT, "other"


def _assume_category(op: Op, label: str) -> tuple[Severity, str]:
    value_type = op.result_types[0] if op.result_types else ""
    if "div_by" in op.attributes:
        if is_pointer_type(value_type):
            return CRIT, "pointer_assume"
        # A divisibility the reference does not claim may be false: critical.
        return (CRIT if label == "gen" else WARN), "scalar_assume_on_runtime_dim"
    return WARN, "assume_bounds"


def unmatched_findings(al: Alignment) -> Iterator[Finding]:
    family_pairs = _memory_family_pairs(al)
    paired = {id(op) for pair in family_pairs for op in pair}
    for ref_op, gen_op in family_pairs:
        yield finding(
            CRIT,
            "memory_op_family",
            ref_op.name,
            f"memory access `{ref_op.name}` in the reference is `{gen_op.name}` "
            "in the generated IR",
            ref=al.ref.site(ref_op),
            gen=al.gen.site(gen_op),
            ref_attributes=describe(ref_op),
            gen_attributes=describe(gen_op),
        )
    counts = {"ref": _math_counts(al.ref), "gen": _math_counts(al.gen)}
    for label, items in (("ref", al.unmatched_ref), ("gen", al.unmatched_gen)):
        side = al.ref if label == "ref" else al.gen
        drift: dict[int, list[Op]] = {}
        for item in items:
            if id(item.op) in paired:
                continue
            if unmatched_category(item.op, label, side) == (WARN, "arith_drift"):
                drift.setdefault(item.group, []).append(item.op)
            else:
                yield _unmatched_finding(item, label, side, counts)
        for ops in drift.values():
            yield _drift_finding(ops, label, side)


def _drift_finding(ops: list[Op], label: str, side: Side) -> Finding:
    """One note per stretch of index arithmetic with no counterpart."""
    where = "the reference" if label == "ref" else "the generated IR"
    names = ", ".join(op.name for op in ops)
    site = side.site(ops[0])
    shown = {"ops": names}
    return finding(
        WARN,
        "arith_drift",
        ops[0].name,
        f"{len(ops)} integer op(s) in {where} with no counterpart: {names}",
        ref=site if label == "ref" else None,
        gen=site if label == "gen" else None,
        ref_attributes=shown if label == "ref" else None,
        gen_attributes=shown if label == "gen" else None,
    )


def _unmatched_finding(
    item: Unmatched, label: str, side: Side, counts: dict[str, dict[str, int]]
) -> Finding:
    op = item.op
    severity, category = unmatched_category(op, label, side)
    if _in_reduction(item.context):
        category = "reduction"
    where = "the reference" if label == "ref" else "the generated IR"
    message = f"`{op.name}` in {where} has no counterpart on the other side"
    shown = describe(op)
    if op.name in COUNTED_MATH_OPS:
        message = (
            f"{op.name} count differs: reference {counts['ref'].get(op.name, 0)}, "
            f"generated {counts['gen'].get(op.name, 0)}"
        )
    nested = sum(1 for _ in op.walk()) - 1
    if nested:
        message += f" (with {nested} ops inside)"
    site = side.site(op)
    return finding(
        severity,
        category,
        op.name,
        message,
        ref=site if label == "ref" else None,
        gen=site if label == "gen" else None,
        ref_attributes=shown if label == "ref" else None,
        gen_attributes=shown if label == "gen" else None,
    )


def _math_counts(side: Side) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in side.all_ops():
        if op.name in COUNTED_MATH_OPS:
            counts[op.name] = counts.get(op.name, 0) + 1
    return counts


def _direction(name: str) -> str:
    return "load" if name.startswith("load") else "store" if name.startswith("store") else name


def _memory_family_pairs(al: Alignment) -> list[tuple[Op, Op]]:
    """Unmatched memory ops of the same stretch and direction, different family."""
    pairs: list[tuple[Op, Op]] = []
    taken: set[int] = set()
    for ref_item in al.unmatched_ref:
        if ref_item.op.name not in MEMORY_OPS:
            continue
        for gen_item in al.unmatched_gen:
            gen_op = gen_item.op
            if (
                gen_op.name in MEMORY_OPS
                and id(gen_op) not in taken
                and gen_item.group == ref_item.group
                and _direction(gen_op.name) == _direction(ref_item.op.name)
            ):
                pairs.append((ref_item.op, gen_op))
                taken.add(id(gen_op))
                break
    return pairs


# -- paired ops that differ -------------------------------------------------------


def pair_findings(al: Alignment) -> Iterator[Finding]:
    mapped_gen = set(al.value_map.values())
    for pair in al.pairs:
        if pair.equivalence is not None:
            continue
        if pair.moved:
            yield _pair_finding(al, pair, NOISE, "op_order", "the op sits elsewhere, same inputs")
        if not pair.same_key:
            yield from _attribute_findings(al, pair)
            yield from _type_findings(al, pair)
        yield from _operand_findings(al, pair, mapped_gen)


def _pair_finding(
    al: Alignment,
    pair: Pair,
    severity: Severity,
    category: str,
    message: str,
    ref_attributes: dict[str, str] | None = None,
    gen_attributes: dict[str, str] | None = None,
) -> Finding:
    if _in_reduction(pair.context) and severity is CRIT:
        category = "reduction"
    return finding(
        severity,
        category,
        pair.ref.name,
        message,
        ref=al.ref.site(pair.ref),
        gen=al.gen.site(pair.gen),
        ref_attributes=ref_attributes,
        gen_attributes=gen_attributes,
    )


def _attribute_findings(al: Alignment, pair: Pair) -> Iterator[Finding]:
    ref_attrs, gen_attrs = pair.ref.attributes, pair.gen.attributes
    for key in sorted(set(ref_attrs) | set(gen_attrs)):
        ref_value, gen_value = ref_attrs.get(key, "absent"), gen_attrs.get(key, "absent")
        if ref_value == gen_value:
            continue
        if key == "optimization_hints":
            yield from _op_hint_findings(al, pair, ref_value, gen_value)
            continue
        severity, category = attribute_rule(pair.ref, key, ref_value, gen_value)
        yield _pair_finding(
            al,
            pair,
            severity,
            category,
            f"`{pair.ref.name}` {key}: reference {ref_value}, generated {gen_value}",
            {key: ref_value},
            {key: gen_value},
        )


ATTRIBUTE_CATEGORIES = {
    "flush_to_zero": (CRIT, "flush_to_zero"),
    "rounding": (CRIT, "rounding_mode"),
    "rounding_mode": (CRIT, "rounding_mode"),
    "dim": (CRIT, "reduction"),
    "identities": (CRIT, "reduction"),
    "reverse": (CRIT, "reduction"),
    "memory_ordering": (CRIT, "memory_ordering"),
    "memory_scope": (CRIT, "memory_ordering"),
    "signedness": (CRIT, "signedness"),
    "comparison_predicate": (CRIT, "comparison"),
    "comparison_ordering": (CRIT, "comparison"),
    "mode": (CRIT, "atomic"),
    "propagate_nan": (CRIT, "float_arith"),
    "overflow": (WARN, "arith_drift"),
    "shape": (WARN, "layout_attrs"),
    "strides": (WARN, "layout_attrs"),
    "permutation": (CRIT, "tile_shape"),
    "token": (WARN, "token_order"),
    "bounded": (WARN, "assume_bounds"),
}


def attribute_rule(op: Op, key: str, ref_value: str, gen_value: str) -> tuple[Severity, str]:
    if key == "div_by":
        return _div_by_rule(op, ref_value, gen_value)
    return ATTRIBUTE_CATEGORIES.get(key, (CRIT, "other"))


def _divisor(text: str) -> int:
    try:
        return int(text.split(",")[0].split()[0])
    except (ValueError, IndexError):
        return 1


def _div_by_rule(op: Op, ref_value: str, gen_value: str) -> tuple[Severity, str]:
    value_type = op.result_types[0] if op.result_types else ""
    if is_pointer_type(value_type):
        return CRIT, "pointer_assume"
    ref_div, gen_div = _divisor(ref_value), _divisor(gen_value)
    # A claim the reference's does not imply can be false at run time.
    stronger = ref_div % gen_div != 0
    return (CRIT if stronger else WARN), "scalar_assume_on_runtime_dim"


def _op_hint_findings(al: Alignment, pair: Pair, ref_text: str, gen_text: str) -> Iterator[Finding]:
    ref_hints, gen_hints = attrs.hint_entries(ref_text), attrs.hint_entries(gen_text)
    for key in sorted(set(ref_hints) | set(gen_hints)):
        ref_value, gen_value = ref_hints.get(key, "absent"), gen_hints.get(key, "absent")
        if ref_value == gen_value:
            continue
        name = key.split(".")[-1]
        severity, category = (
            (CRIT, "tma")
            if name == "allow_tma"
            else (WARN, "latency_hint")
            if name == "latency"
            else (CRIT, "optimization_hints")
        )
        yield _pair_finding(
            al,
            pair,
            severity,
            category,
            f"`{pair.ref.name}` hint {key}: reference {ref_value}, generated {gen_value}",
            {key: ref_value},
            {key: gen_value},
        )


def _type_findings(al: Alignment, pair: Pair) -> Iterator[Finding]:
    ref_types = pair.ref.operand_types + pair.ref.result_types
    gen_types = pair.gen.operand_types + pair.gen.result_types
    if len(ref_types) != len(gen_types):
        yield _pair_finding(
            al,
            pair,
            CRIT,
            "dtype",
            f"`{pair.ref.name}` signature differs",
            {"types": ", ".join(ref_types)},
            {"types": ", ".join(gen_types)},
        )
        return
    for ref_type, gen_type in zip(ref_types, gen_types, strict=True):
        if attrs.squash(ref_type) != attrs.squash(gen_type):
            yield from _one_type_findings(al, pair, ref_type, gen_type)


def _one_type_findings(
    al: Alignment, pair: Pair, ref_type: str, gen_type: str
) -> Iterator[Finding]:
    ref_view, gen_view = parse_view(ref_type), parse_view(gen_type)
    if ref_view is not None and gen_view is not None:
        for severity, category, what, ref_value, gen_value in _view_differences(ref_view, gen_view):
            yield _pair_finding(
                al,
                pair,
                severity,
                category,
                f"`{pair.ref.name}` {what}: reference {ref_value}, generated {gen_value}",
                {what: ref_value},
                {what: gen_value},
            )
        return
    ref_tile, gen_tile = parse_tile(ref_type), parse_tile(gen_type)
    for severity, category, what, ref_value, gen_value in _tile_differences(
        pair.ref.name, ref_tile, gen_tile, ref_type, gen_type
    ):
        yield _pair_finding(
            al,
            pair,
            severity,
            category,
            f"`{pair.ref.name}` {what}: reference {ref_value}, generated {gen_value}",
            {what: ref_value},
            {what: gen_value},
        )


Difference = tuple[Severity, str, str, str, str]


def _view_differences(ref: ViewType, gen: ViewType) -> Iterator[Difference]:
    if ref.kind != gen.kind:
        yield CRIT, "memory_op_family", "view kind", ref.kind, gen.kind
    if ref.padding != gen.padding:
        yield CRIT, "padding_value", "padding_value", ref.padding, gen.padding
    if ref.tile_shape != gen.tile_shape:
        yield CRIT, "tile_shape", "tile shape", "x".join(ref.tile_shape), "x".join(gen.tile_shape)
    if ref.dim_map != gen.dim_map:
        yield CRIT, "tile_shape", "dim_map", ref.dim_map, gen.dim_map
    ref_tv, gen_tv = ref.tensor_view, gen.tensor_view
    if ref_tv is not None and gen_tv is not None:
        if ref_tv.element != gen_tv.element:
            yield CRIT, "dtype", "element type", ref_tv.element, gen_tv.element
        if (ref_tv.shape, ref_tv.strides) != (gen_tv.shape, gen_tv.strides):
            yield (
                WARN,
                "layout_attrs",
                "tensor view layout",
                f"{'x'.join(ref_tv.shape)} strides [{','.join(ref_tv.strides)}]",
                f"{'x'.join(gen_tv.shape)} strides [{','.join(gen_tv.strides)}]",
            )


def _tile_differences(
    op_name: str, ref: TileType | None, gen: TileType | None, ref_text: str, gen_text: str
) -> Iterator[Difference]:
    if ref is None or gen is None:
        yield CRIT, "dtype", "type", attrs.squash(ref_text), attrs.squash(gen_text)
        return
    if ref.shape != gen.shape:
        category = "mma" if op_name in MMA_OPS else "tile_shape"
        yield CRIT, category, "tile shape", ref.shape_text, gen.shape_text
    if ref.element != gen.element:
        category = "mma" if op_name in MMA_OPS else "dtype"
        yield CRIT, category, "element type", ref.element, gen.element


def _operand_findings(al: Alignment, pair: Pair, mapped_gen: set[int]) -> Iterator[Finding]:
    ref_ids = al.ref.resolved.operand_ids(pair.ref)
    gen_ids = al.gen.resolved.operand_ids(pair.gen)
    if len(ref_ids) != len(gen_ids):
        if pair.same_key:
            yield _pair_finding(
                al,
                pair,
                CRIT,
                "dataflow",
                f"`{pair.ref.name}` takes a different number of operands",
            )
        return
    for index, (ref_value, gen_value) in enumerate(zip(ref_ids, gen_ids, strict=True)):
        if index in pair.explained_operands:
            continue
        ref_desc, gen_desc = al.ref.descriptor(ref_value), al.gen.descriptor(gen_value)
        if al.corresponds(ref_desc, gen_desc):
            continue
        hit = _operand_mismatch(al, pair, index, ref_desc, gen_desc, mapped_gen)
        if hit is not None:
            yield hit


def _operand_mismatch(
    al: Alignment,
    pair: Pair,
    index: int,
    ref_desc: tuple[str, ...],
    gen_desc: tuple[str, ...],
    mapped_gen: set[int],
) -> Finding | None:
    shown_ref, shown_gen = _operand_text(ref_desc), _operand_text(gen_desc)
    if pair.ref.name == "for" and index < LOOP_BOUND_OPERANDS:
        which = ("lower bound", "upper bound", "step")[index]
        return _pair_finding(
            al,
            pair,
            CRIT,
            "loop_structure",
            f"loop {which}: reference {shown_ref}, generated {shown_gen}",
            {which: shown_ref},
            {which: shown_gen},
        )
    both_values = ref_desc[0] == "val" and gen_desc[0] == "val"
    if both_values and (int(ref_desc[1]) not in al.value_map or int(gen_desc[1]) not in mapped_gen):
        return None  # the producer differs and is reported where it is
    category = "constant_value" if "const" in (ref_desc[0], gen_desc[0]) else "dataflow"
    return _pair_finding(
        al,
        pair,
        CRIT,
        category,
        f"`{pair.ref.name}` operand {index}: reference {shown_ref}, generated {shown_gen}",
        {f"operand {index}": shown_ref},
        {f"operand {index}": shown_gen},
    )


def _operand_text(descriptor: tuple[str, ...]) -> str:
    if descriptor[0] == "const":
        return f"constant {descriptor[2]}"
    return "a computed value"
