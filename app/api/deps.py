"""FastAPI dependencies: the service context, a database session, the caller's token."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

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


def token_owner(tokens: dict[str, str], presented: str) -> str | None:
    """The name of the token equal to `presented`, compared in constant time; every
    configured token is compared so the time does not say which one was close."""
    owner = None
    for name, token in tokens.items():
        if hmac.compare_digest(token.encode(), presented.encode()):
            owner = name
    return owner


def require_token(
    context: ContextDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    unauthorized = ApiError(
        401,
        ErrorCode.UNAUTHORIZED,
        "a valid bearer token is required",
        headers={"WWW-Authenticate": "Bearer"},
    )
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise unauthorized
    owner = token_owner(context.settings.api_tokens, credentials.credentials)
    if owner is None:
        raise unauthorized
    return owner


CallerDep = Annotated[str, Depends(require_token)]
