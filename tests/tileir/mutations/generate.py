"""Write the mutation suite: single-point edits of the fixture IRs, each with
the findings the diff must report. Run it after regenerating the fixtures:

    python tests/tileir/mutations/generate.py

Each written file starts with `// MUTATION:`, `// BASE:` and `// EXPECT...`
comment lines and holds the mutated IR; test_ir_mutations.py diffs the base
against it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"


@dataclass(frozen=True)
class Edit:
    """Replace `old` by `new`; `old` must occur exactly `count` times."""

    old: str
    new: str
    count: int = 1


@dataclass(frozen=True)
class Mutation:
    name: str
    base: str
    description: str
    expect: list[str]
    edits: list[Edit] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)  # further header lines (EXPECT-NOT, ...)


MUTATIONS = [
    Mutation(
        "padding_neg_inf_to_zero",
        "softmax",
        "padding neg_inf -> zero on the row load",
        ["critical padding_value"],
        [Edit("padding_value = neg_inf", "padding_value = zero", 2)],
    ),
    Mutation(
        "flush_to_zero_dropped",
        "online_softmax",
        "exp2 flush_to_zero -> exp2",
        ["critical flush_to_zero"],
        [Edit("%4 = exp2 %3 flush_to_zero :", "%4 = exp2 %3 :")],
    ),
    Mutation(
        "flush_to_zero_added",
        "rmsnorm",
        "rsqrt -> rsqrt flush_to_zero",
        ["critical flush_to_zero"],
        [Edit("%3 = rsqrt %2 :", "%3 = rsqrt %2 flush_to_zero :")],
    ),
    Mutation(
        "rounding_dropped",
        "layernorm",
        "addf rounding<zero> -> addf (nearest even)",
        ["critical rounding_mode"],
        [Edit(" rounding<zero> :", " :")],
    ),
    Mutation(
        "rounding_approx_to_full",
        "online_softmax",
        "divf rounding<approx> -> rounding<full>",
        ["critical rounding_mode"],
        [Edit("rounding<approx>", "rounding<full>")],
    ),
    Mutation(
        "tile_shape_halved",
        "softmax",
        "row tile 1x1024 -> 1x512 on the load",
        ["critical tile_shape"],
        [
            Edit("tile=(1x1024), padding_value", "tile=(1x512), padding_value", 2),
            Edit("-> tile<1x1024xf32>, token", "-> tile<1x512xf32>, token"),
        ],
    ),
    Mutation(
        "reduce_identity",
        "softmax",
        "max-reduce identity -inf -> 0.0",
        ["critical reduction"],
        [Edit("identities=[0xFF800000 : f32]", "identities=[0x00000000 : f32]")],
    ),
    Mutation(
        "reduce_axis",
        "softmax",
        "max-reduce dim=1 -> dim=0",
        ["critical reduction"],
        [
            Edit(
                "%reduce = reduce %tile dim=1 identities=[0xFF800000 : f32] : "
                "tile<1x1024xf32> -> tile<1xf32>",
                "%reduce = reduce %tile dim=0 identities=[0xFF800000 : f32] : "
                "tile<1x1024xf32> -> tile<1024xf32>",
            )
        ],
    ),
    Mutation(
        "reduce_kind",
        "softmax",
        "max-reduce combiner maxf -> minf",
        ["critical reduction"],
        [Edit("%5 = maxf %reduce_lhs", "%5 = minf %reduce_lhs")],
    ),
    Mutation(
        "view_load_to_pointer_load",
        "softmax",
        "partition-view load -> pointer load (memory-op family)",
        ["critical memory_op_family"],
        [
            Edit(
                "%tile, %result_token = load_view_tko weak %pview[%blockId_x, %cst_0_i32] "
                "token = %0 : partition_view<tile=(1x1024), padding_value = neg_inf, "
                "tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<1x1024xf32>, token",
                "%tile, %result_token = load_ptr_tko weak %assume token=%0 : "
                "tile<ptr<f32>> -> tile<1x1024xf32>, token",
            )
        ],
    ),
    Mutation(
        "mma_accumulator_f16",
        "matmul",
        "mma accumulator f32 -> f16",
        ["critical mma"],
        [
            Edit(
                "%4 = mmaf %tile, %tile_26, %iterArg0 : tile<128x64xf16>, tile<64x128xf16>, "
                "tile<128x128xf32>",
                "%4 = mmaf %tile, %tile_26, %iterArg0 : tile<128x64xf16>, tile<64x128xf16>, "
                "tile<128x128xf16>",
            )
        ],
    ),
    Mutation(
        "pointer_assume_removed",
        "softmax",
        "assume div_by<16> on the input base pointer removed",
        ["critical pointer_assume"],
        [
            Edit("  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>\n", ""),
            Edit("%tview = make_tensor_view %assume,", "%tview = make_tensor_view %arg0,"),
        ],
    ),
    Mutation(
        "scalar_assume_added",
        "softmax",
        "assume div_by<16> added on the runtime row length",
        ["critical scalar_assume_on_runtime_dim"],
        [
            Edit(
                "  %assume_5 = assume bounded<0, ?>, %arg2 : tile<i32>\n",
                "  %assume_5 = assume bounded<0, ?>, %arg2 : tile<i32>\n"
                "  %assume_div = assume div_by<16>, %assume_5 : tile<i32>\n",
            ),
            Edit("shape = [%assume_4, %assume_5]", "shape = [%assume_4, %assume_div]"),
        ],
    ),
    Mutation(
        "loop_bound",
        "rmsnorm",
        "first chunk loop runs 8 chunks instead of 4",
        ["critical loop_structure"],
        [
            Edit(
                "%cst_4_i32 = constant <i32: 4> : tile<i32>",
                "%cst_4_i32 = constant <i32: 8> : tile<i32>",
            )
        ],
    ),
    Mutation(
        "occupancy_hint",
        "rmsnorm",
        "entry hint occupancy 2 -> 4",
        ["critical optimization_hints"],
        [
            Edit(
                "optimization_hints=<default = {occupancy = 2}>",
                "optimization_hints=<default = {occupancy = 4}>",
            )
        ],
    ),
    Mutation(
        "cta_cluster_hint_dropped",
        "matmul",
        "entry hint num_cta_in_cga 2 dropped",
        ["critical optimization_hints"],
        [
            Edit(
                "optimization_hints=<default = {num_cta_in_cga = 2}>",
                "optimization_hints=<default = {}>",
            )
        ],
    ),
    Mutation(
        "tma_allowed",
        "persistent_swizzle",
        "allow_tma = false dropped on the B load (TMA allowed again)",
        ["critical tma"],
        [Edit(" optimization_hints = <default = {allow_tma = false}>", "")],
    ),
    Mutation(
        "exp_to_exp2",
        "softmax",
        "exp -> exp2 (math op counts)",
        ["critical math_op_count"],
        [Edit("%2 = exp %1  :", "%2 = exp2 %1 :")],
    ),
    Mutation(
        "memory_ordering",
        "softmax",
        "store weak -> relaxed device",
        ["critical memory_ordering"],
        [Edit("%4 = store_view_tko weak %3,", "%4 = store_view_tko relaxed device %3,")],
    ),
    Mutation(
        "mask_predicate",
        "gather_scatter",
        "ragged-tail mask cols < n -> cols <= n",
        ["critical comparison"],
        [
            Edit(
                "cmpi less_than %1, %cst_1000_i32, signed",
                "cmpi less_than_or_equal %1, %cst_1000_i32, signed",
            )
        ],
    ),
    Mutation(
        "mean_divisor",
        "rmsnorm",
        "mean divisor 4096 -> 4095",
        ["critical constant_value"],
        [Edit("constant <f32: 4.096000e+03>", "constant <f32: 4.095000e+03>")],
    ),
    Mutation(
        "latency_hint",
        "persistent_swizzle",
        "A load latency hint 4 -> 8",
        ["warn latency_hint"],
        [Edit("{latency = 4}", "{latency = 8}")],
        extra=["// EXPECT-NOT: critical"],
    ),
    Mutation(
        "extra_nonneg_assume",
        "softmax",
        "an extra assume bounded<0, ?> on a load index (noise)",
        ["noise nonneg_assume"],
        [
            Edit(
                "  %cst_0_i32 = constant <i32: 0> : tile<i32>\n",
                "  %cst_0_i32 = constant <i32: 0> : tile<i32>\n"
                "  %col_nonneg = assume bounded<0, ?>, %cst_0_i32 : tile<i32>\n",
            ),
            Edit("%pview[%blockId_x, %cst_0_i32]", "%pview[%blockId_x, %col_nonneg]"),
        ],
        extra=["// EXPECT-NOT: critical", "// EXPECT-NOT: warn", "// EXPECT-LEVEL: equivalent"],
    ),
    Mutation(
        "rename_values",
        "softmax",
        "value names shuffled (renaming only)",
        ["exact"],
        renames={
            "%tile": "%loaded",
            "%reduce": "%row_max",
            "%reduce_11": "%row_sum",
            "%1": "%3",
            "%3": "%1",
            "%assume": "%base_ptr",
            "%tview": "%tv_in",
            "%pview": "%pv_in",
            "%reduce_lhs": "%lhs",
            "%5": "%combined",
        },
    ),
    Mutation(
        "rename_loop_values",
        "persistent_swizzle",
        "loop induction, iteration and result names shuffled (renaming only)",
        ["exact"],
        renames={
            "%loopIdx": "%tile_id",
            "%iterArg0": "%token_in",
            "%for": "%persistent",
            "%loopIdx_29": "%k",
            "%iterArg0_30": "%acc",
            "%for_28": "%acc_out",
            "%8": "%group_id",
        },
    ),
    Mutation(
        "dead_constants",
        "softmax",
        "unused constants inserted (dead constants are dropped)",
        ["exact"],
        [
            Edit(
                "  %0 = make_token : token\n",
                "  %0 = make_token : token\n"
                "  %dead_a = constant <f32: 1.000000e+00> : tile<f32>\n"
                "  %dead_b = constant <i32: 7> : tile<128xi32>\n",
            )
        ],
    ),
    Mutation(
        "entry_symbol_and_dead_constant",
        "rmsnorm",
        "entry renamed as cutile-rs does (`_entry`) and a dead constant inside a loop",
        ["exact"],
        [
            Edit("entry @rmsnorm_kernel_", "entry @rmsnorm_entry_"),
            Edit(
                "    %5 = fma %4, %4, %iterArg0  : tile<1x1024xf32>\n",
                "    %5 = fma %4, %4, %iterArg0  : tile<1x1024xf32>\n"
                "    %unused = constant <i32: 0> : tile<i32>\n",
            ),
        ],
    ),
]


def _rename(text: str, renames: dict[str, str]) -> str:
    """Simultaneous whole-name substitution (so %1 <-> %3 swaps)."""
    names = sorted(renames, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(n) for n in names) + r"(?![A-Za-z0-9_$.#\-])")
    return pattern.sub(lambda found: renames[found.group(0)], text)


def _apply(mutation: Mutation, text: str) -> str:
    for edit in mutation.edits:
        found = text.count(edit.old)
        if found != edit.count:
            raise SystemExit(
                f"{mutation.name}: {edit.old!r} occurs {found} times in {mutation.base}, "
                f"expected {edit.count}"
            )
        text = text.replace(edit.old, edit.new)
    return _rename(text, mutation.renames) if mutation.renames else text


def render(mutation: Mutation, mutate: Callable[[Mutation, str], str] = _apply) -> str:
    base_text = (FIXTURES / f"{mutation.base}.mlir").read_text()
    header = [
        f"// MUTATION: {mutation.description}",
        f"// BASE: ../fixtures/{mutation.base}.mlir",
        *(f"// EXPECT: {expectation}" for expectation in mutation.expect),
        *mutation.extra,
    ]
    return "\n".join(header) + "\n" + mutate(mutation, base_text)


def main() -> int:
    for mutation in MUTATIONS:
        path = HERE / f"{mutation.name}.mlir"
        path.write_text(render(mutation))
        print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
