"""/healthz (the process answers), /readyz (it can do its work), /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from app.api.deps import ContextDep, ReaderDep
from app.context import ServiceContext
from app.storage.migrate import is_at_head
from schemas.api import Health, Readiness
from toolchain.sandbox import unavailable_reason

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    return Health(status="ok")


def check_database(context: ServiceContext) -> str:
    with context.engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    return "ok" if is_at_head(context.engine) else "migrations pending"


def check_artifact_root(context: ServiceContext) -> str:
    root = context.settings.resolved_artifact_root
    root.mkdir(parents=True, exist_ok=True)
    probe = root / ".ready-probe"
    probe.write_bytes(b"")
    probe.unlink()
    return "ok"


def check_queue(context: ServiceContext) -> str:
    context.dispatcher.ping()
    return "ok"


def check_sandbox(context: ServiceContext) -> str:
    """Every conversion's first untrusted step needs it; checked live, so installing
    bubblewrap makes a running server ready."""
    reason = unavailable_reason()
    return "ok" if reason is None else f"failed: {reason}"


def check_requirements(context: ServiceContext) -> str:
    missing = context.missing_requirements
    return "ok" if not missing else "failed: " + "; ".join(missing)


def readiness(context: ServiceContext) -> dict[str, str]:
    checks: dict[str, str] = {}
    for name, check in (
        ("database", check_database),
        ("artifacts", check_artifact_root),
        ("queue", check_queue),
        ("sandbox", check_sandbox),
        ("toolchain", check_requirements),
    ):
        try:
            checks[name] = check(context)
        except Exception as error:
            checks[name] = f"failed: {type(error).__name__}"
    return checks


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(context: ContextDep) -> JSONResponse:
    checks = await run_in_threadpool(readiness, context)
    ready = all(result == "ok" for result in checks.values())
    body = Readiness(status="ready" if ready else "not ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get("/metrics", response_class=Response)
async def metrics(context: ContextDep, reader: ReaderDep) -> Response:
    exposition = await run_in_threadpool(context.metrics.exposition)
    return Response(exposition, media_type="text/plain; version=0.0.4; charset=utf-8")
