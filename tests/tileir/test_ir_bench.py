"""The timing command prints its figures, and refuses an empty fixture folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tileir import bench

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_bench_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FIXTURES / "softmax.mlir", tmp_path / "softmax.mlir")
    assert bench.main(["--repeat", "1", "--fixtures", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("machine: ")
    assert "softmax.mlir" in out and "mutation suite:" in out


def test_bench_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FIXTURES / "vector_add.mlir", tmp_path / "vector_add.mlir")
    assert bench.main(["--repeat", "1", "--fixtures", str(tmp_path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (row,) = payload["fixtures"]
    assert row["name"] == "vector_add.mlir" and row["ops"] > 10 and row["parse_ms"] > 0
    assert payload["mutations"]["cases"] >= 12


def test_bench_refuses_an_empty_folder(tmp_path: Path) -> None:
    assert bench.main(["--repeat", "1", "--fixtures", str(tmp_path)]) == 2
