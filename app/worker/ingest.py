"""After a run: its files into the blob store and the artifacts table, its IR
dumps, CUPTI and correctness results into their tables, and a patch of the
port. Re-running it on the same run gives the same rows. The files alone are
also stored after each stage (`ingest_files`): artifacts are served from the
store only, so a live run shows what its ended stages left."""

from __future__ import annotations

import difflib
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.artifacts import kind_of
from app.conversions import blob_store, record_event, run_dir
from app.settings import Settings
from app.storage.database import transaction
from app.storage.models import Artifact, Conversion, CorrectnessResult, CuptiResult, IrDump
from schemas.reports import CorrectnessReport, PerfReport
from schemas.run_layout import GENERATED_DIR, HISTORY_DIR, HOST_DIR, REFERENCE_DIR, REPORTS_DIR

log = logging.getLogger("tileport.ingest")

MAX_ARTIFACT_BYTES = 200 * 1024 * 1024
MAX_ARTIFACTS = 5000
SERVICE_DIR = "service"
PATCH_PATH = f"{SERVICE_DIR}/port.patch"
IR_FORMATS = {".mlir": "text", ".bytecode": "bytecode", ".tileirbc": "bytecode"}
PORT_FILES = (f"{GENERATED_DIR}/kernel.rs", f"{HOST_DIR}/ffi.rs", f"{HOST_DIR}/wrapper.py")


def run_files(root: Path) -> list[Path]:
    """Regular files of the run directory that stay inside it (symlinks resolved)."""
    base = root.resolve()
    found: list[Path] = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        if not path.resolve().is_relative_to(base):
            continue
        found.append(path)
        if len(found) >= MAX_ARTIFACTS:
            break
    return found


def write_port_patch(root: Path, operator: str) -> None:
    """A patch that adds the port's sources, for applying in a checkout."""
    chunks: list[str] = []
    for relative in PORT_FILES:
        source = root / relative
        if not source.is_file():
            continue
        lines = source.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        target = f"b/ported/{operator}/{Path(relative).name}"
        chunks.extend(difflib.unified_diff([], lines, "/dev/null", target))
    patch = root / PATCH_PATH
    if chunks:
        patch.parent.mkdir(parents=True, exist_ok=True)
        patch.write_text("".join(chunks), encoding="utf-8")


def store_artifacts(session: Session, settings: Settings, conversion_id: str) -> None:
    root = run_dir(settings, conversion_id)
    blobs = blob_store(settings)
    existing = {
        row.path: row
        for row in session.scalars(select(Artifact).where(Artifact.conversion_id == conversion_id))
    }
    for path in run_files(root):
        relative = path.relative_to(root).as_posix()
        if path.stat().st_size > MAX_ARTIFACT_BYTES:
            record_event(session, "artifact.skipped", f"{relative} is too large", conversion_id)
            continue
        try:
            sha256, size = blobs.put_file(path)
        except (OSError, ValueError) as error:  # no longer a regular file
            record_event(session, "artifact.skipped", f"{relative}: {error}", conversion_id)
            continue
        row = existing.get(relative) or Artifact(conversion_id=conversion_id, path=relative)
        row.sha256, row.size, row.kind = sha256, size, kind_of(relative)
        session.add(row)
    session.flush()


def store_ir_dumps(session: Session, conversion_id: str) -> None:
    session.execute(delete(IrDump).where(IrDump.conversion_id == conversion_id))
    artifacts = session.scalars(select(Artifact).where(Artifact.conversion_id == conversion_id))
    for artifact in artifacts:
        path = Path(artifact.path)
        side = path.parts[0]
        fmt = IR_FORMATS.get(path.suffix)
        if side not in (REFERENCE_DIR, GENERATED_DIR) or fmt is None or len(path.parts) != 2:
            continue
        session.add(
            IrDump(
                conversion_id=conversion_id,
                artifact_id=artifact.id,
                side=side,
                variant=path.stem,
                format=fmt,
            )
        )


def history_reports(root: Path, stem: str) -> dict[int, Path]:
    """attempt -> report file, from reports/history/<stem>.<attempt>.json."""
    found: dict[int, Path] = {}
    for path in (root / REPORTS_DIR / HISTORY_DIR).glob(f"{stem}.*.json"):
        attempt = path.name[len(stem) + 1 : -len(".json")]
        if attempt.isdigit():
            found[int(attempt)] = path
    return found


def crate_versions(toolchain: dict[str, str]) -> dict[str, Any]:
    return {name: version for name, version in toolchain.items() if "cutile" in name}


def store_perf(session: Session, root: Path, conversion_id: str) -> None:
    session.execute(delete(CuptiResult).where(CuptiResult.conversion_id == conversion_id))
    for attempt, path in sorted(history_reports(root, "perf").items()):
        try:
            report = PerfReport.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError) as error:
            record_event(session, "ingest.invalid_report", f"{path.name}: {error}", conversion_id)
            continue
        environment = report.environment
        for row in report.rows:
            session.add(
                CuptiResult(
                    conversion_id=conversion_id,
                    stage_attempt=attempt,
                    config=row.config_id,
                    variant=row.variant,
                    baseline_us=row.baseline_us,
                    port_us=row.port_us,
                    ratio=row.ratio,
                    gpu=environment.gpu if environment else "",
                    driver=environment.driver if environment else "",
                    clocks={"clocks": environment.clocks} if environment else {},
                    toolchain=dict(environment.toolchain) if environment else {},
                    crate_versions=crate_versions(dict(environment.toolchain))
                    if environment
                    else {},
                )
            )


def store_correctness(session: Session, root: Path, conversion_id: str) -> None:
    session.execute(
        delete(CorrectnessResult).where(CorrectnessResult.conversion_id == conversion_id)
    )
    for attempt, path in sorted(history_reports(root, "correctness").items()):
        try:
            report = CorrectnessReport.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError) as error:
            record_event(session, "ingest.invalid_report", f"{path.name}: {error}", conversion_id)
            continue
        for case in report.cases:
            session.add(
                CorrectnessResult(
                    conversion_id=conversion_id,
                    stage_attempt=attempt,
                    config=case.config_id,
                    dtype=case.dtype,
                    seed=case.seed,
                    passed=case.passed,
                    max_abs_err=case.max_abs_error,
                    max_rel_err=case.max_rel_error,
                    detail={"shapes": case.shapes, "atol": case.atol, "rtol": case.rtol},
                )
            )


def ingest_files(sessions: sessionmaker[Session], settings: Settings, conversion_id: str) -> None:
    with transaction(sessions) as session:
        store_artifacts(session, settings, conversion_id)


def ingest_run(sessions: sessionmaker[Session], settings: Settings, conversion_id: str) -> None:
    root = run_dir(settings, conversion_id)
    with sessions() as session:
        operator = session.get_one(Conversion, conversion_id).operator
    write_port_patch(root, operator)
    with transaction(sessions) as session:
        store_artifacts(session, settings, conversion_id)
        store_ir_dumps(session, conversion_id)
        store_perf(session, root, conversion_id)
        store_correctness(session, root, conversion_id)
