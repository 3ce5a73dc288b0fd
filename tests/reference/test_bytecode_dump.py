"""A variant whose reference is a Tile IR bytecode dump (`reference_bytecode`):
the dumps in dumps/ are what cuTile Python writes under CUDA_TILE_DUMP_BYTECODE
for the corpus's vector_add (make_dumps.py). Taken from the dump, the
reference is the export's, stages A and B reach the exported reference's
verdicts, and a missing, corrupt or wrong-version file is a clear error."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from app import cli_port
from nodes.analyzer import run
from nodes.kernel_writer.stage import port_kernel
from schemas.kernel_writer import PortReport
from schemas.pipeline import RunOptions
from schemas.reports import AnalysisReport
from schemas.run_layout import RunLayout
from schemas.state import PipelineState
from schemas.verdicts import AnalyzerVerdict, KernelWriterVerdict
from tileir.mlir import parse_module
from toolchain.bytecode_dump import MAGIC, dump_notes, entry_symbols, location_files
from toolchain.env import REPO_ROOT, rs_export_binary
from toolchain.reference_export import ReferenceExportError, export_from_spec, main

DUMPS = Path(__file__).parent / "dumps"
DUMP = DUMPS / "vector_add.tileirbc"
CORPUS_SPEC = REPO_ROOT / "examples" / "kernels" / "vector_add.port.yaml"
SYMBOL = "vector_add_kernel_Kt1_A1f32_1t1_p16_A1f32_1t1_p16_A1f32_1t1_p16_I1024"


def dump_spec(directory: Path, dump: Path | str, **changes: object) -> Path:
    """vector_add's spec in `directory`, its variant's reference the dump (copied
    beside it when it is a file, so the spec names it by a relative path)."""
    data = yaml.safe_load(CORPUS_SPEC.read_text())
    data["source"] = str(CORPUS_SPEC.parent / "vector_add.py")
    if isinstance(dump, Path) and dump.exists():
        (directory / "dumps").mkdir(exist_ok=True)
        shutil.copyfile(dump, directory / "dumps" / dump.name)
        dump = f"dumps/{dump.name}"
    data["variants"][0]["reference_bytecode"] = str(dump)
    data.update(changes)
    spec = directory / "vector_add.port.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def export_error(tmp_path: Path, dump: Path | str) -> str:
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(dump_spec(tmp_path, dump), tmp_path / "out")
    error = caught.value.error
    assert error.kind == "spec_error" and error.variant == "tile1024"
    assert error.file is not None and error.file.endswith(Path(str(dump)).name)
    return error.message


def test_committed_dumps_are_what_the_script_writes(tmp_path: Path) -> None:
    loader = importlib.util.spec_from_file_location("make_dumps", DUMPS / "make_dumps.py")
    assert loader is not None and loader.loader is not None
    script: ModuleType = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(script)
    for made in script.make_dumps(tmp_path):
        assert made.read_bytes() == (DUMPS / made.name).read_bytes(), made.name


def test_the_dump_is_the_exported_reference(tmp_path: Path) -> None:
    exported = export_from_spec(CORPUS_SPEC, tmp_path / "exported")
    dumped = export_from_spec(dump_spec(tmp_path, DUMP), tmp_path / "dumped")
    [a], [b] = exported.variants, dumped.variants
    assert b.symbol == a.symbol == SYMBOL
    assert b.dump is not None and b.dump.endswith("dumps/vector_add.tileirbc")
    assert b.specialisation == a.specialisation and b.specialisation.config == "ragged_f32"
    ir = (tmp_path / "dumped" / b.mlir).read_text()
    assert ir == (tmp_path / "exported" / a.mlir).read_text()  # the bytecode differs in paths
    assert (tmp_path / "dumped" / b.bytecode).read_bytes() == DUMP.read_bytes()
    assert set(b.cubins) == {"sm_90", "sm_100"}
    assert all((tmp_path / "dumped" / cubin).stat().st_size > 0 for cubin in b.cubins.values())
    assert dumped.cuda_tile_version == "unknown (bytecode dump)"
    loc = (tmp_path / "dumped" / b.loc_mlir).read_text()
    assert location_files(loc) == {"vector_add.py"}


def test_a_dump_without_locations_is_said_so(tmp_path: Path) -> None:
    record = export_from_spec(dump_spec(tmp_path, DUMP), tmp_path / "out")
    [variant] = record.variants
    [note] = dump_notes(record, tmp_path / "out", "vector_add.py")
    assert (
        "its locations name vector_add.py" in note and "taken as configuration ragged_f32" in note
    )
    plain = (tmp_path / "out" / variant.mlir).read_text()
    (tmp_path / "out" / variant.loc_mlir).write_text(plain)  # what a dump without -g info gives
    [note] = dump_notes(record, tmp_path / "out", "vector_add.py")
    assert "carries no source locations: names come from the IR" in note


def test_missing_file(tmp_path: Path) -> None:
    assert export_error(tmp_path, "dumps/absent.tileirbc") == "reference_bytecode: no such file"


def test_corrupt_files(tmp_path: Path) -> None:
    text = tmp_path / "kernel.mlir"
    text.write_text("entry @k() {\n  return\n}\n")
    assert "not Tile IR bytecode: a text file" in export_error(tmp_path, text)
    junk = tmp_path / "junk.tileirbc"
    junk.write_bytes(bytes(range(200)))
    assert "not Tile IR bytecode: a file starting 00 01 02" in export_error(tmp_path, junk)
    truncated = tmp_path / "truncated.tileirbc"
    truncated.write_bytes(DUMP.read_bytes()[:100])  # a good header, a cut body
    message = export_error(tmp_path, truncated)
    assert message.startswith("reference_bytecode: tileirdisasm cannot read it")
    assert "failed to read provided Tile IR bytecode" in message


def test_other_bytecode_versions(tmp_path: Path) -> None:
    message = export_error(tmp_path, DUMPS / "vector_add.v13_1.tileirbc")
    assert "Tile IR bytecode 13.1, not 13.3" in message
    assert f"tileirdisasm reads it (entry @{SYMBOL})" in message
    future = tmp_path / "future.tileirbc"
    future.write_bytes(MAGIC + bytes([14, 0, 0, 0]) + DUMP.read_bytes()[len(MAGIC) + 4 :])
    message = export_error(tmp_path, future)
    assert "Tile IR bytecode 14.0, not 13.3" in message
    assert "unsupported Tile version 14.0.0" in message


def test_the_command_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = dump_spec(tmp_path, "dumps/absent.tileirbc")
    assert main([str(spec), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "absent.tileirbc: spec_error [variant tile1024]: reference_bytecode: no such" in err
    assert "Traceback" not in err


def analyse(spec: Path, run_dir: Path) -> AnalysisReport:
    RunLayout(run_dir).prepare_fresh()
    state = PipelineState(
        run_id="dump-under-test",
        operator="vector_add",
        spec_path=str(spec),
        run_dir=str(run_dir),
        options=RunOptions(no_gpu=True),
        started_at=datetime.now(UTC),
    )
    report = run(state).report
    assert isinstance(report, AnalysisReport)
    return report


def test_analyzer_takes_the_dump(tmp_path: Path) -> None:
    exported = analyse(CORPUS_SPEC, tmp_path / "exported")
    dumped = analyse(dump_spec(tmp_path, DUMP), tmp_path / "dumped")
    assert exported.verdict is dumped.verdict is AnalyzerVerdict.PASS, dumped.problems
    assert exported.analysis is not None and dumped.analysis is not None
    assert dumped.analysis.ops == exported.analysis.ops
    assert dumped.analysis.variants == exported.analysis.variants
    [variant] = dumped.analysis.variants
    reference = (tmp_path / "dumped" / variant.reference_ir).read_text()
    assert reference == (tmp_path / "exported" / variant.reference_ir).read_text()
    notes = "\n".join(dumped.notes)
    assert "variant tile1024: reference is the bytecode dump" in notes
    assert "exported from configuration" not in notes


def test_a_triton_reference_without_its_source(tmp_path: Path) -> None:
    """Triton is not installed here; the dump stands in for the export, and the
    source may be absent (a Triton-TileIR kernel's)."""
    spec = dump_spec(
        tmp_path, DUMP, reference_backend="triton_tileir", source="vector_add_triton.py"
    )
    report = analyse(spec, tmp_path / "run")
    assert report.verdict is AnalyzerVerdict.PASS, report.problems
    notes = "\n".join(report.notes)
    assert "source vector_add_triton.py: cannot read" in notes
    assert "the spec's parameters stand in for the kernel's" in notes
    spec.write_text(spec.read_text().replace("reference_bytecode: dumps/", "description: "))
    report = analyse(spec, tmp_path / "exporting")
    assert report.verdict is AnalyzerVerdict.BLOCKED
    assert "a variant can name its Tile IR bytecode dump instead" in report.summary


def test_analyzer_names_a_bad_dump(tmp_path: Path) -> None:
    report = analyse(dump_spec(tmp_path, "dumps/absent.tileirbc"), tmp_path / "run")
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    [problem] = report.problems
    assert "absent.tileirbc: reference_bytecode: no such file [variant tile1024]" in problem


@pytest.mark.skipif(not rs_export_binary().exists(), reason="tileport-rs-export is not built")
@pytest.mark.slow
def test_port_kernel_from_a_dump_reaches_the_exported_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    cli_port.register(parser.add_subparsers())
    spec = dump_spec(tmp_path, DUMP)
    args = parser.parse_args(["port-kernel", str(spec), "--out", str(tmp_path / "dumped")])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("COMPILED")
    assert "note: variant tile1024: the reference is the bytecode dump" in printed
    dumped = PortReport.model_validate_json((tmp_path / "dumped" / "port_report.json").read_text())
    exported = port_kernel(CORPUS_SPEC, tmp_path / "exported")
    assert dumped.verdict is exported.verdict is KernelWriterVerdict.COMPILED, exported.summary
    [check] = dumped.checks
    assert check.config == "tile1024__ragged_f32" and check.exact and check.sass_identical
    assert not dumped.generics  # nothing to tell a generic from a literal
    [literal] = dumped.literal_entries
    assert literal.bindings == {"TILE": "1024"} and "bytecode dump" in literal.reason
    [note] = dumped.notes
    assert "ragged_f16, tiny_f32 have other specialisations and are not checked" in note
    assert "names come from the source" in note
    kernel = (tmp_path / "dumped" / "kernel.rs").read_text()
    assert "a: *mut f32" in kernel and "1024" in kernel


FIXTURE_IR = sorted((REPO_ROOT / "tests" / "tileir" / "fixtures").rglob("*.mlir"))


@pytest.mark.parametrize("path", FIXTURE_IR, ids=lambda path: path.name)
def test_a_dumps_entry_symbols_are_the_ones_the_parser_finds(path: Path) -> None:
    """The dump import reads only the entry symbols (toolchain/ does not parse IR):
    on every IR fixture, both printers, the same as tileir's parser."""
    text = path.read_text(encoding="utf-8")
    assert entry_symbols(text) == [entry.symbol for entry in parse_module(text).entries]


def test_entry_symbols_skip_what_only_looks_like_an_entry() -> None:
    text = (
        "// entry @commented\n"
        '  cuda_tile.entry @"quoted.name"(%a: tile<i32>) {\n'
        "  %x = entry_like\n"
    )
    assert entry_symbols(text) == ['"quoted.name"']
