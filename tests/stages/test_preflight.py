"""The preflight stage: the real doctor on this machine, and a doctor report with
missing pieces."""

from __future__ import annotations

from pathlib import Path

from stage_support import EXAMPLES, fresh_state

from nodes.preflight import FALLBACK_REMEDY, preflight_report, run
from schemas.doctor import Check, DoctorReport
from schemas.pipeline import RunOptions
from schemas.reports import PreflightReport
from schemas.verdicts import PreflightVerdict
from toolchain.doctor import run_doctor


def test_real_toolchain(tmp_path: Path) -> None:
    doctor = run_doctor()
    report = run(fresh_state(EXAMPLES / "softmax.port.yaml", tmp_path / "run")).report
    assert isinstance(report, PreflightReport)
    expected = PreflightVerdict.PASS if doctor.ok else PreflightVerdict.BLOCKED
    assert report.verdict is expected
    assert [c.name for c in report.checks] == [c.name for c in doctor.checks]
    assert any(note.startswith("gpu: ") for note in report.notes)  # --no-gpu in fresh_state


def test_missing_pieces_block_with_one_line_each(tmp_path: Path) -> None:
    doctor = DoctorReport(
        ok=False,
        cuda_toolkit_path="cu13",
        checks=[
            Check(name="tileiras", ok=False, fix="run `make setup` (installs the 13.4.92 wheels)"),
            Check(name="cargo", ok=False, fix="install Rust ≥ 1.89 with rustup"),
            Check(name="libnvvm", ok=False),
            Check(name="ptxas", ok=True, version="13.4"),
            Check(name="gpu", ok=True, optional=True, note="no GPU (no CUDA driver found)"),
        ],
    )
    state = fresh_state(
        EXAMPLES / "softmax.port.yaml", tmp_path / "run", options=RunOptions(no_gpu=False)
    )
    report = preflight_report(state, doctor)
    assert report.verdict is PreflightVerdict.BLOCKED
    assert report.notes[:3] == [
        "missing tileiras: run `make setup` (installs the 13.4.92 wheels)",
        "missing cargo: install Rust ≥ 1.89 with rustup",
        f"missing libnvvm: {FALLBACK_REMEDY}",
    ]
    assert report.summary == "; ".join(report.notes[:3])
    assert "gpu (optional): no GPU (no CUDA driver found)" in report.notes
    assert [c.name for c in report.checks if not c.ok] == ["tileiras", "cargo", "libnvvm"]


def test_optional_pieces_never_block(tmp_path: Path) -> None:
    doctor = DoctorReport(
        ok=True,
        cuda_toolkit_path="cu13",
        checks=[
            Check(name="tileiras", ok=True, version="13.4", path="bin/tileiras"),
            Check(name="triton-tileir", ok=True, optional=True, note="not installed"),
        ],
    )
    report = preflight_report(fresh_state(EXAMPLES / "softmax.port.yaml", tmp_path / "r"), doctor)
    assert report.verdict is PreflightVerdict.PASS
    assert report.checks[0].detail == "13.4 bin/tileiras"
    assert report.notes == ["triton-tileir (optional): not installed"]
