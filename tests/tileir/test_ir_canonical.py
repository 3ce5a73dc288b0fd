"""The canonical form: what `exact` means, and what it must not forgive."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from tileir.attrs import scalar_literal
from tileir.canonical import canonical_text, canonicalize
from tileir.mlir import parse_module

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FIXTURE_FILES = sorted(FIXTURES.glob("*.mlir"))
VALUE = re.compile(r"%[A-Za-z0-9_$.\-]+")


def canonical(text: str) -> str:
    return canonical_text(parse_module(text))


def shuffle_names(text: str, seed: int) -> str:
    """Give every value a fresh random name (uses of `%x#0` keep the suffix)."""
    names = sorted(set(VALUE.findall(text)))
    fresh = [f"%v{n}" for n in random.Random(seed).sample(range(10 * len(names)), len(names))]
    mapping = dict(zip(names, fresh, strict=True))
    return VALUE.sub(lambda found: mapping[found.group(0)], text)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_canonical_text_is_a_fixed_point(path: Path) -> None:
    """The canonical text parses, and canonicalises to itself."""
    once = canonical(path.read_text())
    assert canonical(once) == once


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_renaming_every_value_keeps_the_canonical_form(path: Path) -> None:
    text = path.read_text()
    renamed = shuffle_names(text, seed=len(text))
    assert renamed != text
    assert canonical(renamed) == canonical(text)


def test_values_are_numbered_by_definition_order() -> None:
    lines = canonical((FIXTURES / "softmax.mlir").read_text()).splitlines()
    assert lines[0].startswith("entry @entry0(%a0: tile<ptr<f32>>, %a1: tile<i32>")
    assert lines[1] == "  %0 = make_token : token"
    assert lines[2] == "  %1 = assume div_by<16>, %a0 : tile<ptr<f32>>"
    region_args = next(line for line in lines if line.strip().startswith("(%"))
    assert region_args.strip() == "(%23: tile<f32>, %24: tile<f32>) {"


def test_dead_constants_are_dropped_live_ones_kept() -> None:
    module = parse_module((FIXTURES / "softmax.mlir").read_text())
    result = canonicalize(module)
    assert result.entries[0].dead_constants == 2
    text = result.text
    assert text.count("= constant ") == 2  # the two i32 zero indices stay
    assert "<i32:1>" not in text


def test_entry_symbol_and_debug_name_are_ignored() -> None:
    text = (FIXTURES / "vector_add.mlir").read_text()
    renamed = re.sub(r"entry @\w+", "entry @something_else_entry", text, count=1)
    assert canonical(renamed) == canonical(text)


def add_constant(literal: str, names: tuple[str, str, str] = ("%a", "%c", "%r")) -> str:
    arg, const, out = names
    return (
        f"entry @k({arg}: tile<f32>) {{\n"
        f"  {const} = constant <f32: {literal}> : tile<f32>\n"
        f"  {out} = addf {arg}, {const} : tile<f32>\n"
        "  return\n}\n"
    )


def test_literal_spellings_are_unified() -> None:
    tileirdisasm = add_constant("-1.000000e+00")
    cutile_rs = add_constant("-1.0", ("%0", "%1", "%2"))
    hex_bits = add_constant("0xBF800000", ("%0", "%1", "%2"))
    assert canonical(tileirdisasm) == canonical(cutile_rs) == canonical(hex_bits)


def test_a_printed_bf16_constant_is_the_nearest_bf16() -> None:
    # 0.044715 in bf16 is 0x3D37 (0.0446777...); printed with six digits it lies
    # below that value, and truncating its float32 bits would give 0x3D36.
    printed = scalar_literal("4.467770e-02", "bf16")
    assert printed == scalar_literal("0x3D37", "bf16") == "bf16:0x3d37"
    assert scalar_literal("-1.000000e+30", "bf16") == "bf16:0xf14a"


def test_both_printers_share_one_canonical_form() -> None:
    reference = canonical((FIXTURES / "softmax.mlir").read_text())
    rust_printed = canonical((FIXTURES / "cutile_rs" / "softmax_printer.mlir").read_text())
    assert rust_printed == reference


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("padding_value = neg_inf", "padding_value = zero"),
        ("identities=[0xFF800000 : f32]", "identities=[0xFF800001 : f32]"),
        ("%2 = exp %1", "%2 = exp2 %1"),
        ("<i32: 0> : tile<i32>\n  %pview = ", "<i32: 1> : tile<i32>\n  %pview = "),
        ("%3 = divf %2, %bcast_14  :", "%3 = divf %bcast_14, %2  :"),
    ],
)
def test_real_changes_are_not_forgiven(old: str, new: str) -> None:
    text = (FIXTURES / "softmax.mlir").read_text()
    assert old in text
    assert canonical(text.replace(old, new, 1)) != canonical(text)


def test_zero_and_negative_zero_differ() -> None:
    assert canonical(add_constant("0.0")) != canonical(add_constant("-0.0"))


def test_every_entry_of_a_module_is_kept_in_order() -> None:
    first = (FIXTURES / "softmax.mlir").read_text()
    second = (FIXTURES / "vector_add.mlir").read_text()
    module = canonicalize(parse_module(first + second))
    assert len(module.entries) == 2
    assert module.entries[1].text.startswith("entry @entry1(")
