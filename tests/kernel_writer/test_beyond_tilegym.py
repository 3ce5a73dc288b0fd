"""Patterns real kernels outside TileGym use, each in a kernel written for the test:
the kernel writer ports it (COMPILED: every configuration IR exact and SASS
identical on each GPU its spec names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodes.kernel_writer.stage import port_kernel
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import rs_export_binary

FIXTURES = Path(__file__).parent / "fixtures" / "kernels"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
    ),
]

# kernel: (what it exercises, constructs its kernel.rs must call, the GPUs it is proven on)
PATTERNS = {
    "power_mix": ("`x ** 2` and `x ** y` on f32/f16/bf16 (fpowf)", ["fpowf("], {"sm_90", "sm_100"}),
    "pair_cat": ("`ct.cat((a, b), 0)` per tile size (cat)", ["cat("], {"sm_90", "sm_100"}),
    "claim_flags": (
        "`ct.atomic_cas` with its bounds mask",
        ["atomic_cas_tko("],
        {"sm_90", "sm_100"},
    ),
    "mixed_mma": (
        "float8/float16 inputs, float32 accumulator and output: an element type per array",
        ["c: *mut f32", "mmaf("],
        {"sm_90", "sm_100"},
    ),
    "int8_mma": (
        "`ct.mma` on int8 and on uint8 tiles into int32 accumulators (mmai)",
        ["signedness::Signed, signedness::Signed", "signedness::Unsigned, signedness::Unsigned"],
        {"sm_90", "sm_100"},
    ),
    "block_scaled_mma": (
        "`ct.mma_scaled` on float8 tiles with float8_e8m0fnu block scales into float32 "
        "(mmaf_scaled), which cuTile compiles for sm_100 only",
        ["mmaf_scaled(ta, tb, acc_1, sa, sb)"],
        {"sm_100"},
    ),
    "scaled_rows": (
        "float8_e8m0fnu block scales, which cuTile compiles for sm_100 only",
        ["f8e8m0fnu"],
        {"sm_100"},
    ),
    "fp4_codec": (
        "float4_e2m1fn within a kernel (no launch takes an array of it): uint8 pairs "
        "unpacked to it, float32 rounded to it, both widened back; sm_100 only",
        ["Tile<f4e2m1fn, { [256] }> = unpack(", "Tile<f4e2m1fn, { [256] }> = ftof("],
        {"sm_100"},
    ),
    "sign_flip": ("`-x` on int32/int64 tiles (negi)", ["negi("], {"sm_90", "sm_100"}),
    "float_bits": (
        "`ct.bitcast` from float32 to int32 and back (bitcast)",
        ["bitcast("],
        {"sm_90", "sm_100"},
    ),
    "polar_angle": ("`ct.atan2(y, x)` elementwise (atan2)", ["atan2(ty, tx)"], {"sm_90", "sm_100"}),
    "byte_floats": (
        "`ct.assert_` with a quoted message and `ct.unpack_from_bytes` to float32 (assert, unpack)",
        ['cuda_tile_assert!(cond, "a byte is \\"unsigned\\"")', "unpack(data)"],
        {"sm_90", "sm_100"},
    ),
    "packed_bytes": (
        "`ct.pack_to_bytes` of a float32 tile, stored as uint8 (pack)",
        ["Tile<u8, { [1024] }> = pack(tx)"],
        {"sm_90", "sm_100"},
    ),
    "traced_scale": (
        "`ct.printf` of one tile, ordered after its load (print_tko)",
        ['print_tko("block tile: %f\\n", tile, Some('],
        {"sm_90", "sm_100"},
    ),
    "strided_halves": (
        "`array.tiled_view(shape, traversal_steps=..)`: tiles 2 TILE apart (make_strided_view)",
        ["make_strided_view(&x_view, shape![", "StridedView<f32, { [128] }, { [256] }, { [0] }>"],
        {"sm_90", "sm_100"},
    ),
    "row_gather": (
        "`ct.load_advanced_indexing` of rows by a tile of ids (make_gather_scatter_view)",
        ["GatherScatterView<f32, { [ROWS, WIDTH] }, 0>", "(rows, tile_to_scalar::<i32, i32>(cst))"],
        {"sm_90", "sm_100"},
    ),
    "scatter_rows_by_index": (
        "`ct.store_advanced_indexing` of row tiles to the rows a sorted, unique index "
        "names, its configurations giving the index as a launch recorded it (`values`)",
        ["GatherScatterView<f32, { [ROWS, WIDTH] }, 0>", "store_view_raw(\n" + 12 * " " + "&out_"],
        {"sm_90", "sm_100"},
    ),
    "tile_accumulate": (
        "a tiled view's `atomic_store_add` (atomic_red_view_tko)",
        ["atomic_red_view_raw(", "atomic::AddF"],
        {"sm_90", "sm_100"},
    ),
    "math_mix": (
        "sin, cos, tan, sinh, cosh, floor, ceil, a float `%` and an integer abs",
        ["sinh(", "remf(", "absi("],
        {"sm_90", "sm_100"},
    ),
    "numpy_bound": (
        "a module constant from numpy (`NEG = -np.inf`) as a `ct.full` fill and a maximum's start",
        ["constant(f32::NEG_INFINITY, shape![TILE])", "maxf(start, tile,"],
        {"sm_90", "sm_100"},
    ),
}


@pytest.mark.parametrize("kernel", sorted(PATTERNS))
def test_the_pattern_ports(kernel: str, tmp_path: Path) -> None:
    _, constructs, gpus = PATTERNS[kernel]
    report = port_kernel(FIXTURES / f"{kernel}.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    assert {t.target for check in report.checks for t in check.targets} == gpus
    written = (tmp_path / "kernel.rs").read_text()
    assert all(construct in written for construct in constructs), constructs
