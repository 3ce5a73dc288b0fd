"""Finding a conversion's artifacts: the ones recorded in the database, their bytes
in the blob store. Never the run directory, which a later step could change: the
worker records a run's files after each stage (app.worker.ingest). A requested
path is checked before anything is looked up; bytes are read only through
`open_verified`, which checks them against their hash."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.conversions import blob_store
from app.errors import ApiError
from app.settings import Settings
from app.storage.blobs import BlobCorrupt, open_verified
from app.storage.models import Artifact
from schemas.api import ArtifactView, ErrorCode

log = logging.getLogger("tileport.artifacts")

TEXT_SUFFIXES = {".mlir", ".rs", ".py", ".log", ".txt", ".yaml", ".yml", ".patch", ".toml", ".md"}
MEDIA_TYPES = {".json": "application/json"}


@dataclass(frozen=True)
class ArtifactFile:
    path: str
    kind: str
    sha256: str
    size: int
    location: Path  # the blob

    def open(self) -> IO[bytes]:
        """The bytes, checked against the recorded hash. Raises BlobCorrupt."""
        return open_verified(self.location, self.sha256)


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


def recorded(session: Session, conversion_id: str) -> list[Artifact]:
    return list(
        session.scalars(
            select(Artifact).where(Artifact.conversion_id == conversion_id).order_by(Artifact.path)
        )
    )


def all_artifacts(session: Session, settings: Settings, conversion_id: str) -> list[ArtifactFile]:
    blobs = blob_store(settings)
    return [
        ArtifactFile(row.path, row.kind, row.sha256, row.size, blobs.path_for(row.sha256))
        for row in recorded(session, conversion_id)
    ]


def find(session: Session, settings: Settings, conversion_id: str, path: str) -> ArtifactFile:
    check_relative_path(path)
    row = session.scalars(
        select(Artifact).where(Artifact.conversion_id == conversion_id, Artifact.path == path)
    ).first()
    if row is None:
        raise ApiError(
            404, ErrorCode.UNKNOWN_ARTIFACT, "this run has no such artifact", {"path": path}
        )
    location = blob_store(settings).path_for(row.sha256)
    return ArtifactFile(row.path, row.kind, row.sha256, row.size, location)


def view(conversion_id: str, artifact: ArtifactFile) -> ArtifactView:
    return ArtifactView(
        path=artifact.path,
        kind=artifact.kind,
        sha256=artifact.sha256,
        size=artifact.size,
        url=f"/v1/conversions/{conversion_id}/artifacts/{artifact.path}",
    )


def read_text(artifact: ArtifactFile, limit: int = 2_000_000) -> str:
    """The artifact as text, or a line saying it is corrupt (and not shown)."""
    try:
        with artifact.open() as handle:
            return handle.read(limit).decode("utf-8", errors="replace")
    except BlobCorrupt as error:
        log.error("artifact %s: %s", artifact.path, error)
        return f"(not shown: the stored {artifact.path} does not match its hash)"
