"""/v1/conversions: submit, list, read, cancel."""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile

from app import conversions
from app.api.deps import CallerDep, ContextDep, ReaderDep, SessionDep, as_reader
from app.context import ServiceContext
from app.errors import ApiError
from app.gpu_results import completion
from app.intake import (
    RawSubmission,
    Submission,
    build_submission,
    from_source_root,
    spec_to_bytes,
)
from app.storage.database import transaction
from app.storage.models import Conversion, utcnow
from app.worker.checkpoints import prune
from schemas.api import (
    ConversionAccepted,
    ConversionFromPath,
    ConversionPage,
    ConversionStatus,
    ConversionView,
    ErrorBody,
    ErrorCode,
)
from schemas.pipeline import RunOptions
from toolchain.sandbox import unavailable_reason

router = APIRouter(prefix="/v1/conversions", tags=["conversions"])

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 415, 422, 429, 503)
}

SUBMIT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["source", "spec"],
                    "properties": {
                        "source": {"type": "string", "format": "binary"},
                        "spec": {"type": "string", "format": "binary"},
                        "reference": {
                            "type": "string",
                            "format": "binary",
                            "description": "The reference module, when the spec's "
                            "reference.function lives outside the kernel source",
                        },
                        "options": {
                            "type": "string",
                            "description": 'RunOptions as JSON, e.g. {"no_gpu": true}',
                        },
                    },
                }
            },
            "application/json": {"schema": ConversionFromPath.model_json_schema()},
        },
    }
}


def invalid_request(message: str, **detail: Any) -> ApiError:
    return ApiError(400, ErrorCode.INVALID_REQUEST, message, detail)


def caller_key(caller: str, key: str | None) -> str | None:
    """An Idempotency-Key as stored: one caller's, apart from every other caller's
    and from the PR bot's (`github:...`), so a key can neither be squatted nor
    name another tenant's conversion."""
    if not key:
        return None
    return "api:" + hashlib.sha256(f"{caller}\0{key}".encode()).hexdigest()


MAX_BYTECODE_PARTS = 8  # bytecode dumps a submission may carry, one per variant


async def read_part(form: FormData, name: str, limit: int) -> tuple[str, bytes]:
    """(filename, bytes) of a form part, file or plain field, read up to the limit."""
    part = form.get(name)
    if part is None:
        raise invalid_request(f"the form needs a `{name}` part", field=name)
    if isinstance(part, UploadFile):
        data = await part.read(limit + 1)
        return part.filename or "", data
    return "", part.encode()


def unknown_options(error: ValidationError, prefix: tuple[str, ...] = ()) -> ApiError | None:
    """422 naming the keys RunOptions does not know, with the ones it does."""
    unknown = [
        str(item["loc"][len(prefix)])
        for item in error.errors()
        if item["type"] == "extra_forbidden" and tuple(item["loc"][: len(prefix)]) == prefix
    ]
    if not unknown:
        return None
    return ApiError(
        422,
        ErrorCode.INVALID_OPTIONS,
        f"unknown option(s) {', '.join(unknown)}",
        {"unknown": unknown, "known": list(RunOptions.model_fields)},
    )


def parse_options(raw: str | None) -> RunOptions:
    if not raw:
        return RunOptions()
    try:
        return RunOptions.model_validate(json.loads(raw))
    except ValidationError as error:
        raise unknown_options(error) or invalid_request(
            "`options` must be a JSON object of RunOptions",
            errors=json.loads(error.json(include_url=False, include_input=False)),
        ) from error
    except json.JSONDecodeError as error:
        raise invalid_request("`options` must be a JSON object of RunOptions") from error


async def multipart_submission(request: Request, context: ServiceContext) -> Submission:
    limit = context.settings.max_upload_bytes
    form = await request.form(
        max_files=3 + MAX_BYTECODE_PARTS, max_fields=4, max_part_size=limit + 1
    )
    source_name, source = await read_part(form, "source", limit)
    _, spec = await read_part(form, "spec", limit)
    extra: dict[str, bytes] = {}
    if form.get("reference") is not None:
        reference_name, reference = await read_part(form, "reference", limit)
        extra[PurePosixPath(reference_name or "reference.py").name] = reference
    # A variant's `reference_bytecode` dump, by its file name.
    for part in form.getlist("bytecode"):
        if not isinstance(part, UploadFile) or not part.filename:
            raise invalid_request("`bytecode` must be a file upload with a filename")
        extra[PurePosixPath(part.filename).name] = await part.read(limit + 1)
    raw_options = form.get("options")
    options = parse_options(raw_options if isinstance(raw_options, str) else None)
    if not source_name:
        raise invalid_request("`source` must be a file upload with a filename", field="source")
    raw = RawSubmission(spec=spec, source=source, extra_files=extra)
    return await run_in_threadpool(build_submission, raw, options, limit)


def path_submission(body: ConversionFromPath, context: ServiceContext) -> Submission:
    settings = context.settings
    limit = settings.max_upload_bytes
    inline = None if body.spec is None else spec_to_bytes(body.spec)
    raw = from_source_root(settings.source_root, body.source_path, body.spec_path, inline, limit)
    return build_submission(raw, body.options, limit)


async def json_submission(request: Request, context: ServiceContext) -> Submission:
    try:
        body = ConversionFromPath.model_validate_json(await request.body())
    except ValidationError as error:
        raise unknown_options(error, ("options",)) or invalid_request(
            "the JSON body does not match ConversionFromPath",
            errors=json.loads(error.json(include_url=False, include_input=False)),
        ) from error
    return await run_in_threadpool(path_submission, body, context)


def mark_undispatched(context: ServiceContext, conversion_id: str, reason: str) -> None:
    with transaction(context.sessions) as session:
        conversion = session.get_one(Conversion, conversion_id)
        conversion.status = ConversionStatus.ERROR
        conversion.error = reason
        conversion.finished_at = utcnow()
        conversions.record_event(session, "conversion.dispatch_failed", reason, conversion_id)


def refuse_unless_runnable(context: ServiceContext) -> None:
    """A conversion this server could not run is refused before anything is read
    or stored, with the cause and its fix (what /readyz says too)."""
    reason = unavailable_reason()
    if reason is not None:
        raise ApiError(503, ErrorCode.SANDBOX_UNAVAILABLE, reason, headers={"Retry-After": "60"})
    if context.missing_requirements:
        message = "this server lacks what a conversion needs: " + "; ".join(
            context.missing_requirements
        )
        raise ApiError(503, ErrorCode.REQUIREMENT_MISSING, message, headers={"Retry-After": "60"})


def dispatch(context: ServiceContext, conversion_id: str) -> None:
    try:
        context.dispatcher.dispatch(conversion_id)
    except Exception as error:
        reason = f"could not hand the conversion to a worker: {type(error).__name__}"
        mark_undispatched(context, conversion_id, reason)
        raise ApiError(
            503, ErrorCode.BROKER_UNAVAILABLE, reason, headers={"Retry-After": "30"}
        ) from error


@router.post(
    "",
    status_code=202,
    response_model=ConversionAccepted,
    responses=ERRORS,
    openapi_extra=SUBMIT_BODY,
    summary="Start a conversion (multipart upload, or JSON naming files under SOURCE_ROOT)",
)
async def create_conversion(
    request: Request,
    response: Response,
    context: ContextDep,
    caller: CallerDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> ConversionAccepted:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        await run_in_threadpool(refuse_unless_runnable, context)
        await run_in_threadpool(
            conversions.check_capacity, context.sessions, context.settings, caller.name
        )
        if content_type == "multipart/form-data":
            submission = await multipart_submission(request, context)
        elif content_type == "application/json":
            submission = await json_submission(request, context)
        else:
            raise ApiError(
                415,
                ErrorCode.INVALID_REQUEST,
                "send multipart/form-data (upload) or application/json (source path)",
                {"content_type": content_type},
            )
        conversion, duplicate = await run_in_threadpool(
            conversions.submit,
            context.sessions,
            context.settings,
            submission,
            caller.name,
            caller_key(caller.name, idempotency_key),
        )
    except ApiError as error:
        context.metrics.rejected.labels(error.code.value).inc()
        raise
    if duplicate:
        response.headers["Idempotent-Replayed"] = "true"
    else:
        context.metrics.submitted.labels("api").inc()
        await run_in_threadpool(dispatch, context, conversion.id)
    response.headers["Location"] = f"/v1/conversions/{conversion.id}"
    return ConversionAccepted(
        id=conversion.id,
        status=ConversionStatus(conversion.status),
        operator=conversion.operator,
        duplicate=duplicate,
        links=conversions.links(conversion.id),
    )


@router.get("", response_model=ConversionPage, responses=ERRORS)
def list_conversions(
    session: SessionDep,
    reader: ReaderDep,
    status: ConversionStatus | None = None,
    operator: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ConversionPage:
    rows, total = conversions.list_page(session, reader, status, operator, limit, offset)
    return conversions.page_view(rows, total, limit, offset)


@router.get("/{conversion_id}", response_model=ConversionView, responses=ERRORS)
def get_conversion(
    conversion_id: str, session: SessionDep, context: ContextDep, reader: ReaderDep
) -> Response:
    conversion = conversions.get(session, conversion_id, reader=reader)
    view = conversions.full_view(conversion, completion(context.settings, conversion))
    # Serialised once here: the view is already validated, and this is the polled path.
    return Response(view.model_dump_json(), media_type="application/json")


@router.post(
    "/{conversion_id}/cancel", status_code=202, response_model=ConversionView, responses=ERRORS
)
def cancel_conversion(conversion_id: str, context: ContextDep, caller: CallerDep) -> ConversionView:
    # A task already on the broker finds the conversion cancelled when it tries
    # to claim it, so nothing needs revoking there.
    with context.sessions() as session:
        before = conversions.get(session, conversion_id, reader=as_reader(context, caller)).status
    cancelled = conversions.cancel(context.sessions, conversion_id, caller)
    if before == ConversionStatus.AWAITING_GPU:
        # Its checkpoints were kept for the completion that will not come.
        prune(context.settings.resolved_database_url, conversion_id)
    return conversions.full_view(cancelled)
