"""The op mapping is proven, not asserted: every probe kernel compiles through
the exporter, and for every op of issue 3's vocabulary each mapped construct
emits a line matching the op's pattern (op name and attributes)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from nodes.kernel_writer.op_table import OP_TABLE, SUPPORTED_OPS, Probe, mapping
from schemas.export import RustExportRequest
from tileir.vocabulary import VOCABULARY
from toolchain.env import rs_export_binary
from toolchain.rust_export import export_once
from toolchain.tools import tileirdisasm

PROBES = Path(__file__).parent / "fixtures" / "probes"
GAPS_DOC = Path(__file__).resolve().parents[2] / "docs" / "UPSTREAM_GAPS.md"
MAPPING_DOC = Path(__file__).resolve().parents[2] / "docs" / "OP_MAPPING.md"

needs_exporter = pytest.mark.skipif(
    not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
)


@cache
def probe_ir(fixture: str, kernel: str, generics: tuple[str, ...], target: str, out: str) -> str:
    bytecode = Path(out) / f"{fixture}.{kernel}.{target}.bytecode"
    response = export_once(
        RustExportRequest(
            source=str(PROBES / f"{fixture}.rs"),
            kernel=kernel,
            generics=list(generics),
            target=target,
            bytecode_out=str(bytecode),
        )
    )
    assert response.ok, f"{fixture}.rs does not compile: {response.error}"
    return tileirdisasm(bytecode)


def test_vocabulary_is_63_distinct_ops() -> None:
    assert len(VOCABULARY) == 63
    assert len(set(VOCABULARY)) == 63


def test_every_vocabulary_op_is_mapped() -> None:
    missing = [op for op in VOCABULARY if op not in SUPPORTED_OPS]
    assert missing == []


def test_every_mapping_has_a_probe_and_a_construct() -> None:
    for entry in OP_TABLE:
        assert entry.probes, entry.op
        assert entry.rust.strip(), entry.op
        for probe in entry.probes:
            assert (PROBES / f"{probe.fixture}.rs").exists(), probe.fixture
            re.compile(probe.pattern)


def test_mapping_lookup_rejects_unknown_ops() -> None:
    assert mapping("mmaf").op == "mmaf"
    with pytest.raises(KeyError):
        mapping("no_such_op")


def test_every_gap_is_documented() -> None:
    text = GAPS_DOC.read_text()
    for entry in OP_TABLE:
        for gap in entry.gaps:
            assert f"## {gap}:" in text, f"{entry.op} cites {gap}, missing from UPSTREAM_GAPS.md"


def test_every_op_is_in_the_mapping_doc() -> None:
    text = MAPPING_DOC.read_text()
    for entry in OP_TABLE:
        assert f"`{entry.op}`" in text, entry.op


def _cases() -> list[tuple[str, Probe]]:
    return [(entry.op, probe) for entry in OP_TABLE for probe in entry.probes]


@needs_exporter
@pytest.mark.parametrize(("op", "probe"), _cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_probe_emits_the_op(
    op: str, probe: Probe, tmp_path_factory: pytest.TempPathFactory
) -> None:
    out = tmp_path_factory.getbasetemp() / "probes"
    out.mkdir(exist_ok=True)
    text = probe_ir(probe.fixture, probe.kernel, probe.generics, probe.target, str(out))
    pattern = re.compile(probe.pattern)
    assert any(pattern.search(line) for line in text.splitlines()), (
        f"{op}: no line of {probe.fixture}.rs's IR matches {probe.pattern!r}"
    )


@needs_exporter
def test_a_broken_probe_is_reported(tmp_path: Path) -> None:
    """The probe harness fails loudly on a kernel that does not compile."""
    source = tmp_path / "broken.rs"
    source.write_text(
        "#[cutile::module]\npub mod broken {\n    use cutile::core::*;\n"
        "    #[cutile::entry()]\n    unsafe fn broken(x: *mut f32) {\n"
        "        let y: Tile<f32, { [4] }> = no_such_op(x);\n    }\n}\n"
    )
    response = export_once(
        RustExportRequest(source=str(source), kernel="broken", bytecode_out=str(tmp_path / "b"))
    )
    assert not response.ok
    assert response.error_kind == "compile"
