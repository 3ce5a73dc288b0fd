"""Finding categories: who owns each, its usual root cause, and the fix to name.

The severity of a finding is decided where it is found (the same category can
be critical one way and a warning the other, e.g. a scalar `div_by` the
generated side adds vs one it lacks); owner and root cause come from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.ir_diff import Finding, OpSite, Owner, RootCause, Severity


@dataclass(frozen=True)
class Category:
    owner: Owner
    root_cause: RootCause
    fix: str


K, H, C = Owner.KERNEL, Owner.HOST, Owner.COMPILER
BUG, DSL, EQ = RootCause.KERNEL_BUG, RootCause.DSL_LIMITATION, RootCause.SEMANTIC_EQUIVALENCE

CATEGORIES: dict[str, Category] = {
    "memory_op_family": Category(
        K,
        BUG,
        "use the reference's memory API: partition-view (TMA) loads/stores "
        "vs pointer gather/scatter",
    ),
    "memory_ordering": Category(K, BUG, "use the reference's memory ordering and scope"),
    "mma": Category(K, BUG, "match the mma operand and accumulator dtypes"),
    "reduction": Category(K, BUG, "match the reduction kind, axis and identity"),
    "math_op_count": Category(
        K, BUG, "express the math the way the reference does (exp vs exp2, rsqrt, fma contraction)"
    ),
    "loop_structure": Category(K, BUG, "reproduce the reference's loops, bounds and branches"),
    "tile_shape": Category(
        K, BUG, "use the reference's tile shapes (a const generic, not a literal)"
    ),
    "padding_value": Category(K, BUG, "use the reference's padding (neg_inf vs zero) on the view"),
    "flush_to_zero": Category(K, BUG, "set flush_to_zero exactly where the reference does"),
    "rounding_mode": Category(K, BUG, "use the reference's rounding mode"),
    "tma": Category(K, BUG, "match allow_tma on the load/store"),
    "optimization_hints": Category(
        H, BUG, "set the reference's occupancy / num_cta_in_cga hints (launch compile options)"
    ),
    "pointer_assume": Category(
        H, BUG, "give the same base-pointer alignment facts (spec_args) as the reference launch"
    ),
    "scalar_assume_on_runtime_dim": Category(
        H, BUG, "give the same shape/stride divisibility facts (spec_args) as the reference launch"
    ),
    "entry_signature": Category(
        H, BUG, "pass the same kernel parameters (arrays, ranks, index types)"
    ),
    "dtype": Category(K, BUG, "use the reference's element types"),
    "conversion": Category(K, BUG, "convert dtypes where the reference does"),
    "float_arith": Category(K, BUG, "reproduce the reference's floating-point arithmetic"),
    "signedness": Category(K, BUG, "use the reference's signedness"),
    "comparison": Category(K, BUG, "use the reference's comparison predicate"),
    "constant_value": Category(K, BUG, "use the reference's constant (a const generic?)"),
    "dataflow": Category(K, BUG, "feed the op the same inputs as the reference"),
    "atomic": Category(K, BUG, "use the reference's atomic operation"),
    "other": Category(K, BUG, "reproduce the reference's op"),
    "arith_drift": Category(K, BUG, "index arithmetic differs; same result expected, check SASS"),
    "shape_plumbing": Category(K, DSL, "reshape/broadcast placement differs; check SASS"),
    "view_setup": Category(
        K, BUG, "view construction differs; check the views feed the same accesses"
    ),
    "grid_indexing": Category(K, BUG, "block-id / grid-size queries differ"),
    "latency_hint": Category(K, BUG, "match the latency hint of the load/store"),
    "layout_attrs": Category(H, BUG, "give the same static shapes/strides as the reference"),
    "block_swizzle": Category(
        K, BUG, "reproduce the reference's block swizzle (grouped tile order)"
    ),
    "assume_bounds": Category(H, BUG, "give the same bounds facts as the reference"),
    "token_order": Category(C, DSL, "memory-token plumbing differs (front-end lowering)"),
    "debug_ops": Category(K, BUG, "remove or add print/assert as the reference does"),
    "unclassified": Category(
        K, BUG, "canonical forms differ in a way no rule names; read the diff"
    ),
    "ceil_div": Category(Owner.EQUIVALENCE, EQ, ""),
    "min_select": Category(Owner.EQUIVALENCE, EQ, ""),
    "view_addressing": Category(Owner.EQUIVALENCE, EQ, ""),
    "dead_constant": Category(Owner.EQUIVALENCE, EQ, ""),
    "nonneg_assume": Category(Owner.EQUIVALENCE, EQ, ""),
    "trivial_assume": Category(Owner.EQUIVALENCE, EQ, ""),
    "constant_placement": Category(Owner.EQUIVALENCE, EQ, ""),
    "op_order": Category(Owner.EQUIVALENCE, EQ, ""),
}


def finding(
    severity: Severity,
    category: str,
    op: str,
    message: str,
    *,
    ref: OpSite | None = None,
    gen: OpSite | None = None,
    ref_attributes: dict[str, str] | None = None,
    gen_attributes: dict[str, str] | None = None,
) -> Finding:
    info = CATEGORIES[category]
    benign = severity in (Severity.EQUIVALENT, Severity.NOISE)
    return Finding(
        severity=severity,
        category=category,
        op=op,
        message=message,
        ref=ref,
        gen=gen,
        ref_attributes=ref_attributes or {},
        gen_attributes=gen_attributes or {},
        owner=Owner.EQUIVALENCE if benign else info.owner,
        root_cause=RootCause.SEMANTIC_EQUIVALENCE if benign else info.root_cause,
        fix="" if benign else info.fix,
    )
