"""Server-rendered pages: the runs list and a run's page, with the fragments
their scripts poll for live status, and the HTML form of an error on a page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app import conversions
from app.api.deps import ContextDep, SessionDep
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


PAGE_TITLES = {404: "Not found", 400: "Bad request", 422: "Bad request", 500: "Internal error"}


def is_page(request: Request) -> bool:
    """Requests the web pages answer (HTML), as opposed to the API's (JSON)."""
    return request.url.path == "/" or request.url.path.startswith("/runs")


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    title = PAGE_TITLES.get(status, "Error")
    response = render(request, "error.html", status=status, title=title, message=message)
    response.status_code = status
    return response


@router.get("/")
def home() -> Response:
    return RedirectResponse("/runs")


def runs_values(
    session: SessionDep, status: ConversionStatus | None, operator: str | None, offset: int
) -> dict[str, Any]:
    rows, total = conversions.list_page(session, status, operator, PAGE_SIZE, offset)
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
    status: ConversionStatus | None = None,
    operator: Annotated[str | None, Query(max_length=200)] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    values = runs_values(session, status, operator, offset)
    return render(request, "runs.html", **values)


@router.get("/runs/_rows", response_class=HTMLResponse)
def runs_rows(
    request: Request,
    session: SessionDep,
    status: ConversionStatus | None = None,
    operator: Annotated[str | None, Query(max_length=200)] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    values = runs_values(session, status, operator, offset)
    return render(request, "_runs_rows.html", **values)


@router.get("/runs/{conversion_id}", response_class=HTMLResponse)
def run_view(
    conversion_id: str, request: Request, session: SessionDep, context: ContextDep
) -> HTMLResponse:
    conversion = conversions.get(session, conversion_id, with_reports=True)
    page = run_page(session, context.settings, conversion)
    view = conversions.full_view(conversion, completion(context.settings, conversion))
    return render(request, "run.html", page=page, run=conversion, view=view)


@router.get("/runs/{conversion_id}/_timeline", response_class=HTMLResponse)
def run_timeline(conversion_id: str, request: Request, session: SessionDep) -> HTMLResponse:
    conversion = conversions.get(session, conversion_id, with_reports=True)
    return render(request, "_timeline.html", run=conversion, view=conversions.full_view(conversion))
