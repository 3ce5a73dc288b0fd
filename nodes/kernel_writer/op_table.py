"""The op mapping: for each Tile IR op the cuTile kernels of this class emit,
the cutile-rs 0.5.0 construct that compiles back to exactly that op, with the
same attributes. Each mapping names the probe kernel (tests/kernel_writer/
fixtures/probes) and the IR line pattern that proves it; the test suite
compiles every probe through the exporter and checks every pattern.

docs/OP_MAPPING.md is this table in prose; docs/UPSTREAM_GAPS.md lists the
attribute forms no construct reproduces (the `gaps` ids below).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Probe:
    fixture: str  # file stem in tests/kernel_writer/fixtures/probes
    kernel: str
    pattern: str  # regex matched against a line of the probe's tileirdisasm text
    generics: tuple[str, ...] = ()
    target: str = "sm_90"  # the GPU it compiles for: sm_100 where cutile-rs gates the op on it


@dataclass(frozen=True)
class OpMapping:
    op: str
    rust: str
    attributes: str
    probes: tuple[Probe, ...]
    surface: str = "core"  # core (safe or unsafe `cutile::core` fn), operator, control, implicit
    gaps: tuple[str, ...] = field(default_factory=tuple)


def _p(fixture: str, kernel: str, pattern: str, generics: tuple[str, ...] = ()) -> Probe:
    return Probe(fixture, kernel, pattern, generics)


def _views(pattern: str) -> Probe:
    return _p("views", "views", pattern, ("64",))


def _ints(pattern: str) -> Probe:
    return _p("int_ops", "int_ops", pattern)


def _floats(pattern: str) -> Probe:
    return _p("float_ops", "float_ops", pattern)


def _shapes(pattern: str) -> Probe:
    return _p("shape_ops", "shape_ops", pattern)


def _control(pattern: str) -> Probe:
    return _p("control", "control", pattern)


def _declared(pattern: str) -> Probe:
    return _p("declared_ops", "declared_ops", pattern, ("64",))


def _block_scaled(pattern: str) -> Probe:
    return Probe("block_scaled", "block_scaled", pattern, target="sm_100")


V = r"%[\w#]+"  # a value name in tileirdisasm text

OP_TABLE: tuple[OpMapping, ...] = (
    OpMapping(
        "make_token",
        "new_token_unordered()",
        "none",
        (_views(r"= make_token : token$"),),
    ),
    OpMapping(
        "assume",
        "assume_div_by::<_, N>(x), assume_bounds_lower::<_, L>(x), assume_bounds_upper::<_, U>(x),"
        " assume_bounds::<_, L, U>(x)",
        "div_by<N>; bounded<L, ?> / <?, U> / <L, U>; the operand may be a pointer tile or an "
        "i32 scalar",
        (
            _views(rf"assume div_by<16>, {V} : tile<ptr<f32>>"),
            _views(rf"assume div_by<4>, {V} : tile<i32>"),
            _views(rf"assume bounded<0, \?>, {V} : tile<i32>"),
        ),
    ),
    OpMapping(
        "constant",
        "`let c: i32 = 5i32;` (rank 0: i32/i64/u32/u64/f32/f64/bool) or `constant(v, shape![..])`",
        "value bit-exact: shortest round-trip decimal; +-inf and f16/bf16/E zero, one, "
        "infinities through associated constants (`f32::NEG_INFINITY`, `E::ZERO`)",
        (
            _shapes(r"constant <f32: 0xFF800000> : tile<4x1xf32>"),
            _shapes(r"constant <i1: true> : tile<8xi1>"),
            _shapes(r"constant <f16: 0\.000000e\+00> : tile<16x16xf16>"),
            _declared(r"constant <i32: -862048943> : tile<16xi32>"),
            _declared(r"%cst_64_i32_[1-9]\d* = constant <i32: 64> : tile<i32>$"),
        ),
        gaps=("G9", "G11", "G13"),
    ),
    OpMapping("return", "end of the entry function", "none", (_views(r"^\s*return$"),), "implicit"),
    OpMapping(
        "get_tile_block_id",
        "tile_block_id(): the module declares the op (`#[cuda_tile::op]`) returning rank-0 "
        "tiles, since cutile-rs's get_tile_block_id() adds `assume bounded<0, ?>`",
        "none",
        (_declared(r"get_tile_block_id : tile<i32>$"),),
        "declared",
        ("G1",),
    ),
    OpMapping(
        "get_num_tile_blocks",
        "num_tile_blocks(): declared like tile_block_id()",
        "none",
        (_declared(r"get_num_tile_blocks : tile<i32>$"),),
        "declared",
        ("G1",),
    ),
    OpMapping(
        "reshape",
        "x.reshape(shape![..]) on Tile and PointerTile",
        "none",
        (
            _shapes(rf"reshape {V} : tile<4x8xf32> -> tile<32xf32>"),
            _shapes(rf"reshape {V} : tile<ptr<f32>> -> tile<1x1xptr<f32>>"),
        ),
    ),
    OpMapping(
        "broadcast",
        "x.broadcast(shape![..]) on Tile and PointerTile",
        "none",
        (
            _shapes(rf"broadcast {V} : tile<4x1xf32> -> tile<4x8xf32>"),
            _shapes(rf"broadcast {V} : tile<1x1xptr<f32>> -> tile<4x8xptr<f32>>"),
        ),
    ),
    OpMapping(
        "addi",
        "a + b; addi(a, b, overflow::X) when the reference carries an overflow flag",
        "overflow<no_signed_wrap|no_unsigned_wrap|no_wrap>; none through the operator",
        (_ints(rf"addi {V}, {V} : tile<64xi32>$"), _ints(r"addi .* overflow<no_signed_wrap>")),
        "operator",
        ("G2",),
    ),
    OpMapping(
        "subi",
        "a - b; subi(a, b, overflow::X)",
        "as addi",
        (_ints(rf"subi {V}, {V} : tile<64xi32>$"), _ints(rf"subi {V}, {V} : tile<i32>$")),
        "operator",
        ("G2",),
    ),
    OpMapping(
        "muli",
        "a * b; muli(a, b, overflow::X)",
        "as addi",
        (_ints(rf"muli {V}, {V} : tile<64xi32>$"), _ints(r"muli .* overflow<no_wrap>")),
        "operator",
        ("G2",),
    ),
    OpMapping(
        "divi",
        "a / b (rounding zero); divi(a, b, rounding::NegativeInf|PositiveInf)",
        "signedness from the Rust element type (i32 signed, u32 unsigned); rounding",
        (
            _ints(r"divi .* signed rounding<negative_inf> : tile<64xi32>"),
            _ints(r"divi .* unsigned rounding<positive_inf>"),
            _ints(rf"divi {V}, {V} signed : tile<i32>$"),
        ),
        "operator",
    ),
    OpMapping(
        "remi",
        "a % b",
        "signedness from the element type",
        (_ints(r"remi .* signed : tile<64xi32>"), _ints(r"remi .* unsigned : tile<64xi32>")),
        "operator",
    ),
    OpMapping("absi", "absi(x)", "none", (_ints(r"absi .* : tile<64xi32>"),)),
    OpMapping(
        "negi",
        "negi(x, overflow::X) (`-x` on an integer tile; `overflow::None` where the reference "
        "has no flag: the bytecode writer defaults negi's attribute, unlike addi's)",
        "overflow flags",
        (_ints(rf"negi {V} : tile<64xi32>$"), _ints(r"negi .* overflow<no_signed_wrap>")),
    ),
    OpMapping(
        "mulhii",
        "mulhii(a, b) (no API of cuTile Python 1.7 writes it: the lift is proven on IR, not on a "
        "cuTile kernel)",
        "none",
        (_ints(rf"mulhii {V}, {V} : tile<64xi32>$"),),
    ),
    OpMapping(
        "mini",
        "min(a, b) on scalars; mini(a, b) on tiles",
        "signedness from the element type",
        (_ints(r"mini .* signed : tile<i32>"), _ints(r"mini .* unsigned : tile<64xi32>")),
    ),
    OpMapping(
        "maxi",
        "max(a, b) on scalars; maxi(a, b) on tiles",
        "signedness from the element type",
        (_ints(r"maxi .* signed : tile<64xi32>"), _ints(r"maxi .* unsigned : tile<64xi32>")),
    ),
    OpMapping(
        "andi", "a & b (also on bool tiles)", "none", (_ints(r"andi .* : tile<64xi1>"),), "operator"
    ),
    OpMapping("ori", "a | b", "none", (_ints(r"ori .* : tile<64xi32>"),), "operator"),
    OpMapping("xori", "a ^ b", "none", (_ints(r"xori .* : tile<64xi1>"),), "operator"),
    OpMapping(
        "shli",
        "a << b",
        "overflow none through the operator",
        (_ints(r"shli .* : tile<64xi32>"),),
        "operator",
    ),
    OpMapping(
        "shri",
        "a >> b",
        "signedness from the element type",
        (_ints(r"shri .* signed : tile<64xi32>"), _ints(r"shri .* unsigned : tile<64xi32>")),
        "operator",
    ),
    OpMapping(
        "cmpi",
        "a < b (scalars); cmpi(a, b, predicate::X) (tiles); cmpi_unsigned_rN / cmpi_signed_rN "
        "(declared)",
        "all six predicates; signedness from the element type, or stated by the declared op "
        "where the operands' type has the other",
        (
            _ints(r"cmpi equal .* signed"),
            _ints(r"cmpi not_equal .* signed"),
            _ints(r"cmpi less_than_or_equal .* signed"),
            _ints(r"cmpi greater_than .* signed"),
            _ints(r"cmpi greater_than_or_equal .* signed : tile<i32>"),
            _ints(r"cmpi less_than .* unsigned : tile<64xi64>"),
        ),
        gaps=("G10",),
    ),
    OpMapping(
        "assert",
        'cuda_tile_assert!(cond, "message") (`ct.assert_(cond, message)`)',
        "the message, escapes included",
        (_ints(r'assert %\w+, "lanes differ \\22here\\22\\0A" : tile<64xi1>'),),
    ),
    OpMapping(
        "print_tko",
        'print_tko("format", tile, Some(token) / None) (`ct.printf(format, tile)`: one tile)',
        "the format, escapes included; the input token or none",
        (
            _ints(rf'print_tko "lanes %d\\0A", {V} token=%\w+ : tile<64xi32> -> token'),
            _ints(rf'print_tko "%d", {V} : tile<64xi32> -> token'),
        ),
    ),
    OpMapping(
        "select",
        "select(cond, a, b)",
        "none",
        (
            _ints(r"select .* : tile<64xi1>, tile<64xi32>"),
            _ints(r"select .* : tile<i1>, tile<i32>"),
        ),
    ),
    OpMapping(
        "exti",
        "exti(x) with the result type annotated",
        "signedness from the source element type; the result may be typed unsigned "
        "(`exti::<i32, u64>`) so that later unsigned compares on it type-check",
        (_ints(r"exti .* signed : tile<64xi32> -> tile<64xi64>"), _ints(r"exti .* unsigned")),
    ),
    OpMapping(
        "trunci",
        "trunci(x, overflow::X); without flags trunci_plain_rN(x), declared by the module "
        'with `named_attributes = ["overflow=none"]`',
        "overflow flags",
        (
            _ints(r"trunci .* overflow<no_signed_wrap> : tile<64xi32> -> tile<64xi16>"),
            _declared(r"trunci %\w+ : tile<16xi32> -> tile<16xi16>$"),
        ),
        gaps=("G3",),
    ),
    OpMapping(
        "itof",
        "itof(x, rounding::NearestEven)",
        "signedness from the source element type; rounding",
        (_floats(r"itof .* signed  : tile<128xi32>"), _floats(r"itof .* unsigned")),
    ),
    OpMapping(
        "ftoi",
        "ftoi(x, rounding::NearestIntToZero)",
        "signedness from the result element type; rounding (truncation, the default, prints none)",
        (
            _floats(r"ftoi .* signed  : tile<128xf32> -> tile<128xi32>"),
            _floats(r"ftoi .* unsigned"),
        ),
    ),
    OpMapping(
        "ftof",
        "ftof(x, rounding::NearestEven); convert_tile::<TO, FROM, _>(x) for the dtype generic "
        "(nothing when the types match)",
        "rounding",
        (_floats(r"ftof .* : tile<128xf32> -> tile<128xf16>"),),
    ),
    OpMapping(
        "bitcast",
        "bitcast(x) with the result type annotated (`ct.bitcast(x, dtype)`)",
        "none; the source and result types from the tiles",
        (
            _floats(r"bitcast .* : tile<128xf32> -> tile<128xi32>"),
            _floats(r"bitcast .* : tile<128xi32> -> tile<128xf32>"),
        ),
    ),
    OpMapping(
        "pack",
        "pack(x) with the result type annotated (`ct.pack_to_bytes(x)`: a rank-1 tile to its "
        "bytes)",
        "none; the source and byte types from the tiles",
        (_floats(r"pack .* : tile<128xf32> -> tile<512xi8>"),),
    ),
    OpMapping(
        "unpack",
        "unpack(bytes) with the result type annotated (`ct.unpack_from_bytes(x, dtype)` to a "
        "non-byte dtype)",
        "none; the byte and result types from the tiles",
        (_floats(r"unpack .* : tile<512xi8> -> tile<128xf32>"),),
    ),
    OpMapping(
        "addf",
        "a + b; addf(a, b, rounding::X, ftz::X)",
        "rounding<..>, flush_to_zero",
        (_floats(r"addf .* rounding<zero> flush_to_zero"), _floats(rf"addf {V}, {V}  : tile")),
        "operator",
    ),
    OpMapping(
        "subf",
        "a - b; subf(a, b, rounding::X, ftz::X)",
        "rounding, flush_to_zero",
        (_floats(r"subf .*  flush_to_zero"),),
        "operator",
    ),
    OpMapping(
        "mulf",
        "a * b; mulf(a, b, rounding::X, ftz::X)",
        "rounding, flush_to_zero",
        (_floats(r"mulf .* rounding<positive_inf>"),),
        "operator",
    ),
    OpMapping(
        "divf",
        "a / b; divf(a, b, rounding::X, ftz::X)",
        "rounding (approx, full ...), flush_to_zero",
        (_floats(r"divf .* rounding<approx>"),),
        "operator",
    ),
    OpMapping(
        "fma",
        "fma(a, b, c, rounding::X, ftz::X)",
        "rounding, flush_to_zero",
        (_floats(r"fma .* rounding<zero> flush_to_zero"), _floats(rf"fma {V}, {V}, {V}  :")),
    ),
    OpMapping("negf", "negf(x)", "none", (_floats(r"negf .* : tile<128xf32>"),)),
    OpMapping(
        "minf",
        "min(a, b) on scalars; minf(a, b, nan::X, ftz::X)",
        "propagate_nan, flush_to_zero",
        (_floats(rf"minf {V}, {V} : tile<128xf32>"),),
    ),
    OpMapping(
        "sqrt",
        "sqrt(x, rounding::X, ftz::X)",
        "rounding, flush_to_zero",
        (_floats(rf"sqrt {V}  : tile<128xf32>"),),
    ),
    OpMapping("absf", "absf(x)", "none", (_floats(r"absf .* : tile<128xf32>"),)),
    OpMapping(
        "maxf",
        "max(a, b) on scalars; maxf(a, b, nan::X, ftz::X)",
        "propagate_nan, flush_to_zero",
        (_floats(r"maxf .* flush_to_zero propagate_nan"), _floats(rf"maxf {V}, {V} : tile")),
    ),
    OpMapping(
        "exp",
        "exp(x); exp_with_rounding(x, rounding::Approx)",
        "rounding<approx|full>",
        (_floats(r"exp .* rounding<approx>"),),
    ),
    OpMapping(
        "exp2",
        "exp2(x, ftz::X)",
        "flush_to_zero",
        (_floats(r"exp2 .* flush_to_zero"), _floats(rf"exp2 {V} : tile<128xf32>")),
    ),
    OpMapping("log", "log(x)", "none", (_floats(r"= log .* : tile<128xf32>"),)),
    *(
        OpMapping(name, f"{name}(x)", "none", (_floats(rf"= {name} {V} : tile<128xf32>"),))
        for name in ("sin", "cos", "tan", "sinh", "cosh", "floor", "ceil")
    ),
    OpMapping(
        "remf", "remf(a, b) (`a % b` on floats)", "none", (_floats(r"remf .* : tile<128xf32>"),)
    ),
    OpMapping(
        "fpowf",
        "fpowf(x, y) (`x ** y`; cutile-rs marks it unsafe: Tile IR's power domain)",
        "none",
        (_floats(rf"fpowf {V}, {V} : tile<128xf32>"),),
    ),
    OpMapping(
        "atan2",
        "atan2(y, x) (`ct.atan2(y, x)`: the operands in the reference's order)",
        "none",
        (_floats(rf"atan2 {V}, {V} : tile<128xf32>"),),
    ),
    OpMapping("log2", "log2(x)", "none", (_floats(r"log2 .* : tile<128xf32>"),)),
    OpMapping(
        "rsqrt",
        "rsqrt(x, ftz::X)",
        "flush_to_zero",
        (_floats(r"rsqrt .* flush_to_zero"),),
    ),
    OpMapping(
        "tanh",
        "tanh(x); tanh_with_rounding(x, rounding::Approx)",
        "rounding<approx|full>",
        (_floats(r"tanh .* rounding<approx>"),),
    ),
    OpMapping(
        "cmpf",
        "a < b (scalars, ordered); cmpf(a, b, predicate::X, cmp_ordering::X)",
        "predicate, ordered / unordered",
        (
            _floats(r"cmpf greater_than ordered"),
            _floats(r"cmpf not_equal unordered"),
        ),
    ),
    OpMapping("iota", "iota(shape![N])", "none", (_ints(r"iota : tile<64xi32>"),)),
    OpMapping(
        "permute",
        "permute(x, const_array![..])",
        "permutation",
        (_shapes(r"permute .* \[1, 0\] : tile<4x8xf32> -> tile<8x4xf32>"),),
    ),
    OpMapping(
        "cat",
        "cat(a, b, dim) (`ct.cat((a, b), axis)`; the result's shape from its binding)",
        "dim",
        (_shapes(r"cat .* dim = 0 : tile<4x8xf32>, tile<4x8xf32> -> tile<8x8xf32>"),),
    ),
    OpMapping(
        "extract",
        "extract(x, [i, j]) with rank-0 i32 tile indices",
        "none",
        (_shapes(r"extract .*\[.*\] : tile<8x4xf32> -> tile<4x4xf32>"),),
    ),
    OpMapping(
        "reduce",
        "reduce_sum / reduce_max / reduce_min / reduce_prod(x, dim)",
        "dim; the identity and combiner are the helper's own (add 0, max -inf/MIN, min "
        "+inf/MAX, mul 1), without flags",
        (
            _shapes(r"reduce .* dim=1 identities=\[0xFF800000 : f32\]"),
            _shapes(r"reduce .* dim=0 identities=\[1\.000000e\+00 : f32\]"),
        ),
        gaps=("G4",),
    ),
    OpMapping(
        "scan",
        "scan_sum(x, 0, reverse::Forward|Reverse, 0)",
        "reverse; dim 0 and identity 0 only",
        (_shapes(r"scan .* dim=0 reverse=true identities=\[0\.000000e\+00 : f32\]"),),
        gaps=("G5",),
    ),
    OpMapping(
        "mmaf",
        "mmaf(a, b, acc)",
        "operand and accumulator types from the tiles",
        (_shapes(r"mmaf .* : tile<16x16xf16>, tile<16x16xf16>, tile<16x16xf32>"),),
    ),
    OpMapping(
        "mmaf_scaled",
        "mmaf_scaled(lhs, rhs, acc, lhs_scale, rhs_scale) (`ct.mma_scaled(x, x_scale, y, "
        "y_scale, acc)`: float8 tiles with float8_e8m0fnu block scales into a float32 "
        "accumulator; sm_100 only)",
        "none; input, scale and accumulator types from the tiles",
        (
            _block_scaled(
                rf"mmaf_scaled {V}, {V}, {V}, {V}, {V} : tile<16x32xf8E4M3FN>, "
                r"tile<32x16xf8E4M3FN>, tile<16x16xf32>, tile<16x1xf8E8M0FNU>, "
                r"tile<1x16xf8E8M0FNU>"
            ),
        ),
    ),
    OpMapping(
        "mmai",
        "mmai(a, b, acc, signedness::X, signedness::X) (`ct.mma` on int8/uint8 tiles with an "
        "int32 accumulator)",
        "each operand's signedness; operand and accumulator types from the tiles",
        (
            _shapes(r"mmai .* signed signed : tile<16x16xi8>, tile<16x16xi8>, tile<16x16xi32>"),
            _shapes(r"mmai .* unsigned unsigned : tile<16x16xi8>"),
        ),
    ),
    OpMapping(
        "make_tensor_view",
        "make_tensor_view(base, Shape::<{[-1, ..]}> { dims }, Array::<{[-1, 1]}> { dims }, token)",
        "dynamic shape; static (unit) and dynamic strides",
        (
            _views(r"make_tensor_view .* strides = \[%\w+, 1\] .* strides=\[\?,1\]>"),
            _views(r"make_tensor_view .* strides=\[\?,\?\]>"),
        ),
    ),
    OpMapping(
        "make_partition_view",
        "make_partition_view(&tensor, shape![..], padding::X, dim_map, token)",
        "padding_value (none, zero, neg_inf, ...); dim_map (const_array!)",
        (
            _views(r"make_partition_view .* padding_value = neg_inf"),
            _views(r"make_partition_view .* padding_value = zero"),
            _views(r"make_partition_view .* dim_map=\[1, 0\]"),
        ),
    ),
    OpMapping(
        "get_index_space_shape",
        "get_index_space_shape(&partition) -> [i32; N]",
        "none",
        (_views(r"get_index_space_shape %\w+ : partition_view"),),
    ),
    OpMapping(
        "get_tensor_shape",
        "get_tensor_shape(&tensor) -> [i32; N] (no API of cuTile Python 1.7 writes it: the lift "
        "is proven on IR, not on a cuTile kernel)",
        "none",
        (
            _views(
                r"get_tensor_shape %\w+ : tensor_view<\?x\?xf32, strides=\[\?,\?\]> -> tile<i32>"
            ),
        ),
    ),
    OpMapping(
        "make_strided_view",
        "make_strided_view(&tensor, shape![..], padding) annotated StridedView<E, tile, steps, "
        "dim map> (`array.tiled_view(shape, traversal_steps=..)`; `cutile::tileir`, imported "
        "by the module)",
        "tile shape, traversal strides, padding value; the dim map from the annotation",
        (
            _views(
                r"make_strided_view %\w+ : strided_view<tile=\(1x64\), "
                r"traversal_strides=\[1,128\], padding_value = zero, "
                r"tensor_view<\?x\?xf32, strides=\[\?,1\]>>$"
            ),
            _views(r"load_view_tko weak %sview\[.*\] token = %\w+ : strided_view<"),
        ),
    ),
    OpMapping(
        "make_gather_scatter_view",
        "make_gather_scatter_view(&tensor, shape![..], padding) annotated "
        "GatherScatterView<E, tile, sparse axis>, loaded or stored with a tuple index whose "
        "sparse axis is the tile of indices (`ct.load_advanced_indexing`; `cutile::tileir`, "
        "imported by the module)",
        "tile shape, padding value, sparse_dim",
        (
            _views(
                r"make_gather_scatter_view %\w+ : gather_scatter_view<tile=\(16x64\), "
                r"padding_value = zero, tensor_view<\?x\?xf32, strides=\[\?,1\]>, sparse_dim=0>$"
            ),
            _views(r"load_view_tko weak %gsview\[%\w+, %\w+\] token = %\w+ : gather_scatter_view<"),
        ),
    ),
    OpMapping(
        "load_view_tko",
        "load_view_raw(&view, [idx..], Some(token), ordering, scope, tma, latency, [false..], "
        "shape![..]) -> (Tile, Token)",
        "memory ordering and scope; explicit input token; latency and allow_tma hints",
        (
            _views(r"load_view_tko weak .* token = %\w+ : "),
            _views(
                r"load_view_tko weak .* optimization_hints = <sm_90 = \{allow_tma = false, "
                r"latency = 4\}>"
            ),
            _views(r"load_view_tko relaxed device"),
        ),
        gaps=("G6",),
    ),
    OpMapping(
        "store_view_tko",
        "store_view_raw(&view, tile, [idx..], Some(token), ordering, scope, tma, latency, "
        "[false..]) -> Token",
        "as load_view_tko",
        (_views(r"store_view_tko weak .* token = %\w+ optimization_hints"),),
        gaps=("G6",),
    ),
    OpMapping(
        "join_tokens",
        "join_tokens(&[a, b])",
        "none",
        (_views(rf"join_tokens {V}, {V} : token"),),
    ),
    OpMapping(
        "offset",
        "addptr_tile(ptrs, offsets)",
        "none",
        (_control(rf"offset {V}, {V} : tile<16xptr<i32>>, tile<16xi32>"),),
    ),
    OpMapping(
        "int_to_ptr",
        "int_to_ptr(x) with the pointer type annotated",
        "none",
        (_control(r"int_to_ptr .* : tile<i64> -> tile<ptr<i32>>"),),
    ),
    OpMapping(
        "ptr_to_ptr",
        "ptr_to_ptr(ptrs) with the pointer type annotated (no API of cuTile Python 1.7 writes "
        "it: the lift is proven on IR, not on a cuTile kernel)",
        "none; the source and result pointee types from the tiles",
        (_control(r"ptr_to_ptr .* : tile<ptr<i32>> -> tile<ptr<f32>>"),),
    ),
    OpMapping(
        "ptr_to_int",
        "ptr_to_int_rN(ptrs) -> Tile<i64, S>, declared by the module, since cutile-rs's "
        "ptr_to_int types the result as the pointee type (no API of cuTile Python 1.7 writes "
        "it: the lift is proven on IR, not on a cuTile kernel)",
        "none; the source pointee type from the tile",
        (_declared(r"ptr_to_int %\w+ : tile<16xptr<i16>> -> tile<16xi64>$"),),
    ),
    OpMapping(
        "alloca",
        "alloca(count, alignment, allocation::Local / allocation::Global) with the pointer type "
        "annotated (no API of cuTile Python 1.7 writes it: the lift is proven on IR, not on a "
        "cuTile kernel)",
        "num_elem, alignment, global; the pointee type from the tile",
        (
            _control(r"alloca num_elem = 16, alignment = 64 : tile<ptr<f32>>$"),
            _control(r"alloca num_elem = 8, alignment = 16 global : tile<ptr<i32>>$"),
        ),
    ),
    OpMapping(
        "load_ptr_tko",
        "load_ptr_tko(ptrs, ordering, scope, Some(mask), Some(pad), Some(token), Latency::<N>)",
        "ordering/scope, mask, padding (a scalar: cutile-rs emits its reshape and broadcast "
        "inside the load), token, latency",
        (
            _control(rf"load_ptr_tko weak {V}, {V}, {V} token=%\w+"),
            _declared(rf"load_ptr_tko weak {V}, {V}, %bcast_\d+ : "),
        ),
        gaps=("G12",),
    ),
    OpMapping(
        "store_ptr_tko",
        "store_ptr_tko(ptrs, tile, ordering, scope, Some(mask), Some(token), Latency::<N>)",
        "ordering/scope, mask, token, latency",
        (_control(rf"store_ptr_tko weak {V}, {V}, {V} token=%\w+"),),
    ),
    OpMapping(
        "atomic_rmw_tko",
        "atomic_rmw_tko(ptrs, arg, atomic::X, ordering, scope, Some(mask), Some(token))",
        "mode, ordering, scope, mask, token",
        (_control(r"atomic_rmw_tko acq_rel device .* add, "),),
    ),
    OpMapping(
        "atomic_red_view_tko",
        "atomic_red_view_raw(&view, value, [idx..], atomic::X, ordering, scope, Some(token)) "
        "-> Token (a tiled view's `atomic_store_add` / `_min` / `_max` / `_and` / `_or` / `_xor`)",
        "mode, ordering, scope, token",
        (_views(r"atomic_red_view_tko relaxed device %\w+\[.*\], addf, %\w+ token = %\w+ : "),),
    ),
    OpMapping(
        "atomic_cas_tko",
        "atomic_cas_tko(ptrs, expected, desired, ordering, scope, Some(mask), Some(token)) "
        "(`ct.atomic_cas`)",
        "ordering, scope, mask, token",
        (_control(rf"atomic_cas_tko acq_rel device {V}, {V}, {V}, {V} token="),),
    ),
    OpMapping(
        "for",
        "for iv in (lb..ub).step_by(step as usize) { .. } with `let mut` carried values; "
        "a constant bound is a rank-0 `constant(..)` tile, so no assume lands on iv",
        "carried values in name order (names are chosen to sort as the reference)",
        (
            _control(r"= for %loopIdx in \(%\w+ to %\w+, step %\w+\)"),
            _declared(r"= for %loopIdx in \(%cst_0_i32 to %arg1, step %cst_1_i32\)"),
        ),
        "control",
        ("G7",),
    ),
    OpMapping(
        "continue",
        "end of a loop body: assignments to the carried variables",
        "none",
        (_control(rf"continue {V}"),),
        "control",
    ),
    OpMapping(
        "loop",
        "while { cond } { .. } for a loop that starts with `if c {} else { break }`",
        "carried values in name order",
        (_control(r"= loop iter_values"),),
        "control",
        ("G8",),
    ),
    OpMapping(
        "break",
        "the `while` condition",
        "none",
        (_control(rf"break {V}, {V}"),),
        "control",
        ("G8",),
    ),
    OpMapping(
        "if",
        "if c { .. } else { .. } (an if-expression for one result)",
        "results",
        (_control(r"= if %\w+ -> \(tile<i32>"),),
        "control",
        ("G8",),
    ),
    OpMapping(
        "yield",
        "the value of an if branch, the end of a reduce/scan body",
        "none",
        (_control(rf"yield {V}"),),
        "control",
    ),
)

SUPPORTED_OPS: frozenset[str] = frozenset(mapping.op for mapping in OP_TABLE)


def mapping(op: str) -> OpMapping:
    for entry in OP_TABLE:
        if entry.op == op:
            return entry
    raise KeyError(op)


def markdown_table() -> str:
    """The table of docs/OP_MAPPING.md, from OP_TABLE (one source of truth)."""
    rows = [
        "| op | cutile-rs 0.5.0 construct | attributes reproduced | probe | gaps |",
        "|---|---|---|---|---|",
    ]
    for entry in sorted(OP_TABLE, key=lambda e: e.op):
        probes = ", ".join(sorted({f"`{p.fixture}.rs`" for p in entry.probes}))
        gaps = ", ".join(entry.gaps) or "-"
        construct = entry.rust.replace("|", "\\|")
        rows.append(f"| `{entry.op}` | {construct} | {entry.attributes} | {probes} | {gaps} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
