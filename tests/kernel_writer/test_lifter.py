"""The lifter on hand-written IR: statements it writes, and every refusal
(BLOCKED) with the op, its location and what is missing. No toolchain needed."""

from __future__ import annotations

import pytest
from lift_support import HEADER, PARAMS, STORE, lift

from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.lifter import Lifter, ParamLayout
from nodes.kernel_writer.naming import SourceNames, Statement
from tileir.mlir import parse_module


def test_elementwise_kernel_lifts_one_statement_per_op() -> None:
    ops = "  %1 = addf %t, %t  : tile<64xf32>\n  %2 = exp %1  : tile<64xf32>\n"
    body = "\n".join(lift(ops, "%2"))
    assert "new_token_unordered()" in body
    assert "tile_block_id::<i32>()" in body
    assert "padding::Zero" in body
    assert "load_view_raw(" in body and "Some(token)" in body
    assert "Tile<f32, { [64] }> = tile + tile;" in body
    assert "exp(add)" in body and "let exp_1:" in body  # never shadows a function
    assert "store_view_raw(" in body


def test_flags_select_the_function_form() -> None:
    body = "\n".join(lift("  %1 = addf %t, %t rounding<zero> flush_to_zero : tile<64xf32>\n", "%1"))
    assert "addf(tile, tile, rounding::Zero, ftz::Enabled)" in body


def test_unmapped_op_is_blocked_with_its_location() -> None:
    text = (
        HEADER
        + "  %i = iota : tile<64xi32>\n"
        + '  %1 = fpowi %t, %i : tile<64xf32>, tile<64xi32> loc("kernel.py":7:3)\n'
        + STORE.format(value="%t")
    )
    module = parse_module(text)
    with pytest.raises(Blocked) as caught:
        Lifter(module.entries[0], PARAMS, "k").lift()
    assert caught.value.op == "fpowi"
    assert caught.value.location == "kernel.py:7:3"
    assert "no cutile-rs construct" in caught.value.missing


def test_parameters_that_do_not_match_the_entry_are_blocked() -> None:
    with pytest.raises(Blocked) as caught:
        lift("", "%t", params=[ParamLayout("x", "array", "float32", 1)])
    assert caught.value.op == "entry"
    assert "arguments" in caught.value.missing


def test_reduce_with_a_foreign_identity_is_blocked() -> None:
    reduce = (
        "  %r = reduce %t dim=0 identities=[1.000000e+00 : f32] : tile<64xf32> -> tile<f32>\n"
        "  (%a: tile<f32>, %b: tile<f32>) {\n"
        "    %m = addf %a, %b  : tile<f32>\n"
        "    yield %m : tile<f32>\n"
        "  }\n"
        "  %rr = reshape %r : tile<f32> -> tile<1xf32>\n"
        "  %rb = broadcast %rr : tile<1xf32> -> tile<64xf32>\n"
    )
    with pytest.raises(Blocked) as caught:
        lift(reduce, "%rb")
    assert caught.value.op == "reduce"
    assert "identity" in caught.value.missing


def test_sum_reduce_maps_to_reduce_sum() -> None:
    reduce = (
        "  %r = reduce %t dim=0 identities=[0.000000e+00 : f32] : tile<64xf32> -> tile<f32>\n"
        "  (%a: tile<f32>, %b: tile<f32>) {\n"
        "    %m = addf %a, %b  : tile<f32>\n"
        "    yield %m : tile<f32>\n"
        "  }\n"
        "  %rr = reshape %r : tile<f32> -> tile<1xf32>\n"
        "  %rb = broadcast %rr : tile<1xf32> -> tile<64xf32>\n"
    )
    body = "\n".join(lift(reduce, "%rb"))
    assert "reduce_sum(tile, 0i32)" in body


def test_scan_along_dim_one_is_blocked() -> None:
    scan = (
        "  %rs = reshape %t : tile<64xf32> -> tile<1x64xf32>\n"
        "  %c = scan %rs dim=1 reverse=false identities=[0.000000e+00 : f32] : tile<1x64xf32> "
        "-> tile<1x64xf32>\n"
        "  (%a: tile<f32>, %b: tile<f32>) {\n"
        "    %m = addf %a, %b  : tile<f32>\n"
        "    yield %m : tile<f32>\n"
        "  }\n"
        "  %back = reshape %c : tile<1x64xf32> -> tile<64xf32>\n"
    )
    with pytest.raises(Blocked) as caught:
        lift(scan, "%back")
    assert caught.value.op == "scan"
    assert "dim 0" in caught.value.missing


def test_a_value_used_signed_and_unsigned_is_blocked() -> None:
    ints = (
        "  %i = iota : tile<64xi32>\n"
        "  %c5 = constant <i32: 5> : tile<64xi32>\n"
        "  %q = divi %i, %c5 signed : tile<64xi32>\n"
        "  %r = remi %q, %c5 unsigned : tile<64xi32>\n"
        "  %u = cmpi less_than %r, %c5, signed : tile<64xi32> -> tile<64xi1>\n"
        "  %v = select %u, %t, %t : tile<64xi1>, tile<64xf32>\n"
    )
    with pytest.raises(Blocked) as caught:
        lift(ints, "%v")
    assert caught.value.op == "remi"
    assert "signed" in caught.value.missing and "unsigned" in caught.value.missing


def test_a_compare_against_its_operands_sign_states_its_own() -> None:
    ints = (
        "  %i = iota : tile<64xi32>\n"
        "  %c5 = constant <i32: 5> : tile<64xi32>\n"
        "  %q = divi %i, %c5 signed : tile<64xi32>\n"
        "  %u = cmpi less_than %q, %c5, unsigned : tile<64xi32> -> tile<64xi1>\n"
        "  %v = select %u, %t, %t : tile<64xi1>, tile<64xf32>\n"
    )
    body = "\n".join(lift(ints, "%v"))
    assert "Tile<i32, { [64] }> = iota(" in body
    assert "cmpi_unsigned_r1(quot, cst, predicate::LessThan)" in body


def test_unsigned_compares_type_the_chain_unsigned() -> None:
    ints = (
        "  %i = iota : tile<64xi32>\n"
        "  %w = exti %i signed : tile<64xi32> -> tile<64xi64>\n"
        "  %n = constant <i64: 7> : tile<64xi64>\n"
        "  %u = cmpi less_than %w, %n, unsigned : tile<64xi64> -> tile<64xi1>\n"
        "  %v = select %u, %t, %t : tile<64xi1>, tile<64xf32>\n"
    )
    body = "\n".join(lift(ints, "%v"))
    assert "Tile<u64, { [64] }> = exti(" in body
    assert "constant(7u64, shape![64])" in body


def test_break_inside_an_if_is_blocked() -> None:
    loop = (
        "  %c0 = constant <i32: 0> : tile<i32>\n"
        "  %c9 = constant <i32: 9> : tile<i32>\n"
        "  %r = loop iter_values(%a = %c0) : tile<i32> -> tile<i32> {\n"
        "    %g = cmpi greater_than %a, %c9, signed : tile<i32> -> tile<i1>\n"
        "    if %g {\n"
        "      break %a : tile<i32>\n"
        "    } else {\n"
        "    }\n"
        "    continue %a : tile<i32>\n"
        "  }\n"
    )
    with pytest.raises(Blocked) as caught:
        lift(loop, "%t")
    assert caught.value.op == "loop"


def test_for_loop_carries_values_in_name_order() -> None:
    loop = (
        "  %c0 = constant <i32: 0> : tile<i32>\n"
        "  %c1 = constant <i32: 1> : tile<i32>\n"
        "  %f:2 = for %iv in (%c0 to %arg1, step %c1) : tile<i32> iter_values(%b = %t, %a = %t)"
        " -> (tile<64xf32>, tile<64xf32>) {\n"
        "    %n = addf %b, %a  : tile<64xf32>\n"
        "    continue %n, %b : tile<64xf32>, tile<64xf32>\n"
        "  }\n"
    )
    body = lift(loop, "%f#0")
    declared = [line.split("let mut ")[1].split(":")[0] for line in body if "let mut" in line]
    assert declared == sorted(declared) and len(declared) == 2
    text = "\n".join(body)
    assert "tile_to_scalar::<i32, i32>(cst)" in text  # a constant() bound: no assume on iv
    assert "let next_" in text  # the swap goes through temporaries


def test_source_names_name_the_values() -> None:
    names = SourceNames(
        params=["x", "y"],
        statements=[Statement(5, 5, ["total"], "total = a + b")],
        lines=["", "", "", "", "total = a + b"],
    )
    text = (
        HEADER + '  %1 = addf %t, %t  : tile<64xf32> loc("k.py":5:9)\n' + STORE.format(value="%1")
    )
    module = parse_module(text)
    body = Lifter(module.entries[0], PARAMS, "k", names).lift().body
    assert any(line.strip().startswith("let total: Tile<f32") for line in body)
    assert any(line.strip() == "// total = a + b" for line in body)


GATHER = (
    "  %w = exti %bx signed : tile<i32> -> tile<i64>\n"
    "  %p = offset %arg0, %w : tile<ptr<f32>>, tile<i64> -> tile<ptr<f32>>\n"
    "  %pa = assume div_by<{divisor}>, %p : tile<ptr<f32>>\n"
    "  %g, %gt = load_ptr_tko weak %pa token=%0 : tile<ptr<f32>> -> tile<f32>, token\n"
    "  %r = reshape %g : tile<f32> -> tile<1xf32>\n"
    "  %b = broadcast %r : tile<1xf32> -> tile<64xf32>\n"
    "  %v = addf %t, %b : tile<64xf32>\n"
)
GENERIC_PARAMS = [
    ParamLayout("x", "array", "float32", 1, generic=True),
    ParamLayout("y", "array", "float32", 1, generic=True),
]


def test_a_gathered_pointer_aligned_to_its_element_follows_the_dtype() -> None:
    body = "\n".join(lift(GATHER.format(divisor=4), "%v", GENERIC_PARAMS))
    assert "PointerTile<*mut E, { [] }> = assume_div_by::<_, E_BYTES>(" in body
    # Another alignment, or a fixed dtype, keeps the literal.
    assert "assume_div_by::<_, 16>(" in "\n".join(
        lift(GATHER.format(divisor=16), "%v", GENERIC_PARAMS)
    )
    assert "assume_div_by::<_, 4>(" in "\n".join(lift(GATHER.format(divisor=4), "%v"))
