"""FastAPI dependencies: the service context, a database session, the caller (a
bearer token) and the reader (a bearer token or a page session)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.access import Caller, Reader, session_owner, token_owner
from app.context import ServiceContext
from app.errors import ApiError
from schemas.api import ErrorCode

bearer = HTTPBearer(auto_error=False, description="API token (API_TOKENS)")


def get_context(request: Request) -> ServiceContext:
    context: ServiceContext = request.app.state.context
    return context


ContextDep = Annotated[ServiceContext, Depends(get_context)]


def get_session(context: ContextDep) -> Iterator[Session]:
    with context.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


SESSION_COOKIE = "tileport_session"


def unauthorized() -> ApiError:
    return ApiError(
        401,
        ErrorCode.UNAUTHORIZED,
        "a valid bearer token is required",
        headers={"WWW-Authenticate": "Bearer"},
    )


def bearer_caller(
    context: ServiceContext, credentials: HTTPAuthorizationCredentials | None
) -> Caller | None:
    if credentials is None or credentials.scheme.lower() != "bearer":
        return None
    owner = token_owner(context.settings.api_tokens, credentials.credentials)
    return None if owner is None else Caller.named(context.settings, owner)


def require_token(
    context: ContextDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    caller = bearer_caller(context, credentials)
    if caller is None:
        raise unauthorized()
    return caller


CallerDep = Annotated[Caller, Depends(require_token)]


def as_reader(context: ServiceContext, caller: Caller | None) -> Reader:
    """Under PUBLIC_READ everyone reads every run (None); else the caller reads its own."""
    if context.settings.public_read:
        return None
    if caller is None:
        raise unauthorized()
    return caller


def require_reader(
    request: Request,
    context: ContextDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Reader:
    """A bearer token or a page session (`/login`)."""
    caller = bearer_caller(context, credentials)
    if caller is None:
        cookie = request.cookies.get(SESSION_COOKIE)
        owner = session_owner(context.settings, cookie) if cookie else None
        caller = None if owner is None else Caller.named(context.settings, owner)
    return as_reader(context, caller)


ReaderDep = Annotated[Reader, Depends(require_reader)]
