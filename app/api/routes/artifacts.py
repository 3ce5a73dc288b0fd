"""/v1/conversions/{id}/artifacts: list and download a run's files."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from app import artifacts, conversions
from app.api.deps import ContextDep, SessionDep
from app.api.routes.conversions import ERRORS
from schemas.api import ArtifactList

router = APIRouter(prefix="/v1/conversions/{conversion_id}/artifacts", tags=["artifacts"])


@router.get("", response_model=ArtifactList, responses=ERRORS)
def list_artifacts(conversion_id: str, session: SessionDep, context: ContextDep) -> ArtifactList:
    conversions.get(session, conversion_id)
    files = artifacts.all_artifacts(session, context.settings, conversion_id)
    return ArtifactList(
        conversion_id=conversion_id,
        items=[artifacts.view(conversion_id, file) for file in files],
    )


@router.get("/{path:path}", response_class=FileResponse, responses=ERRORS)
def download_artifact(
    conversion_id: str, path: str, session: SessionDep, context: ContextDep
) -> FileResponse:
    conversions.get(session, conversion_id)
    artifact = artifacts.find(session, context.settings, conversion_id, path)
    return FileResponse(
        artifact.location,
        media_type=artifacts.media_type(artifact.path),
        filename=artifact.path.rsplit("/", 1)[-1],
        content_disposition_type="inline",
        headers={"X-Content-Type-Options": "nosniff"},
    )
