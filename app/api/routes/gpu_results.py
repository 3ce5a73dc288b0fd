"""POST /v1/conversions/{id}/gpu-results: finish a run awaiting a GPU from the
folder `tileport gpu-run` wrote for its bundle (`tileport gpu-run BUNDLE --upload
URL` sends it)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app.api.deps import CallerDep, ContextDep
from app.api.routes.conversions import ERRORS, dispatch, invalid_request
from app.gpu_results import accept_results
from schemas.api import ConversionStatus, GpuResultsAnswer
from schemas.gpu import RESULT_FILES

router = APIRouter(prefix="/v1/conversions", tags=["conversions"])

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "The result folder's files, by their names: "
                            + ", ".join(RESULT_FILES),
                        }
                    },
                }
            }
        },
    }
}


@router.post(
    "/{conversion_id}/gpu-results",
    response_model=GpuResultsAnswer,
    responses=ERRORS,
    openapi_extra=UPLOAD_BODY,
    summary="Finish a run awaiting a GPU from the result folder of `tileport gpu-run`",
)
async def upload_gpu_results(
    conversion_id: str, request: Request, response: Response, context: ContextDep, caller: CallerDep
) -> GpuResultsAnswer:
    limit = context.settings.max_upload_bytes
    form = await request.form(
        max_files=len(RESULT_FILES), max_fields=len(RESULT_FILES), max_part_size=limit + 1
    )
    files: dict[str, bytes] = {}
    for part in form.getlist("files"):
        if not isinstance(part, UploadFile) or not part.filename:
            raise invalid_request("every `files` part must be a file with its name", field="files")
        files[part.filename.rsplit("/", 1)[-1]] = await part.read(limit + 1)
    if not files:
        raise invalid_request("the form needs the result files as `files` parts", field="files")
    arrival = await run_in_threadpool(
        accept_results, context.sessions, context.settings, conversion_id, files, caller
    )
    if arrival.resumed:
        await run_in_threadpool(dispatch, context, conversion_id)
    response.status_code = 202 if arrival.resumed else 200
    checked = arrival.checked
    return GpuResultsAnswer(
        conversion_id=conversion_id,
        status=ConversionStatus.QUEUED if arrival.resumed else ConversionStatus.AWAITING_GPU,
        resumed=arrival.resumed,
        results=arrival.results,
        correctness=checked.correctness.verdict.value,
        perf=checked.perf.verdict.value,
        statement=checked.run.statement,
        trust=arrival.trust,
    )
