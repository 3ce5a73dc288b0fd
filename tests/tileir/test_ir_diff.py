"""The diff: exactness, the accepted equivalences (on real exports of kernel
pairs written both ways), classification, files and output."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from schemas.ir_diff import DiffReport, Level, Owner, Severity
from tileir.diff import DisassemblyError, diff_files, diff_texts, read_ir, render_human

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FIXTURE_FILES = sorted(FIXTURES.glob("*.mlir"))


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.mlir").read_text()


def load_regenerate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tileir_regenerate", FIXTURES / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def categories(report: DiffReport, severity: Severity | None = None) -> set[str]:
    return {f.category for f in report.findings if severity is None or f.severity is severity}


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_an_ir_is_exact_against_itself(path: Path) -> None:
    report = diff_texts(path.read_text(), path.read_text())
    assert report.exact and report.level is Level.EXACT
    assert report.findings == []


EQUIVALENT_PAIRS = [
    ("equiv_cdiv_builtin", "equiv_cdiv_hand", "ceil_div"),
    ("equiv_min_builtin", "equiv_min_if", "min_select"),
    ("equiv_view_tile_index", "equiv_view_offset", "view_addressing"),
]


@pytest.mark.parametrize(("ref", "gen", "category"), EQUIVALENT_PAIRS)
@pytest.mark.parametrize("swap", [False, True], ids=["ref-first", "gen-first"])
def test_accepted_equivalences(ref: str, gen: str, category: str, swap: bool) -> None:
    """Each kernel pair differs only in one accepted form, whichever side holds it."""
    first, second = (gen, ref) if swap else (ref, gen)
    report = diff_texts(fixture(first), fixture(second))
    assert not report.exact
    assert report.level is Level.EQUIVALENT
    assert categories(report, Severity.EQUIVALENT) == {category}
    assert categories(report, Severity.CRITICAL) == set()
    assert categories(report, Severity.WARN) == set()
    equivalent = next(f for f in report.findings if f.severity is Severity.EQUIVALENT)
    assert equivalent.owner is Owner.EQUIVALENCE and equivalent.ref and equivalent.gen


def test_an_equivalence_needs_the_same_operands() -> None:
    """A hand ceil-div of a different divisor is not equivalent to the builtin."""
    hand = fixture("equiv_cdiv_hand").replace(
        "%cst_64_i32 = constant <i32: 64>", "%cst_64_i32 = constant <i32: 32>"
    )
    report = diff_texts(fixture("equiv_cdiv_builtin"), hand)
    assert report.level is Level.DIFFERENT
    assert "ceil_div" not in categories(report)


def test_min_select_needs_the_right_branch_order() -> None:
    """`row < limit ? limit : row` is max, not min."""
    swapped = fixture("equiv_min_if").replace(
        "    yield %blockId_x : tile<i32>\n  } else {\n    yield %cst_5_i32 : tile<i32>",
        "    yield %cst_5_i32 : tile<i32>\n  } else {\n    yield %blockId_x : tile<i32>",
    )
    assert swapped != fixture("equiv_min_if")
    report = diff_texts(fixture("equiv_min_builtin"), swapped)
    assert "min_select" not in categories(report)
    assert report.level is not Level.EQUIVALENT or categories(report, Severity.WARN)


def test_different_kernels_are_different() -> None:
    report = diff_texts(fixture("softmax"), fixture("softmax_f16"))
    assert report.level is Level.DIFFERENT
    assert {"tile_shape", "dtype", "conversion"} <= categories(report, Severity.CRITICAL)


def test_missing_block_swizzle_is_a_warning() -> None:
    report = diff_texts(fixture("persistent_swizzle"), fixture("persistent_plain"))
    assert "block_swizzle" in categories(report, Severity.WARN)
    assert categories(report, Severity.CRITICAL) == set()


def test_the_unrolled_kernel_aligns_op_for_op() -> None:
    text = fixture("unrolled")
    mutated = text.replace("padding_value = zero", "padding_value = neg_inf", 1)
    report = diff_texts(text, mutated)
    assert categories(report, Severity.CRITICAL) == {"padding_value"}
    assert report.counts.critical == 1


def test_entry_count_mismatch_is_critical() -> None:
    report = diff_texts(fixture("softmax") + fixture("vector_add"), fixture("softmax"))
    assert report.level is Level.DIFFERENT
    assert len(report.entries) == 2 and not report.entries[1].exact
    assert "entry_signature" in categories(report, Severity.CRITICAL)


def test_host_owned_findings_name_the_host() -> None:
    report = diff_texts(fixture("softmax"), fixture("softmax_f16"))
    hosts = [f for f in report.findings if f.category == "scalar_assume_on_runtime_dim"]
    assert hosts and all(f.owner is Owner.HOST and f.fix for f in hosts)


def test_findings_carry_op_attributes_and_positions() -> None:
    mutated = fixture("softmax").replace("padding_value = neg_inf", "padding_value = zero")
    report = diff_texts(fixture("softmax"), mutated)
    (found,) = [f for f in report.findings if f.category == "padding_value"]
    assert found.op == "make_partition_view"
    assert found.ref is not None and found.ref.line == 21
    assert found.gen is not None and found.gen.line == 21
    assert found.ref_attributes == {"padding_value": "neg_inf"}
    assert found.gen_attributes == {"padding_value": "zero"}


def test_json_round_trip_and_human_output() -> None:
    mutated = fixture("softmax").replace("padding_value = neg_inf", "padding_value = zero")
    report = diff_texts(fixture("softmax"), mutated)
    payload = json.loads(report.model_dump_json(indent=2))
    assert payload["level"] == "different" and payload["counts"]["critical"] == 1
    assert DiffReport.model_validate_json(report.model_dump_json()) == report
    human = render_human(report)
    assert human.startswith("IR diff: different (exact: no)")
    assert "padding_value" in human and "ref:21 gen:21" in human


def test_diff_files_reads_text_and_bytecode(tmp_path: Path) -> None:
    regenerate = load_regenerate()
    spec = regenerate.fixture_specs()["softmax"]
    bytecode = tmp_path / "softmax.bytecode"
    regenerate.export_bytecode(spec, bytecode)
    report = diff_files(bytecode, FIXTURES / "softmax.mlir")
    assert report.exact
    assert "entry @softmax_kernel_" in read_ir(bytecode)


def test_diff_files_rejects_what_it_cannot_read(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\xff\xfe\x00not ir")
    with pytest.raises(DisassemblyError):
        diff_files(junk, FIXTURES / "softmax.mlir")
    fake = tmp_path / "fake.bytecode"
    fake.write_bytes(b"\x7fTileIR\x00garbage")
    with pytest.raises(DisassemblyError):
        diff_files(fake, FIXTURES / "softmax.mlir")
    with pytest.raises(FileNotFoundError):
        diff_files(tmp_path / "missing.mlir", FIXTURES / "softmax.mlir")


def test_both_printers_of_one_bytecode_are_exact() -> None:
    """cutile-rs's own print and tileirdisasm's print of one cutile-rs kernel."""
    rust = (FIXTURES / "cutile_rs" / "softmax_port.rs.mlir").read_text()
    disassembled = (FIXTURES / "cutile_rs" / "softmax_port.disasm.mlir").read_text()
    report = diff_texts(disassembled, rust)
    assert report.exact, render_human(report)
    assert report.findings == []
    assert report.gen_printer == "cutile-rs" and report.ref_printer == "tileirdisasm"


def test_rust_port_against_its_python_reference_is_only_noise() -> None:
    """The hand-written softmax port (f32, 1024 columns) restates the reference
    launch's facts; what differs is noise: dead constants, extra non-negativity
    assumes on the block ids and trivial div_by<1> assumes."""
    port = (FIXTURES / "cutile_rs" / "softmax_port.disasm.mlir").read_text()
    report = diff_texts(fixture("softmax"), port)
    assert report.level in (Level.EXACT, Level.EQUIVALENT), render_human(report)
    assert all(f.severity is Severity.NOISE for f in report.findings)
    assert categories(report) <= {"dead_constant", "nonneg_assume", "trivial_assume"}


@pytest.mark.parametrize(
    ("gen_divisor", "severity"), [("8", "critical"), ("2", "warn"), ("3", "critical")]
)
def test_scalar_divisibility_claims(gen_divisor: str, severity: str) -> None:
    """A stride divisibility the reference does not imply is critical; a weaker one a note."""
    mutated = fixture("softmax").replace(
        "%assume_0 = assume div_by<4>, %arg3", f"%assume_0 = assume div_by<{gen_divisor}>, %arg3"
    )
    report = diff_texts(fixture("softmax"), mutated)
    found = [f for f in report.findings if f.category == "scalar_assume_on_runtime_dim"]
    assert [f.severity.value for f in found] == [severity]
