"""Literals, differential generic recovery, naming and the report model."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.generics import confirms, constrained_probe, probe_values, recover
from nodes.kernel_writer.literals import common_decimal, constant_literal, shortest_float
from nodes.kernel_writer.module import module_item
from nodes.kernel_writer.naming import NameAllocator, read_source, snake
from nodes.kernel_writer.rust_types import DTYPE_BYTES, DTYPE_ELEMENTS
from schemas.kernel_writer import ConfigCheck, PortReport, TargetCheck
from schemas.verdicts import KernelWriterVerdict
from tileir.mlir import parse_module

OP = parse_module("entry @k() {\n  return\n}\n").entries[0].body.ops[0]


def f32_bits(value: float) -> str:
    return f"f32:0x{struct.unpack('<I', struct.pack('<f', value))[0]:08x}"


@pytest.mark.parametrize("value", [1.0, 0.1, 1.4426950408889634, 5.96046448e-08, -3.5, 1e30])
def test_float_literals_round_trip_bit_exactly(value: float) -> None:
    text = shortest_float(struct.unpack("<f", struct.pack("<f", value))[0], "f32")
    assert struct.pack("<f", float(text)) == struct.pack("<f", value)
    assert "." in text


def test_constant_spellings() -> None:
    assert constant_literal(f32_bits(1.5), "f32", "here", OP).dense == "1.5f32"
    assert constant_literal("f32:0xff800000", "f32", "here", OP).dense == "f32::NEG_INFINITY"
    assert constant_literal("f16:0x0000", "f16", "here", OP).dense == "f16::ZERO"
    assert constant_literal("f32:0x00000000", "E", "here", OP).dense == "E::ZERO"
    assert constant_literal("i32:-7", "i32", "here", OP).dense == "-7i32"
    assert constant_literal("i1:1", "bool", "here", OP).dense == "true"


def test_generic_float_constants() -> None:
    """A constant of E other than zero is one f64 value every configuration's
    value rounds from, written through `constant_float_r`: never `E::ONE` or
    `E::INFINITY`, which cutile-rs turns into 1.875 and NaN in bf16."""
    quarter = constant_literal(f32_bits(0.25), "E", "k.py:3:1", OP)
    assert (quarter.dense, quarter.generic_float, quarter.via_f32) == ("0.25", True, False)
    low = constant_literal(f32_bits(float("-inf")), "E", "k.py:3:1", OP)
    assert (low.dense, low.generic_float, low.via_f32) == ("f64::NEG_INFINITY", True, False)
    one = constant_literal("f16:0x3c00", "E", "k.py:3:1", OP, ["bf16:0x3f80", "f32:0x3f800000"])
    assert (one.dense, one.generic_float) == ("1.0", True)
    zero = constant_literal("f32:0x00000000", "E", "k.py:3:1", OP, ["bf16:0x0000"])
    assert (zero.dense, zero.generic_float) == ("E::ZERO", False)
    assert not constant_literal("f16:0x3c00", "f16", "k.py:3:1", OP).via_f32


def test_an_f16_value_without_a_name_is_rounded_into_f16_by_the_declared_constant() -> None:
    # `constant(2.0, shape![])` would be a tile of Rust's float, not of f16.
    two = constant_literal("f16:0x4000", "f16", "k.py:3:1", OP)
    assert (two.dense, two.generic_float, two.via_f32) == ("2.0", True, False)
    assert constant_literal("f16:0x3c00", "f16", "k.py:3:1", OP).dense == "f16::ONE"


def test_bf16_constants_are_values_cutile_rs_rounds_into_bf16() -> None:
    # bf16::ONE would be written 0x3f80 and read back as an f16 (1.875).
    one = constant_literal("bf16:0x3f80", "bf16", "k.py:3:1", OP)
    assert (one.dense, one.generic_float) == ("1.0", True)
    high = constant_literal("bf16:0x7f80", "bf16", "k.py:3:1", OP)
    assert (high.dense, high.generic_float) == ("f64::INFINITY", True)
    assert constant_literal("bf16:0x3d37", "bf16", "k.py:3:1", OP).dense == "0.0447"
    assert constant_literal("bf16:0x0000", "bf16", "k.py:3:1", OP).dense == "bf16::ZERO"


def test_a_generic_constant_is_right_in_every_configuration() -> None:
    # -1e30 from the source: -inf in float16, 0xf14a in bfloat16 (rounded, not
    # truncated: truncation gives 0xf149); an infinity alone would be wrong in bf16.
    big = constant_literal("f16:0xfc00", "E", "k.py:3:1", OP, ["bf16:0xf14a", "f32:0xf149f2ca"])
    assert (big.dense, big.generic_float) == ("-1.0e+30", True)
    assert common_decimal([("bf16", 0xF149)]) != "-1.0e+30"
    # 0.1 in three widths has one decimal. A value no decimal reproduces falls back
    # to an f32 constant converted to E: 1 + 2^-11 is exact in f32 and a tie in f16,
    # which rounds to 1.0, but its shortest decimal rounds up.
    assert common_decimal([("f16", 0x2E66), ("bf16", 0x3DCD), ("f32", 0x3DCCCCCD)]) == "0.1"
    odd = constant_literal("f16:0x3c00", "E", "k.py:3:1", OP, ["f32:0x3f801000"])
    assert (odd.dense, odd.via_f32, odd.generic_float) == ("1.0f32", True, False)
    # A peer with another value is another constant (its dtype's reference placed
    # its constants otherwise): it does not push the value through f32.
    moved = constant_literal("f16:0x3c00", "E", "k.py:3:1", OP, ["f32:0x00000000", "bf16:0x3f80"])
    assert (moved.dense, moved.generic_float) == ("1.0", True)
    # Infinity in every dtype is f64's.
    minus = constant_literal("f16:0xfc00", "E", "k.py:3:1", OP, ["f32:0xff800000"])
    assert minus.dense == "f64::NEG_INFINITY"


def test_constants_without_an_exact_spelling_are_blocked() -> None:
    with pytest.raises(Blocked, match="NaN"):
        constant_literal("f32:0x7fc00000", "f32", "k.py:3:1", OP)
    with pytest.raises(Blocked, match="non-splat"):
        constant_literal("i32:[1, 2]", "i32", "k.py:3:1", OP)


def test_recover_names_the_constant_that_moved() -> None:
    base = ["let t: Tile<f32, { [1, 1024] }> = x;", "let n: i32 = 3i32;"]
    probe = ["let t: Tile<f32, { [1, 2048] }> = x;", "let n: i32 = 3i32;"]
    result = recover(base, probe, {"TILE_N": 1024}, {"TILE_N": 2048})
    assert result.lines == ["let t: Tile<f32, { [1, TILE_N] }> = x;", "let n: i32 = 3i32;"]
    assert result.used == ["TILE_N"]
    # A shape moved, not a constant's value: nothing to lift again from a generic.
    assert result.moved_lines == set()
    values = recover(
        ["let n: Tile<i32, { [] }> = constant(1024i32, shape![]);", "let f = constant(8.0f32,"],
        ["let n: Tile<i32, { [] }> = constant(2048i32, shape![]);", "let f = constant(16.0f32,"],
        {"TILE_N": 1024, "N": 8},
        {"TILE_N": 2048, "N": 16},
    )
    # Both constants' values moved (N as a float, `x / N`): both lines are lifted again.
    assert values.used == ["TILE_N", "N"] and values.moved_lines == {0, 1}


def test_recover_tells_coinciding_constants_apart() -> None:
    base = ["shape![128, 128]"]
    probe = ["shape![256, 64]"]
    result = recover(base, probe, {"TILE_M": 128, "TILE_N": 128}, {"TILE_M": 256, "TILE_N": 64})
    assert result.lines == ["shape![TILE_M, TILE_N]"]


def test_recover_refuses_constant_arithmetic_and_structure_changes() -> None:
    arithmetic = recover(["shape![2048]"], ["shape![4096]"], {"T": 1024}, {"T": 2048})
    assert arithmetic.lines is None and "arithmetic" in arithmetic.reason
    structure = recover(["a;", "b;"], ["a;"], {"T": 1}, {"T": 2})
    assert structure.lines is None and "structure" in structure.reason
    reordered = recover(["exp(x)"], ["log(x)"], {"T": 1}, {"T": 2})
    assert reordered.lines is None


def test_a_second_probe_confirms_what_it_cannot_tell_apart() -> None:
    # Two strides, both 0 in the base: the first probe tells them apart (3 and 5),
    # the second moves both to 11, so its recovery may name either for both.
    base = ["let a = m * 0i32;", "let b = m * 0i32;"]
    first = recover(
        base, ["let a = m * 3i32;", "let b = m * 5i32;"], {"S": 0, "T": 0}, {"S": 3, "T": 5}
    )
    values = {"S": 11, "T": 11}
    check = recover(base, ["let a = m * 11i32;", "let b = m * 11i32;"], {"S": 0, "T": 0}, values)
    assert first.lines == ["let a = m * S;", "let b = m * T;"]
    assert check.lines is not None and check.lines != first.lines
    assert confirms(first.lines, check.lines, {"S": 0, "T": 0}, values)
    # Where the second probe tells them apart, it must agree line for line.
    apart = {"S": 9, "T": 11}
    swapped = recover(base, ["let a = m * 11i32;", "let b = m * 9i32;"], {"S": 0, "T": 0}, apart)
    assert swapped.lines is not None
    assert not confirms(first.lines, swapped.lines, {"S": 0, "T": 0}, apart)
    # A constant the first probe named that the second shows put is no confirmation.
    put = ["let a = m * S;", "let b = m * 0i32;"]
    assert not confirms(first.lines, put, {"S": 0, "T": 0}, values)


def test_probe_values_are_distinct_powers_of_two() -> None:
    constants = {"TILE_M": 128, "TILE_N": 128, "TILE_K": 64, "GROUP": 8, "N": 1000}
    probes = probe_values(constants, avoid={256})
    assert len(set(probes.values())) == len(probes) == len(constants)
    assert not set(probes.values()) & (set(constants.values()) | {256})
    for name in ("TILE_M", "TILE_N", "TILE_K", "GROUP"):
        assert probes[name] & (probes[name] - 1) == 0
    assert probes["N"] != 1000


def test_an_upward_probe_passes_the_tile_for_a_quotient_to_move() -> None:
    """rms_norm's bounds-checked gather: num_tiles = cdiv(N, TILE_SIZE) is 1 at the
    base (N=768, TILE_SIZE=1024). Moving both up by small steps keeps it 1, so the
    probe would see a generic's number stay put; a far value of N passes the tile."""
    constants = {"N": 768, "TILE_SIZE": 1024}

    def quotient_moves(probes: dict[str, int]) -> bool:
        tiles = -(-probes["N"] // probes["TILE_SIZE"])
        ragged = probes["N"] % probes["TILE_SIZE"] != 0  # the base's branch side
        return tiles != 1 and ragged

    probes = constrained_probe(constants, {771, 512}, quotient_moves, upward=True)
    assert probes is not None and quotient_moves(probes)
    assert probes["N"] > 768 and probes["TILE_SIZE"] > 1024


def test_a_constant_without_a_free_probe_value_gets_none() -> None:
    """Every power of two up to the cap is taken: the last constant is left unprobed
    (kept literal by the kernel writer) instead of failing."""
    taken = {f"C{k}": 1 << k for k in range(17)}
    probes = probe_values({"TILE": 64}, avoid=set(taken.values()))
    assert probes == {}
    # nine powers of two 1..256 leave eight free ones up to the cap (512..65536)
    probes = probe_values({**{f"C{k}": 1 << k for k in range(8)}, "TILE": 1 << 8}, set())
    assert len(probes) == len(set(probes.values())) == 8


def test_read_source_names_assignments_loops_and_parameters(tmp_path: Path) -> None:
    source = tmp_path / "k.py"
    source.write_text(
        "import cuda.tile as ct\n\n@ct.kernel\ndef k(x, y, TILE: ct.Constant[int]):\n"
        "    row = ct.bid(0)\n    for chunk in range(4):\n        acc = (x +\n"
        "               y)\n    ct.store(y, index=(row,), tile=acc)\n"
    )
    names = read_source(source, "k")
    assert names.params == ["x", "y", "TILE"]
    assert names.loop_vars[6] == "chunk"
    statement = names.statement_at(8)
    assert statement is not None and statement.targets == ["acc"]
    assert names.statement_at(9) is not None and names.statement_at(9).targets == []  # type: ignore[union-attr]


def test_unreadable_source_gives_no_names(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def k(:\n")
    assert read_source(broken, "k").params == []
    assert read_source(tmp_path / "missing.py", "k").params == []


def test_names_are_rust_identifiers_and_unique() -> None:
    assert snake("TILE_N") == "tile_n"
    assert snake("rowMax") == "row_max"
    assert snake("loop") == "loop_"
    assert snake("2x") == "v_2x"
    names = NameAllocator()
    assert [names.fresh("t"), names.fresh("t"), names.fresh("token")] == ["t", "t_1", "token_1"]


def test_declared_ops_are_known() -> None:
    for item in (
        "tile_block_id",
        "num_tile_blocks",
        "trunci_plain_r2",
        "constant_bits_r1",
        "load_ptr_padded_r3",
        "cmpi_unsigned_r0",
        "cmpi_signed_r2",
        "ptr_to_int_r1",
        "tileir",
        "generic_value",
        "divisible",
    ):
        assert module_item(item)
    with pytest.raises(KeyError):
        module_item("nothing")
    assert 'named_attributes = ["signedness=unsigned"]' in "\n".join(
        module_item("cmpi_unsigned_r0")
    )
    assert ") -> Tile<i64, S> {" in module_item("ptr_to_int_r2")


def _check(exact: bool, sass: bool, targets: tuple[str, ...] = ("sm_90", "sm_100")) -> ConfigCheck:
    return ConfigCheck(
        config="c",
        variant="v",
        entry="k",
        generic_args=[],
        exact=exact,
        ir_level="exact" if exact else "different",
        targets=[TargetCheck(target=target, sass_identical=sass) for target in targets],
    )


def test_a_compiled_report_must_be_proven() -> None:
    fields = dict(
        kernel="k", spec="k.port.yaml", summary="s", kernel_rs="kernel.rs", rustc_check=True
    )
    PortReport(verdict=KernelWriterVerdict.COMPILED, checks=[_check(True, True)], **fields)
    # SASS-identical on both targets with another IR text is a COMPILED level too.
    PortReport(verdict=KernelWriterVerdict.COMPILED, checks=[_check(False, True)], **fields)
    for checks in ([_check(True, False)], [_check(True, True, ("sm_90",))], []):
        with pytest.raises(ValueError, match="exact, SASS-identical on sm_90 and sm_100 or equiv"):
            PortReport(verdict=KernelWriterVerdict.COMPILED, checks=checks, **fields)
    with pytest.raises(ValueError, match="rustc"):
        PortReport(
            verdict=KernelWriterVerdict.COMPILED,
            checks=[_check(True, True)],
            **{**fields, "rustc_check": False},
        )
    with pytest.raises(ValueError, match="names no construct"):
        PortReport(verdict=KernelWriterVerdict.BLOCKED, kernel="k", spec="s", summary="s")


def test_every_array_dtype_has_a_rust_element_and_a_size() -> None:
    # An fp8 configuration once crashed the generic-argument step (no size for it).
    assert set(DTYPE_BYTES) == set(DTYPE_ELEMENTS)
