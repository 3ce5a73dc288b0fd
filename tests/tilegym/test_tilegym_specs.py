"""TileGym as it is: specs from its recorded launches, exported from the unmodified
tree, compile byte for byte what the recorded launches compiled.

The data is the unmodified TileGym snapshot and its recorded launches beside the
checkout (`TILEPORT_TILEGYM`, `TILEPORT_TILEGYM_LAUNCHES` override them)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from app.cli import main as tileport
from nodes.host_builder.binding import (
    GenericRule,
    VariantBinding,
    _variant_constants,
    held_values,
    host_constants,
)
from nodes.kernel_writer.stage import port_kernel
from nodes.spec_writer.fidelity import check_spec, read_symbols
from nodes.spec_writer.writer import MAX_PROVING_CONFIGS, read_signature_hints, write_specs
from schemas.launch_capture import read_launch_records
from schemas.port_spec import load_port_spec
from schemas.verdicts import KernelWriterVerdict
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


GATHER_SPEC = """
spec_version: 1
name: rms_norm_kernel_gather
source_root: {root}
module: tilegym.ops.cutile.rms_norm
kernel: _rms_norm_kernel_gather
reference_backend: cutile_python
launch_path: direct
arrays:
  x: {{rank: 2, shape: [X_0, X_1], dtypes: [float16, float32], role: in}}
  w: {{rank: 1, shape: [X_1], dtypes: [float16, float32], role: in}}
  out: {{rank: 2, shape: [X_0, X_1], dtypes: [float16, float32], role: out}}
  Rstd: {{rank: 1, shape: [X_0], dtypes: [float32], role: out}}
constants:
  N: {{type: int}}
  EPS: {{type: float}}
  OFFSET: {{type: float}}
  TILE_SIZE: {{type: int}}
grid: [X_0]
variants:
- {{name: v0, when: "not (cdiv(N, TILE_SIZE) * TILE_SIZE != N)"}}
- {{name: v1, when: "cdiv(N, TILE_SIZE) * TILE_SIZE != N"}}
test_configs:
- name: t0
  dims: {{X_0: 256, X_1: 256}}
  dtype: float16
  constants: {{N: 256, EPS: 1.0e-05, OFFSET: 0.0, TILE_SIZE: 256}}
- name: t1
  dims: {{X_0: 256, X_1: 768}}
  dtype: float16
  constants: {{N: 768, EPS: 1.0e-05, OFFSET: 0.0, TILE_SIZE: 1024}}
- name: t1_ragged
  dims: {{X_0: 256, X_1: 767}}
  dtype: float32
  constants: {{N: 767, EPS: 1.0e-05, OFFSET: 0.0, TILE_SIZE: 1024}}
reference: {{oracle: reference_kernel, origin: the reference kernel}}
tolerances:
  float16: {{atol: 1.0e-05, rtol: 0.001, source: torch.testing.assert_close defaults}}
  float32: {{atol: 1.0e-05, rtol: 1.3e-06, source: torch.testing.assert_close defaults}}
"""


def test_what_an_entry_generic_only_in_n_holds_is_checked_at_launch(tmp_path: Path) -> None:
    """rms_norm's gather kernel, the variant that checks bounds, proven on one tile
    of 1024 (N 768 and 767). An entry generic in N alone holds the tile size and the
    trip count `cdiv(N, TILE_SIZE)` as literals, and EPS and OFFSET: a launch of N
    3006 (three tiles) must be refused, not run one tile long."""
    path = tmp_path / "rms_norm_kernel_gather.port.yaml"
    path.write_text(GATHER_SPEC.format(root=SOURCE_ROOT.resolve()))
    spec = load_port_spec(path)
    passed = {arg.name for arg in host_constants(spec)}
    bounded = spec.variants[1]
    binding = VariantBinding(
        index=1,
        name=bounded.name,
        when=bounded.when,
        entry="_rms_norm_kernel_gather_v1",
        constants=_variant_constants(spec, dict(bounded.constants), passed),
        grid=(1, 1, 1),
        params=(),
        generics=(GenericRule("N", "constant", constant="N", const_type="i32"),),
        preconditions=(),
    )
    derived = {
        "num_tiles": "cdiv(N, TILE_SIZE)",
        "check_bound": "cdiv(N, TILE_SIZE) * TILE_SIZE != N",  # the variant's condition
    }
    assert held_values(spec, binding, derived) == (
        ("EPS", 1e-05),
        ("OFFSET", 0.0),
        ("TILE_SIZE", 1024),
        ("cdiv(N, TILE_SIZE)", 1),
    )
    # Generic in the tile size too, the trip count is still held; generic in the
    # trip count as well (as cutile-rs computes it), the entry holds only the floats.
    tile = GenericRule("TILE_SIZE", "constant", constant="TILE_SIZE", const_type="i32")
    tiled = replace(binding, generics=(*binding.generics, tile))
    assert held_values(spec, tiled, derived)[2:] == (("cdiv(N, TILE_SIZE)", 1),)
    trips = GenericRule("num_tiles", "derived", expression="cdiv(N, TILE_SIZE)")
    counted = replace(tiled, generics=(*tiled.generics, trips))
    assert held_values(spec, counted, derived) == (("EPS", 1e-05), ("OFFSET", 0.0))


@pytest.mark.slow
def test_the_bounds_checked_gather_is_generic_in_its_tile_and_trip_count(tmp_path: Path) -> None:
    """The same kernel ported: its bounds-checked variant, recorded on one tile of
    1024 only, lifts generic in N, TILE_SIZE and the trip count (no literal entry per
    constant set), so a launch of another tile or several tiles is served."""
    path = tmp_path / "rms_norm_kernel_gather.port.yaml"
    path.write_text(GATHER_SPEC.format(root=SOURCE_ROOT.resolve()))
    report = port_kernel(path, tmp_path / "port")
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.literal_entries == []
    assert {"N", "TILE_SIZE", "num_tiles"} <= {g.name for g in report.generics}


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
