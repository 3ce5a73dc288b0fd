"""/v1/conversions/{id}/artifacts: list and download a run's files, from the blob
store, each checked against its recorded hash before a byte is sent."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from app import artifacts, conversions
from app.api.deps import ContextDep, ReaderDep, SessionDep
from app.api.routes.conversions import ERRORS
from app.errors import ApiError
from app.storage.blobs import CHUNK, BlobCorrupt
from app.storage.database import transaction
from schemas.api import ArtifactList, ErrorCode

router = APIRouter(prefix="/v1/conversions/{conversion_id}/artifacts", tags=["artifacts"])


@router.get("", response_model=ArtifactList, responses=ERRORS)
def list_artifacts(
    conversion_id: str, session: SessionDep, context: ContextDep, reader: ReaderDep
) -> ArtifactList:
    conversions.get(session, conversion_id, reader=reader)
    files = artifacts.all_artifacts(session, context.settings, conversion_id)
    return ArtifactList(
        conversion_id=conversion_id,
        items=[artifacts.view(conversion_id, file) for file in files],
    )


def content_disposition(name: str) -> str:
    quoted = quote(name)
    return f"inline; filename*=utf-8''{quoted}" if quoted != name else f'inline; filename="{name}"'


@router.get("/{path:path}", response_class=StreamingResponse, responses=ERRORS)
def download_artifact(
    conversion_id: str, path: str, session: SessionDep, context: ContextDep, reader: ReaderDep
) -> StreamingResponse:
    conversions.get(session, conversion_id, reader=reader)
    artifact = artifacts.find(session, context.settings, conversion_id, path)
    try:
        body = artifact.open()
    except BlobCorrupt as error:
        with transaction(context.sessions) as events:
            conversions.record_event(
                events,
                "artifact.corrupt",
                f"{artifact.path}: {error}; not served",
                conversion_id,
                path=artifact.path,
                sha256=artifact.sha256,
                found=error.found,
            )
        raise ApiError(
            500,
            ErrorCode.ARTIFACT_CORRUPT,
            "the stored bytes of this artifact do not match its recorded hash; not served",
            {"path": artifact.path, "sha256": artifact.sha256},
        ) from None
    return StreamingResponse(
        iter(lambda: body.read(CHUNK), b""),
        media_type=artifacts.media_type(artifact.path),
        headers={
            "Content-Disposition": content_disposition(artifact.path.rsplit("/", 1)[-1]),
            "Content-Length": str(artifact.size),
            "X-Content-Type-Options": "nosniff",
        },
        background=BackgroundTask(body.close),
    )
