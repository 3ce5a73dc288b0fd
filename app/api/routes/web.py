"""Server-rendered pages: the runs list and a run's page, with the fragments
their scripts poll for live status, the sign-in page that turns an API token into
a page session, and the HTML form of an error on a page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app import conversions
from app.access import SESSION_S, Reader, session_cookie, token_owner
from app.api.deps import SESSION_COOKIE, ContextDep, ReaderDep, SessionDep
from app.gpu_results import completion
from app.web.views import pretty_json, run_page
from schemas.api import ConversionStatus

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
templates = Jinja2Templates(directory=WEB_DIR / "templates")
templates.env.filters["pretty_json"] = pretty_json
# Scripts only from this origin; the pages need no inline script.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:; "
    "script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
PAGE_SIZE = 50

router = APIRouter(include_in_schema=False)


def render(request: Request, template: str, **values: Any) -> HTMLResponse:
    response = templates.TemplateResponse(request, template, values)
    response.headers.update(SECURITY_HEADERS)
    return response


PAGE_TITLES = {
    404: "Not found",
    400: "Bad request",
    403: "Forbidden",
    422: "Bad request",
    500: "Internal error",
}


def is_page(request: Request) -> bool:
    """Requests the web pages answer (HTML), as opposed to the API's (JSON)."""
    path = request.url.path
    return path == "/" or path.startswith("/runs") or path == "/login"


def error_page(request: Request, status: int, message: str) -> Response:
    if status == 401:
        # A page asked without a session: sign in, then come back here.
        return RedirectResponse(f"/login?next={quote(request.url.path, safe='/')}", 303)
    title = PAGE_TITLES.get(status, "Error")
    response = render(request, "error.html", status=status, title=title, message=message)
    response.status_code = status
    return response


@router.get("/")
def home() -> Response:
    return RedirectResponse("/runs")


def local_target(next_page: str) -> str:
    """Where to go after signing in: a page of this service, never another site."""
    return next_page if next_page.startswith("/runs") and "//" not in next_page else "/runs"


@router.get("/login", response_class=HTMLResponse)
def login_page(
    request: Request, next_page: Annotated[str, Query(alias="next", max_length=500)] = "/runs"
) -> HTMLResponse:
    return render(request, "login.html", next_page=local_target(next_page), failed=False)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    context: ContextDep,
    token: Annotated[str, Form(max_length=500)],
    next_page: Annotated[str, Form(alias="next", max_length=500)] = "/runs",
) -> Response:
    """Trade an API token for a page session: an HttpOnly, same-site cookie that names
    the token and carries a MAC keyed by it (the token itself is never stored)."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        return error_page(request, 403, "sign in from this service's own page")
    name = token_owner(context.settings.api_tokens, token)
    if name is None:
        page = render(request, "login.html", next_page=local_target(next_page), failed=True)
        page.status_code = 401
        return page
    response = RedirectResponse(local_target(next_page), 303)
    response.set_cookie(
        SESSION_COOKIE,
        session_cookie(context.settings, name),
        max_age=SESSION_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/login", 303)
    response.delete_cookie(SESSION_COOKIE)
    return response


def runs_values(
    session: SessionDep,
    reader: Reader,
    status: ConversionStatus | None,
    operator: str | None,
    offset: int,
) -> dict[str, Any]:
    rows, total = conversions.list_page(session, reader, status, operator, PAGE_SIZE, offset)
    return {
        "runs": rows,
        "total": total,
        "status": status.value if status else "",
        "operator": operator or "",
        "offset": offset,
        "statuses": [s.value for s in ConversionStatus],
        "page_size": PAGE_SIZE,
    }


@router.get("/runs", response_class=HTMLResponse)
def runs_list(
    request: Request,
    session: SessionDep,
    reader: ReaderDep,
    status: ConversionStatus | None = None,
    operator: Annotated[str | None, Query(max_length=200)] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    values = runs_values(session, reader, status, operator, offset)
    return render(request, "runs.html", **values)


@router.get("/runs/_rows", response_class=HTMLResponse)
def runs_rows(
    request: Request,
    session: SessionDep,
    reader: ReaderDep,
    status: ConversionStatus | None = None,
    operator: Annotated[str | None, Query(max_length=200)] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    values = runs_values(session, reader, status, operator, offset)
    return render(request, "_runs_rows.html", **values)


@router.get("/runs/{conversion_id}", response_class=HTMLResponse)
def run_view(
    conversion_id: str,
    request: Request,
    session: SessionDep,
    context: ContextDep,
    reader: ReaderDep,
) -> HTMLResponse:
    conversion = conversions.get(session, conversion_id, with_reports=True, reader=reader)
    page = run_page(session, context.settings, conversion)
    view = conversions.full_view(conversion, completion(context.settings, conversion))
    return render(request, "run.html", page=page, run=conversion, view=view)


@router.get("/runs/{conversion_id}/_timeline", response_class=HTMLResponse)
def run_timeline(
    conversion_id: str, request: Request, session: SessionDep, reader: ReaderDep
) -> HTMLResponse:
    conversion = conversions.get(session, conversion_id, with_reports=True, reader=reader)
    return render(request, "_timeline.html", run=conversion, view=conversions.full_view(conversion))
