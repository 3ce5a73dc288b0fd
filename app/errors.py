"""The one exception type the service raises for a client-visible failure, and
its rendering as the machine-readable error body of schemas.api.ErrorBody."""

from __future__ import annotations

from typing import Any

from schemas.api import ErrorBody, ErrorCode, ErrorDetail


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        detail: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail or {}
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error = ErrorDetail(code=self.code, message=self.message, detail=self.detail)
        return ErrorBody(error=error).model_dump(mode="json")


def unknown_conversion(conversion_id: str) -> ApiError:
    return ApiError(
        404,
        ErrorCode.UNKNOWN_CONVERSION,
        "no conversion has this id",
        {"id": conversion_id[:100]},
    )
