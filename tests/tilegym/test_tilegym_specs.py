"""TileGym as it is: specs from its recorded launches, exported from the unmodified
tree, compile byte for byte what the recorded launches compiled.

The data is the unmodified TileGym snapshot and its recorded launches beside the
checkout (`TILEPORT_TILEGYM`, `TILEPORT_TILEGYM_LAUNCHES` override them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.cli import main as tileport
from nodes.spec_writer.fidelity import check_spec, read_symbols
from nodes.spec_writer.writer import MAX_PROVING_CONFIGS, read_signature_hints, write_specs
from schemas.launch_capture import read_launch_records
from schemas.port_spec import load_port_spec
from toolchain.env import REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
LAUNCHES = Path(
    os.environ.get("TILEPORT_TILEGYM_LAUNCHES", REPO_ROOT.parent / "shared" / "tilegym-launches")
)
SOURCE_ROOT = TILEGYM / "src"
pytestmark = pytest.mark.skipif(
    not (SOURCE_ROOT.is_dir() and (LAUNCHES / "launches.jsonl").is_file()),
    reason="the TileGym snapshot and its recorded launches are not beside the checkout",
)


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tilegym-specs")
    records = read_launch_records(LAUNCHES / "launches.jsonl")
    written, problems = write_specs(
        records, SOURCE_ROOT, out, read_signature_hints(LAUNCHES / "signatures.jsonl")
    )
    assert problems == []
    assert len(written) == len({(r.file, r.kernel) for r in records}) == 49
    return out


def test_every_recorded_kernel_gets_a_valid_spec(specs: Path) -> None:
    for path in sorted(specs.glob("*.port.yaml")):
        spec = load_port_spec(path)
        assert spec.module is not None and spec.module.startswith("tilegym.ops.cutile")
        assert 1 <= len(spec.test_configs) <= MAX_PROVING_CONFIGS
        assert spec.reference.oracle == "reference_kernel"
        assert (path.parent / spec.source).resolve().is_file()


@pytest.mark.slow
def test_every_spec_compiles_what_its_launches_compiled(specs: Path) -> None:
    recorded = read_symbols(LAUNCHES / "signatures.jsonl")
    results = [r for p in sorted(specs.glob("*.port.yaml")) for r in check_spec(p, recorded)]
    bad = [f"{r.spec}[{r.variant}] {r.symbol or r.problem}" for r in results if not r.ok]
    assert bad == []
    assert len({r.spec for r in results}) == 49


def test_hints_the_host_set_reach_the_spec(specs: Path) -> None:
    rope = load_port_spec(specs / "rope_kernel.port.yaml")
    assert {v.hints.occupancy for v in rope.variants if v.hints} >= {9}


def test_the_cli_writes_specs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    relu = [
        line
        for line in (LAUNCHES / "launches.jsonl").read_text().splitlines()
        if '"_relu_fwd_kernel"' in line
    ]
    launches = tmp_path / "launches.jsonl"
    launches.write_text("\n".join(relu) + "\n")
    code = tileport(
        ["specs", str(launches), "--source-root", str(SOURCE_ROOT), "--out", str(tmp_path / "out")]
    )
    assert code == 0
    assert (tmp_path / "out" / "relu_fwd_kernel.port.yaml").is_file()
    assert "wrote 1 spec(s)" in capsys.readouterr().err


def test_a_malformed_launch_line_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = (LAUNCHES / "launches.jsonl").read_text().splitlines()[0]
    launches = tmp_path / "launches.jsonl"
    launches.write_text(f"{good}\n{{not json\n")
    code = tileport(
        ["specs", str(launches), "--source-root", str(SOURCE_ROOT), "--out", str(tmp_path)]
    )
    assert code == 2
    assert f"{launches}:2: not JSON" in capsys.readouterr().err


def _one_record(tmp_path: Path, **changes: object) -> Path:
    record = json.loads((LAUNCHES / "launches.jsonl").read_text().splitlines()[0])
    record.update(changes)
    launches = tmp_path / "launches.jsonl"
    launches.write_text(json.dumps(record) + "\n")
    return launches


def test_a_module_outside_the_source_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    launches = _one_record(tmp_path, file="tilegym/ops/cutile/no_such_op.py")
    code = tileport(
        ["specs", str(launches), "--source-root", str(SOURCE_ROOT), "--out", str(tmp_path / "o")]
    )
    assert code == 1
    assert (
        "no module 'tilegym.ops.cutile.no_such_op' under the source root" in capsys.readouterr().err
    )


def test_a_kernel_that_is_not_a_ct_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    launches = _one_record(tmp_path, kernel="geglu")
    code = tileport(
        ["specs", str(launches), "--source-root", str(SOURCE_ROOT), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "'geglu' is a function, not a @ct.kernel function" in err
    assert "geglu.py" in err


CAPTURED = REPO_ROOT / "bench" / "captures" / "tilegym-h200-2026-12-01" / "launches.jsonl"


@pytest.mark.slow
def test_the_h200_capture_becomes_specs_that_compile_what_was_launched(tmp_path: Path) -> None:
    """The records `tileport capture` made on the H200 carry their entry symbols."""
    records = read_launch_records(CAPTURED)
    written, problems = write_specs(records, SOURCE_ROOT, tmp_path)
    assert problems == []
    assert len(written) == len({(r.file, r.kernel) for r in records}) >= 32
    recorded = {r.symbol for r in records if r.symbol}
    results = [r for spec in written for r in check_spec(spec.path, recorded)]
    assert [f"{r.spec}[{r.variant}]" for r in results if not r.ok] == []
