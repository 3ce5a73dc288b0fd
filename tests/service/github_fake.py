"""A loopback HTTP server speaking the parts of the GitHub REST API the PR bot
uses (pull requests, their files, contents, issue comments, commit statuses),
under a GitHub Enterprise style `/api/v3` prefix. It checks the bearer token
and records every call."""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

PREFIX = "/api/v3"


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str


@dataclass
class Repo:
    head_sha: str
    files: dict[str, bytes]
    changed: list[str] = field(default_factory=list)


class FakeGitHub:
    def __init__(self, token: str) -> None:
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.calls: list[Call] = []
        self.broken = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler_class())
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{PREFIX}"

    def start(self) -> FakeGitHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def calls_to(self, method: str, pattern: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and re.fullmatch(pattern, c.path)]

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                fake.dispatch(self, "GET")

            def do_POST(self) -> None:
                fake.dispatch(self, "POST")

        return Handler

    def dispatch(self, request: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        authorization = request.headers.get("Authorization", "")
        path = unquote(url.path)
        self.calls.append(Call(method, path, parse_qs(url.query), body, authorization))
        if self.broken:
            return reply(request, 500, {"message": "Server Error"})
        if authorization != f"Bearer {self.token}":
            return reply(request, 401, {"message": "Bad credentials"})
        if request.headers.get("X-GitHub-Api-Version") is None:
            return reply(request, 400, {"message": "missing API version header"})
        if not path.startswith(PREFIX):
            return reply(request, 404, {"message": "Not Found"})
        status, payload = self.route(method, path[len(PREFIX) :], parse_qs(url.query), body)
        reply(request, status, payload)

    def route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)/(.+)", path)
        if match is None or match.group(1) not in self.repos:
            return 404, {"message": "Not Found"}
        repo, rest = self.repos[match.group(1)], match.group(2)
        if method == "GET" and (m := re.fullmatch(r"pulls/(\d+)", rest)):
            return 200, {"number": int(m.group(1)), "head": {"sha": repo.head_sha}}
        if method == "GET" and re.fullmatch(r"pulls/\d+/files", rest):
            page, per_page = int(query["page"][0]), int(query["per_page"][0])
            chunk = repo.changed[(page - 1) * per_page : page * per_page]
            return 200, [{"filename": name, "status": "modified"} for name in chunk]
        if method == "GET" and (m := re.fullmatch(r"contents/(.+)", rest)):
            if query.get("ref") != [repo.head_sha] or m.group(1) not in repo.files:
                return 404, {"message": "Not Found"}
            content = base64.b64encode(repo.files[m.group(1)]).decode()
            return 200, {"type": "file", "encoding": "base64", "content": content}
        if method == "POST" and re.fullmatch(r"issues/\d+/comments", rest):
            return 201, {"id": len(self.calls), "body": body["body"]}
        if method == "POST" and re.fullmatch(r"statuses/[0-9a-f]+", rest):
            if body.get("state") not in {"error", "failure", "pending", "success"}:
                return 422, {"message": "Validation Failed"}
            return 201, {"state": body["state"], "context": body["context"]}
        return 404, {"message": "Not Found"}


def reply(request: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)
