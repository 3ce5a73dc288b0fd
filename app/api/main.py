"""The FastAPI application factory."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from app.api.limits import BodySizeLimit, BodyTooLarge, PageRateLimit, too_large
from app.api.routes import artifacts, conversions, docs, gpu_results, health, web, webhooks
from app.context import ServiceContext
from app.errors import ApiError
from app.metrics import MetricsMiddleware
from schemas.api import ErrorCode

log = logging.getLogger("tileport.api")

# Room for multipart framing around two files at the upload limit.
FORM_OVERHEAD_BYTES = 64 * 1024


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def on_api_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    if web.is_page(request):
        return web.error_page(request, error.status, error.message)
    return error_response(error)


async def on_body_too_large(request: Request, error: Exception) -> JSONResponse:
    context: ServiceContext = request.app.state.context
    return error_response(too_large(body_limit(context)))


async def on_validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    errors: Any = jsonable_encoder(error.errors(), exclude={"input", "ctx", "url"})
    return error_response(
        ApiError(422, ErrorCode.INVALID_REQUEST, "the request is not valid", {"errors": errors})
    )


async def on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if web.is_page(request):
        return web.error_page(request, error.status_code, str(error.detail))
    code = ErrorCode.NOT_FOUND if error.status_code == 404 else ErrorCode.INVALID_REQUEST
    return error_response(ApiError(error.status_code, code, str(error.detail)))


async def on_validation_page_error(request: Request, error: Exception) -> Response:
    if web.is_page(request):
        return web.error_page(request, 422, "the address has an invalid parameter")
    return await on_validation_error(request, error)


async def on_unexpected(request: Request, error: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    if web.is_page(request):
        return web.error_page(request, 500, "internal error")
    return error_response(ApiError(500, ErrorCode.INTERNAL, "internal error"))


def body_limit(context: ServiceContext) -> int:
    return 2 * context.settings.max_upload_bytes + FORM_OVERHEAD_BYTES


def create_app(context: ServiceContext) -> FastAPI:
    app = FastAPI(
        title="tileport",
        version="1",
        description="Port cuTile Python kernels to cuTile Rust, with proof.",
        openapi_url="/v1/openapi.json",
        docs_url=None,  # /v1/docs is rendered here, offline (routes/docs.py)
        redoc_url=None,
    )
    app.state.context = context
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(BodyTooLarge, on_body_too_large)
    app.add_exception_handler(RequestValidationError, on_validation_page_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
    for module in (conversions, gpu_results, artifacts, webhooks, health, web, docs):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=web.WEB_DIR / "static"), name="static")
    app.add_middleware(BodySizeLimit, limit=body_limit(context))
    app.add_middleware(PageRateLimit, per_minute=context.settings.page_requests_per_minute)
    app.add_middleware(MetricsMiddleware, metrics=context.metrics)
    return app
