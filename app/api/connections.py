"""Connection limits of `tileport serve`: a bound on open connections, overall and
per client address, and deadlines for reading a request, so that clients that open
connections and never finish their headers (or their body) cannot hold the
server's descriptors and starve everyone else.

uvicorn's HTTP/1.1 protocol arms no timer before a request's head is complete; this
subclass of it adds one (and one for the body), closes a connection over either
bound at once, and is what `server_config` hands to uvicorn."""

from __future__ import annotations

import asyncio
import resource
from collections import Counter
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.settings import Settings

# Descriptors kept for the database, the blob store, logs and worker pipes.
RESERVED_DESCRIPTORS = 256
KEEP_ALIVE_S = 5


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    max_per_client: int
    head_timeout_s: float
    body_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        """The settings' bounds, the total kept below this process's descriptor limit."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        room = soft - RESERVED_DESCRIPTORS if soft != resource.RLIM_INFINITY else None
        total = settings.max_connections if room is None else min(settings.max_connections, room)
        return cls(
            max_connections=max(total, 1),
            max_per_client=settings.max_connections_per_client,
            head_timeout_s=settings.request_head_timeout_s,
            body_timeout_s=settings.request_body_timeout_s,
        )


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits` enforced; one class per server, which
    counts its connections per client address."""
    per_client: Counter[str] = Counter()

    class GuardedH11Protocol(H11Protocol):
        admitted = False
        deadline: asyncio.TimerHandle | None = None
        address = ""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            peer = transport.get_extra_info("peername")
            self.address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
            crowded = len(self.connections) >= limits.max_connections
            if crowded or per_client[self.address] >= limits.max_per_client:
                transport.abort()  # frees the descriptor now; nothing was read
                return
            self.admitted = True
            per_client[self.address] += 1
            super().connection_made(transport)
            self.arm(limits.head_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            if not self.admitted:
                return
            self.admitted = False
            per_client[self.address] -= 1
            if per_client[self.address] <= 0:
                del per_client[self.address]
            self.disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            waiting_for_head = self.conn.their_state is h11.IDLE
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.SEND_BODY and waiting_for_head:
                self.arm(limits.body_timeout_s)  # the head is in: the body has its own time
            elif state is not h11.IDLE and state is not h11.SEND_BODY:
                self.disarm()  # the request is read; the answer takes what it takes

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self.arm(limits.head_timeout_s)  # the next request's head

        def arm(self, seconds: float) -> None:
            self.disarm()
            self.deadline = self.loop.call_later(seconds, self.too_slow)

        def disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def too_slow(self) -> None:
            self.deadline = None
            if not self.transport.is_closing():
                self.transport.abort()

    return GuardedH11Protocol


def server_config(
    app: Any, settings: Settings, host: str, port: int, **options: Any
) -> uvicorn.Config:
    """The uvicorn configuration `tileport serve` runs: its connection limits and a
    short keep-alive."""
    limits = ConnectionLimits.from_settings(settings)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(limits),
        timeout_keep_alive=KEEP_ALIVE_S,
        **options,
    )
