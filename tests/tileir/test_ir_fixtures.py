"""The committed fixture IRs are what the cuTile Python exporter produces today:
one fixture is re-exported here (no GPU needed) and compared byte for byte."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"


def load_regenerate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tileir_regenerate", FIXTURES / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug-info"])
def test_softmax_fixture_regenerates_identically(debug: bool) -> None:
    regenerate = load_regenerate()
    spec = regenerate.fixture_specs()["softmax"]
    committed = regenerate.fixture_path("softmax", debug=debug).read_text()
    assert regenerate.export_text(spec, debug=debug) == committed


def test_every_fixture_source_has_a_committed_ir() -> None:
    regenerate = load_regenerate()
    names = set(regenerate.fixture_specs())
    committed = {p.stem for p in FIXTURES.glob("*.mlir") if not p.stem.endswith(".debug")}
    assert names == committed


def test_check_mode_reports_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    regenerate = load_regenerate()
    stale = tmp_path / "vector_add.mlir"
    stale.write_text("entry @stale() {\n}\n")
    monkeypatch.setattr(regenerate, "fixture_path", lambda name, debug=False: stale)
    assert regenerate.main(["--check", "--only", "vector_add"]) == 1
