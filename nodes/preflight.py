"""The preflight stage: every tool and library the pipeline needs, checked before
any work starts (`toolchain.doctor`, the engine of `tileport doctor`).

PASS when every required piece is there; BLOCKED otherwise, with one line per
missing piece saying what it is and how to get it. Optional pieces (a GPU,
Triton with the Tile IR backend) never block: what their absence means for
this run is written as a note, so nobody mistakes it for a measured result.
"""

from __future__ import annotations

from schemas.doctor import Check, DoctorReport
from schemas.pipeline import Stage
from schemas.reports import PreflightCheck, PreflightReport
from schemas.state import PipelineState, StageResult
from schemas.verdicts import PreflightVerdict
from toolchain.doctor import run_doctor

FALLBACK_REMEDY = "run `tileport doctor` for details, then `make setup`"


def run(state: PipelineState) -> StageResult:
    return StageResult(preflight_report(state, run_doctor()))


def preflight_report(state: PipelineState, doctor: DoctorReport) -> PreflightReport:
    checks = [_as_preflight_check(check) for check in doctor.checks]
    missing = [check for check in checks if not check.ok]
    notes = [_optional_note(check, state) for check in doctor.checks if check.optional]
    meta = state.report_meta(Stage.PREFLIGHT)
    if not missing:
        return PreflightReport(
            **meta,
            verdict=PreflightVerdict.PASS,
            checks=checks,
            summary=f"{len(checks)} checks passed",
            notes=notes,
        )
    lines = [f"missing {check.name}: {check.remedy}" for check in missing]
    return PreflightReport(
        **meta,
        verdict=PreflightVerdict.BLOCKED,
        checks=checks,
        summary="; ".join(lines),
        notes=[*lines, *notes],
    )


def _as_preflight_check(check: Check) -> PreflightCheck:
    detail = " ".join(part for part in (check.version, check.path, check.note) if part)
    remedy = "" if check.ok else (check.fix or FALLBACK_REMEDY)
    return PreflightCheck(name=check.name, ok=check.ok, detail=detail, remedy=remedy)


def _optional_note(check: Check, state: PipelineState) -> str:
    found = check.note or check.version or "present"
    if check.name == "gpu" and state.options.no_gpu:
        return f"gpu: {found}; --no-gpu given, GPU stages will not run"
    return f"{check.name} (optional): {found}"
