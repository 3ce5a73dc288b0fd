"""Slow connections against the bounded server: clients that open connections and
never finish their headers (slowloris), or their body, are closed after the
request deadlines; one client address holds at most its share of connections, and
the server keeps answering others meanwhile. The server is `tileport serve`'s own
configuration (`app.api.connections.server_config`) on loopback; the attacker
connects from 127.0.0.2, everyone else from 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from service_support import free_port, make_context, wait_http

from app.api.connections import server_config
from app.api.main import create_app
from app.context import ServiceContext

ATTACKER = "127.0.0.2"
PER_CLIENT = 16
HEAD_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 2.0


@pytest.fixture
def bounded(context: ServiceContext) -> Iterator[str]:
    if context.engine.dialect.name != "sqlite":
        pytest.skip("connection handling does not depend on the database: SQLite shows it")
    settings = context.settings.model_copy(
        update={
            "max_connections_per_client": PER_CLIENT,
            "request_head_timeout_s": HEAD_TIMEOUT_S,
            "request_body_timeout_s": BODY_TIMEOUT_S,
        }
    )
    port = free_port()
    config = server_config(create_app(context), settings, "0.0.0.0", port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_http(f"http://127.0.0.1:{port}/healthz")
    yield f"127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def slow_client(address: str, partial: bytes) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.socket()
    sock.bind((ATTACKER, 0))
    sock.settimeout(10)
    sock.connect((host, int(port)))
    sock.sendall(partial)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (it never answers: no request
    was completed)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slowloris_is_bounded_and_the_server_keeps_answering(bounded: str) -> None:
    head = b"GET /readyz HTTP/1.1\r\nHost: tileport\r\nX-Slow: "
    clients = [slow_client(bounded, head) for _ in range(10 * PER_CLIENT)]
    try:
        started = time.monotonic()
        answer = httpx.get(f"http://{bounded}/healthz", timeout=5)
        assert answer.status_code == 200 and time.monotonic() - started < 2
        turned_away = sum(closed_within(sock, 0.2) for sock in clients)
        assert turned_away >= len(clients) - PER_CLIENT
        # The ones it took are closed once their head is late, never answered.
        assert all(closed_within(sock, HEAD_TIMEOUT_S + 2) for sock in clients)
    finally:
        for sock in clients:
            sock.close()
    # The attacker's address is served again once its connections are gone.
    with httpx.Client(transport=httpx.HTTPTransport(local_address=ATTACKER)) as client:
        assert client.get(f"http://{bounded}/healthz").status_code == 200


def test_a_body_that_never_comes_is_cut_off(bounded: str) -> None:
    head = (
        b"POST /login HTTP/1.1\r\nHost: tileport\r\nContent-Length: 1000\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n\r\ntoken=ab"
    )
    sock = slow_client(bounded, head)
    try:
        started = time.monotonic()
        assert closed_within(sock, BODY_TIMEOUT_S + 3)
        assert time.monotonic() - started > BODY_TIMEOUT_S - 0.5
    finally:
        sock.close()


def test_a_keep_alive_client_is_served_request_after_request(bounded: str) -> None:
    with httpx.Client() as client:
        for _ in range(3):
            assert client.get(f"http://{bounded}/healthz").status_code == 200
            time.sleep(HEAD_TIMEOUT_S / 2)


def test_pages_are_rate_limited_per_address(context: ServiceContext) -> None:
    """A client that asks for pages (or tries tokens at /login) faster than its share
    gets 429 with Retry-After; the API and other addresses are not slowed."""
    limited = make_context(context.settings.model_copy(update={"page_requests_per_minute": 5}))
    app = create_app(limited)
    with TestClient(app, client=("10.0.0.9", 1234)) as attacker:
        answers = [attacker.post("/login", data={"token": f"guess{n}"}) for n in range(6)]
        assert [a.status_code for a in answers] == [401] * 5 + [429]
        assert int(answers[-1].headers["retry-after"]) >= 1
        assert answers[-1].json()["error"]["code"] == "rate_limited"
        assert attacker.get("/healthz").status_code == 200
    with TestClient(app, client=("10.0.0.10", 1234)) as other:
        assert other.get("/login").status_code == 200
    limited.engine.dispose()
