"""A loopback OpenAI-compatible endpoint serving scripted chat completions.

It speaks the real /v1/chat/completions protocol (JSON request with `model`
and `messages`; JSON reply with `choices[0].message.content` and `usage`), so
the real langchain-openai client runs against it unchanged. Each request takes
the next scripted reply (then `then`, for ever, when the script is spent); a
scripted error answers with its HTTP status and an OpenAI-style error body, a
`raw` reply sends those bytes as its 200 body, and `delay_s` holds the answer
back. Requests are recorded for the tests to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    content: str = ""
    prompt_tokens: int = 100
    completion_tokens: int = 50
    status: int = 200
    error: str = ""
    raw: bytes | None = None
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class FakeEndpoint:
    replies: list[Reply]
    then: Reply | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    base_url: str = ""

    def next_reply(self) -> Reply:
        if self.replies:
            return self.replies.pop(0)
        return self.then or Reply(status=500, error="the script has no more replies")


def _handler(endpoint: FakeEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != COMPLETIONS_PATH:
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )
                return
            endpoint.requests.append(body)
            endpoint.headers.append({k.lower(): v for k, v in self.headers.items()})
            endpoint.times.append(time.monotonic())
            reply = endpoint.next_reply()
            time.sleep(reply.delay_s)
            if reply.status != 200:
                error = {"message": reply.error, "type": "server_error", "code": None}
                self._send(reply.status, {"error": error}, reply.headers)
            elif reply.raw is not None:
                self._send_bytes(200, reply.raw, reply.headers)
            else:
                self._send(200, _completion(body.get("model", ""), reply), reply.headers)

        def _send(
            self, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
        ) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), headers)

        def _send_bytes(
            self, status: int, data: bytes, headers: tuple[tuple[str, str], ...]
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up waiting (a timeout under test)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def _completion(model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


@contextmanager
def serve(replies: Sequence[Reply], then: Reply | None = None) -> Iterator[FakeEndpoint]:
    endpoint = FakeEndpoint(replies=list(replies), then=then)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(endpoint))
    endpoint.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
