"""Finding a conversion's artifacts: the ones recorded in the database (bytes in
the blob store) and, while a run is live, files already in its run directory.
A requested path is checked before any file is touched: it can only name a
recorded artifact or a regular file inside the run directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.conversions import blob_store, run_dir
from app.errors import ApiError
from app.settings import Settings
from app.storage.models import Artifact
from schemas.api import ArtifactView, ErrorCode

MAX_LISTED_FILES = 2000
TEXT_SUFFIXES = {".mlir", ".rs", ".py", ".log", ".txt", ".yaml", ".yml", ".patch", ".toml", ".md"}
MEDIA_TYPES = {".json": "application/json"}


@dataclass(frozen=True)
class ArtifactFile:
    path: str
    kind: str
    sha256: str | None
    size: int
    location: Path


def kind_of(path: str) -> str:
    """A coarse kind from where a file sits in the run layout and its suffix."""
    parts = PurePosixPath(path).parts
    suffix = PurePosixPath(path).suffix
    if parts[0] == "input":
        return "input"
    if parts[0] == "reports":
        return "report"
    if parts[0] == "logs" or suffix == ".log":
        return "log"
    if suffix in {".mlir", ".tileir", ".bytecode"}:
        return "ir"
    if suffix == ".patch":
        return "patch"
    if suffix == ".cubin" or suffix == ".sass":
        return "binary"
    if suffix in {".rs", ".py"}:
        return "source"
    return "other"


def media_type(path: str) -> str:
    """Never text/html: a hostile artifact must not render as a page."""
    suffix = PurePosixPath(path).suffix
    if suffix in MEDIA_TYPES:
        return MEDIA_TYPES[suffix]
    if suffix in TEXT_SUFFIXES:
        return "text/plain; charset=utf-8"
    return "application/octet-stream"


def check_relative_path(path: str) -> str:
    bad = ApiError(
        400,
        ErrorCode.INVALID_ARTIFACT_PATH,
        "artifact paths are relative paths inside the run directory",
        {"path": path[:300]},
    )
    if not path or "\\" in path or "\x00" in path or path.startswith("/"):
        raise bad
    parts = path.split("/")
    if any(part in {"", ".", ".."} for part in parts):
        raise bad
    return path


def inside(base: Path, relative: str) -> Path | None:
    """The regular file `base/relative` if, symlinks resolved, it is still under base."""
    root = base.resolve()
    candidate = (root / relative).resolve()
    if not candidate.is_relative_to(root) or not candidate.is_file():
        return None
    return candidate


def recorded(session: Session, conversion_id: str) -> list[Artifact]:
    return list(
        session.scalars(
            select(Artifact).where(Artifact.conversion_id == conversion_id).order_by(Artifact.path)
        )
    )


def live_files(settings: Settings, conversion_id: str) -> list[ArtifactFile]:
    base = run_dir(settings, conversion_id)
    if not base.is_dir():
        return []
    found: list[ArtifactFile] = []
    for file in sorted(base.rglob("*")):
        relative = file.relative_to(base).as_posix()
        location = inside(base, relative) if not file.is_symlink() else None
        if location is None:
            continue
        found.append(ArtifactFile(relative, kind_of(relative), None, file.stat().st_size, file))
        if len(found) >= MAX_LISTED_FILES:
            break
    return found


def all_artifacts(session: Session, settings: Settings, conversion_id: str) -> list[ArtifactFile]:
    blobs = blob_store(settings)
    files = {
        row.path: ArtifactFile(row.path, row.kind, row.sha256, row.size, blobs.path_for(row.sha256))
        for row in recorded(session, conversion_id)
    }
    for live in live_files(settings, conversion_id):
        files.setdefault(live.path, live)
    return [files[path] for path in sorted(files)]


def find(session: Session, settings: Settings, conversion_id: str, path: str) -> ArtifactFile:
    check_relative_path(path)
    row = session.scalars(
        select(Artifact).where(Artifact.conversion_id == conversion_id, Artifact.path == path)
    ).first()
    if row is not None:
        location = blob_store(settings).path_for(row.sha256)
        return ArtifactFile(row.path, row.kind, row.sha256, row.size, location)
    live = inside(run_dir(settings, conversion_id), path)
    if live is None:
        raise ApiError(
            404, ErrorCode.UNKNOWN_ARTIFACT, "this run has no such artifact", {"path": path}
        )
    return ArtifactFile(path, kind_of(path), None, live.stat().st_size, live)


def view(conversion_id: str, artifact: ArtifactFile) -> ArtifactView:
    return ArtifactView(
        path=artifact.path,
        kind=artifact.kind,
        sha256=artifact.sha256,
        size=artifact.size,
        url=f"/v1/conversions/{conversion_id}/artifacts/{artifact.path}",
    )


def read_text(artifact: ArtifactFile, limit: int = 2_000_000) -> str:
    with artifact.location.open("rb") as handle:
        return handle.read(limit).decode("utf-8", errors="replace")
