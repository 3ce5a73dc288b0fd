"""The parser: every fixture (both printers), the structures it builds, and
clear line-numbered errors on bad input."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tileir.ir import Module, Op
from tileir.lexer import IRSyntaxError, Kind, tokenize
from tileir.mlir import iter_ops, parse_module
from tileir.vocabulary import VOCABULARY as OP_VOCABULARY

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
ALL_FIXTURES = sorted(FIXTURES.glob("*.mlir")) + sorted((FIXTURES / "cutile_rs").glob("*.mlir"))


def parse_fixture(name: str) -> Module:
    return parse_module((FIXTURES / name).read_text())


def ops_named(module: Module, name: str) -> list[Op]:
    return [op for op in iter_ops(module) if op.name == name]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_every_fixture_parses(path: Path) -> None:
    module = parse_module(path.read_text())
    assert module.entries
    assert sum(1 for _ in iter_ops(module)) > 5


def test_fixtures_cover_the_op_vocabulary() -> None:
    seen = {op.name for path in ALL_FIXTURES for op in iter_ops(parse_module(path.read_text()))}
    assert len(OP_VOCABULARY) == 63
    assert sorted(set(OP_VOCABULARY) - seen) == []


def test_entry_symbol_arguments_and_hints() -> None:
    module = parse_fixture("rmsnorm.mlir")
    entry = module.entries[0]
    assert entry.symbol.startswith("rmsnorm_kernel_")
    assert entry.args[0].name == "%arg0" and entry.args[0].type == "tile<ptr<f16>>"
    assert entry.attributes["optimization_hints"] == "default={occupancy=2}"
    assert module.source_printer == "tileirdisasm"


def test_memory_op_attributes_and_operands() -> None:
    module = parse_fixture("persistent_swizzle.mlir")
    first, second = ops_named(module, "load_view_tko")
    assert first.results == ["%tile", "%result_token"]
    assert first.operands == ["%pview_25", "%27", "%loopIdx_29", "%0"]
    assert first.attributes["memory_ordering"] == "weak"
    assert first.attributes["optimization_hints"] == "default={latency=4}"
    assert second.attributes["optimization_hints"] == "default={allow_tma=false}"
    assert first.result_types == ["tile<128x32xf16>", "token"]
    assert first.operand_types[0].startswith("partition_view<tile=(128x32), padding_value = zero")


def test_multi_results_expand_and_resolve() -> None:
    module = parse_fixture("persistent_swizzle.mlir")
    shape = ops_named(module, "get_index_space_shape")[0]
    assert shape.results == ["%1#0", "%1#1"]
    assert shape.result_types == ["tile<i32>", "tile<i32>"]
    assert any("%1#0" in op.operands for op in iter_ops(module))


def test_a_scaled_mma_result_has_its_accumulator_type() -> None:
    """mmaf_scaled prints its five operands' types, the accumulator third and the
    scales last: the result's type is the accumulator's, not the last printed."""
    text = (
        "entry @k(%a: tile<64x64xf8E4M3FN>, %b: tile<64x64xf8E4M3FN>, %c: tile<64x64xf32>, "
        "%sa: tile<64x2xf8E8M0FNU>, %sb: tile<2x64xf8E8M0FNU>) {\n"
        "  %r = mmaf_scaled %a, %b, %c, %sa, %sb : tile<64x64xf8E4M3FN>, "
        "tile<64x64xf8E4M3FN>, tile<64x64xf32>, tile<64x2xf8E8M0FNU>, tile<2x64xf8E8M0FNU>\n"
        "  return\n}\n"
    )
    (op,) = ops_named(parse_module(text), "mmaf_scaled")
    assert op.operands == ["%a", "%b", "%c", "%sa", "%sb"]
    assert op.result_types == ["tile<64x64xf32>"]
    assert op.operand_types[3:] == ["tile<64x2xf8E8M0FNU>", "tile<2x64xf8E8M0FNU>"]


def test_for_loop_defines_its_region_arguments() -> None:
    module = parse_fixture("persistent_swizzle.mlir")
    outer, inner = ops_named(module, "for")
    assert outer.region_defs == ["%loopIdx", "%iterArg0"]
    assert outer.operands == ["%blockId_x", "%4", "%gridSize_x", "%0"]
    assert [(a.name, a.type) for a in outer.regions[0].args] == [
        ("%loopIdx", "tile<i32>"),
        ("%iterArg0", "token"),
    ]
    assert [(a.name, a.type) for a in inner.regions[0].args][1] == (
        "%iterArg0_30",
        "tile<128x128xf32>",
    )
    assert inner.regions[0].ops[-1].name == "continue"


def test_reduce_and_scan_regions_with_arguments() -> None:
    reduce = ops_named(parse_fixture("softmax.mlir"), "reduce")[0]
    assert reduce.attributes["dim"] == "1"
    assert reduce.attributes["identities"] == "[0xff800000 : f32]"
    assert [a.name for a in reduce.regions[0].args] == ["%reduce_lhs", "%reduce_rhs"]
    assert [op.name for op in reduce.regions[0].ops] == ["maxf", "yield"]
    scan = ops_named(parse_fixture("cumsum.mlir"), "scan")[0]
    assert scan.attributes["reverse"] == "false"
    assert len(scan.regions[0].args) == 2


def test_if_else_loop_break_continue() -> None:
    module = parse_fixture("while_loop.mlir")
    loop = ops_named(module, "loop")[0]
    assert loop.results == ["%1#0", "%1#1"]
    assert [a.name for a in loop.regions[0].args] == ["%arg6", "%arg7"]
    ifs = ops_named(module, "if")
    assert all(len(op.regions) == 2 for op in ifs)
    guard = ifs[0]
    assert guard.regions[0].ops == [] and guard.regions[1].ops[0].name == "break"
    valued = next(op for op in ifs if op.results)
    assert valued.result_types == ["tile<i32>"]


def test_keyword_attributes_are_named() -> None:
    module = parse_fixture("online_softmax.mlir")
    exp2 = ops_named(module, "exp2")[0]
    assert exp2.attributes["flush_to_zero"] == "true"
    divf = [op for op in ops_named(module, "divf") if "rounding" in op.attributes]
    assert divf[0].attributes["rounding"] == "approx"
    cmpi = ops_named(parse_fixture("while_loop.mlir"), "cmpi")[0]
    assert cmpi.attributes["comparison_predicate"] == "greater_than"
    assert cmpi.attributes["signedness"] == "signed"
    cmpf = ops_named(parse_fixture("cumsum.mlir"), "cmpf")[0]
    assert cmpf.attributes["comparison_ordering"] == "ordered"
    atomic = ops_named(parse_fixture("atomics.mlir"), "atomic_rmw_tko")[0]
    assert atomic.attributes["memory_ordering"] == "acq_rel"
    assert atomic.attributes["memory_scope"] == "device"
    assert atomic.attributes["mode"] == "addf"
    permute = ops_named(parse_fixture("transpose.mlir"), "permute")[0]
    assert permute.attributes["permutation"] == "[1, 0]"


def test_constants_are_normalised_to_bits() -> None:
    values = {op.attributes["value"] for op in ops_named(parse_fixture("rmsnorm.mlir"), "constant")}
    assert "f32:0x45800000" in values  # 4096.0
    assert "i32:4" in values
    flags = {
        op.attributes["value"] for op in ops_named(parse_fixture("while_loop.mlir"), "constant")
    }
    assert "i1:0" in flags  # `<i1: false>`


def test_cutile_rs_printer_module() -> None:
    module = parse_module((FIXTURES / "cutile_rs" / "softmax_printer.mlir").read_text())
    assert module.name == "softmax_module"
    assert module.source_printer == "cutile-rs"
    entry = module.entries[0]
    assert entry.symbol == "softmax_entry"
    assert entry.attributes["di_name"] == '"softmax"'
    reduce = ops_named(module, "reduce")[0]
    assert [a.name for a in reduce.regions[0].args] == ["%34", "%35"]
    assert reduce.attributes["identities"] == "[0xff800000 : f32]"


def test_cutile_rs_loop_spelling_and_divi_rounding() -> None:
    text = """cuda_tile.module @m {
  entry @k_entry(%0: tile<i32>) {
    %1 = constant <i32: 4> : tile<i32>
    %2 = divi %0, %1 signed rounding positive_inf : tile<i32>
    %3 = cuda_tile.loop iter_values(%4 = %2) : tile<i32> -> tile<i32> {
      %5 = addi %4, %1 overflow nsw : tile<i32>
      break %5 : tile<i32>
    }
    return
  }
}
"""
    module = parse_module(text)
    divi, loop = ops_named(module, "divi")[0], ops_named(module, "loop")[0]
    assert divi.attributes["rounding"] == "positive_inf"
    assert [a.name for a in loop.regions[0].args] == ["%4"]
    assert ops_named(module, "addi")[0].attributes["overflow"] == "nsw"


def test_debug_locations_are_resolved() -> None:
    module = parse_fixture("softmax.debug.mlir")
    located = [op.location for op in iter_ops(module) if op.name != "return"]
    assert all(loc is not None and loc.startswith("src/softmax.py:") for loc in located)
    assert ops_named(module, "return")[0].location is None  # loc(unknown)
    source = (FIXTURES / "src" / "softmax.py").read_text().splitlines()
    exp_line = next(i for i, line in enumerate(source, 1) if "ct.exp(" in line)
    exp = ops_named(module, "exp")[0]
    assert exp.location is not None and exp.location.split(":")[1] == str(exp_line)


def test_tokens_keep_types_whole() -> None:
    tokens = tokenize(
        "%a = load_view_tko weak %v[%i] : partition_view<tile=(1x8), t<x>> -> tile<8xf32>"
    )
    angles = [t.text for t in tokens if t.kind is Kind.ANGLE]
    assert angles == ["partition_view<tile=(1x8), t<x>>", "tile<8xf32>"]
    assert [t.kind for t in tokenize("0xFF800000 -inf 1.5e+00 -3")] == [Kind.NUMBER] * 4


BAD_INPUTS = [
    ("", "no `entry`"),
    ("hello world", "expected `entry`"),
    (
        "entry @k(%a: tile<i32>) {\n  %1 = addi %a, %b : tile<i32>\n  return\n}\n",
        "undefined value %b",
    ),
    (
        "entry @k(%a: tile<i32>) {\n  %1 = addi %a, %a : tile<i32>\n"
        "  %1 = addi %a, %a : tile<i32>\n}\n",
        "defined twice",
    ),
    ("entry @k(%a: tile<i32>) {\n  %1 = addi %a, %a : tile<i32\n}\n", "unterminated '<'"),
    ("entry @k(%a: tile<i32>) {\n  %1 = addi %a, %a : tile<i32>\n", "missing '}'"),
    ("entry @k(%a: tile<i32>) {\n  %1 = 42\n}\n", "expected an op name"),
    ("entry @k(%a: tile<i32>) {\n  %1 = addi %a ~ %a\n}\n", "unexpected character '~'"),
    ("entry k(%a: tile<i32>) {\n}\n", "entry symbol"),
    ("entry @k(%a: tile<i32>) {\n  %1 = addi (%a, %a : tile<i32>\n}\n", "unbalanced"),
    ('entry @k() {\n  %1 = "open\n}\n', "unexpected character"),
]


@pytest.mark.parametrize(("text", "message"), BAD_INPUTS)
def test_bad_input_is_a_syntax_error_with_a_line(text: str, message: str) -> None:
    with pytest.raises(IRSyntaxError) as caught:
        parse_module(text)
    assert message in str(caught.value)
    assert caught.value.line >= 1


def test_the_error_names_the_line_of_the_fault() -> None:
    text = (FIXTURES / "softmax.mlir").read_text().splitlines()
    text[30] = text[30].replace("exp %1", "exp %nowhere")
    with pytest.raises(IRSyntaxError) as caught:
        parse_module("\n".join(text))
    assert caught.value.line == 31
    assert "%nowhere" in str(caught.value)


@pytest.mark.parametrize("name", ["softmax.mlir", "persistent_swizzle.mlir", "while_loop.mlir"])
def test_damaged_text_never_crashes(name: str) -> None:
    """Deleting or truncating lines gives a parse or a syntax error, nothing else."""
    lines = (FIXTURES / name).read_text().splitlines()
    rng = random.Random(7)
    for _ in range(60):
        damaged = list(lines)
        cut = rng.randrange(len(damaged))
        if rng.random() < 0.5:
            del damaged[cut]
        else:
            damaged[cut] = damaged[cut][: rng.randrange(len(damaged[cut]) + 1)]
        try:
            parse_module("\n".join(damaged))
        except IRSyntaxError as err:
            assert err.line >= 1
