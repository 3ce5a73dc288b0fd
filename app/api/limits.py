"""Limits on what one request, or one client, may cost: a cap on request body size,
enforced while the body streams in, so an oversized upload (chunked or with a lying
Content-Length) is refused before anything parses or spools it; and a rate limit
on the pages per client address."""

from __future__ import annotations

import json
import math
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import ApiError
from schemas.api import ErrorCode

# Addresses the page rate limit remembers before it forgets those with full buckets.
MAX_TRACKED_ADDRESSES = 10_000


class BodyTooLarge(Exception):
    pass


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        ErrorCode.UPLOAD_TOO_LARGE,
        f"the request body is larger than the limit of {limit} bytes",
        {"limit": limit},
    )


class BodySizeLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self.reject(send)
            return
        received = 0
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not response_started:
                await self.reject(send)

    async def reject(self, send: Send) -> None:
        await send_error(send, too_large(self.limit), (b"connection", b"close"))


async def send_error(send: Send, error: ApiError, *headers: tuple[bytes, bytes]) -> None:
    """`error` as the JSON answer, from an ASGI middleware (before any route ran)."""
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class PageRateLimit:
    """A token bucket per client address on the pages and the sign-in (`/runs...`,
    `/login`), which cost far more CPU than the API's JSON: beyond `per_minute`
    requests in a burst, 429 with Retry-After until the bucket refills."""

    def __init__(self, app: ASGIApp, per_minute: int) -> None:
        self.app = app
        self.capacity = float(per_minute)
        self.refill_per_s = per_minute / 60.0
        self.buckets: dict[str, tuple[float, float]] = {}

    def limited(self, path: str) -> bool:
        return path == "/login" or path == "/runs" or path.startswith("/runs/")

    def take(self, address: str, now: float) -> float:
        """Take one request from the address's bucket: 0, or seconds until one is there."""
        if len(self.buckets) > MAX_TRACKED_ADDRESSES:
            # Full buckets say nothing: forget them rather than grow without end.
            full_after = self.capacity / self.refill_per_s
            self.buckets = {a: b for a, b in self.buckets.items() if now - b[1] < full_after}
        tokens, last = self.buckets.get(address, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.refill_per_s)
        if tokens < 1.0:
            self.buckets[address] = (tokens, now)
            return (1.0 - tokens) / self.refill_per_s
        self.buckets[address] = (tokens - 1.0, now)
        return 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.limited(scope["path"]):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        wait = self.take(str(client[0]) if client else "", time.monotonic())
        if wait == 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = math.ceil(wait)
        error = ApiError(
            429,
            ErrorCode.RATE_LIMITED,
            "too many page requests from this address; retry later",
            {"retry_after_s": retry_after},
        )
        await send_error(send, error, (b"retry-after", str(retry_after).encode()))
