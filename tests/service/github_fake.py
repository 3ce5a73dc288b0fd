"""A loopback HTTP server speaking the parts of the GitHub REST API the PR bot
uses (pull requests, their files, contents, issue comments, commit statuses, and
the git data API: trees, blobs, commits, refs), under a GitHub Enterprise style
`/api/v3` prefix. It checks the bearer token and records every call."""

from __future__ import annotations

import base64
import hashlib
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
    # Git objects: blobs by sha; trees as path -> blob sha; commits; refs.
    blobs: dict[str, bytes] = field(default_factory=dict)
    trees: dict[str, dict[str, str]] = field(default_factory=dict)
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        head_tree = {path: self.add_blob(data) for path, data in self.files.items()}
        tree = _sha("tree", json.dumps(sorted(head_tree.items())).encode())
        self.trees[tree] = head_tree
        self.commits[self.head_sha] = {"tree": tree, "parents": [], "message": "head"}

    def add_blob(self, data: bytes) -> str:
        sha = _sha("blob", data)
        self.blobs[sha] = data
        return sha

    def tree_of(self, commit: str) -> dict[str, bytes]:
        """The files of a commit, by path."""
        return {p: self.blobs[s] for p, s in self.trees[self.commits[commit]["tree"]].items()}


def _sha(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


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

            def do_PATCH(self) -> None:
                fake.dispatch(self, "PATCH")

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
        if rest.startswith("git/"):
            return self.git_data(repo, method, rest[len("git/") :], query, body)
        if method == "POST" and re.fullmatch(r"issues/\d+/comments", rest):
            return 201, {"id": len(self.calls), "body": body["body"]}
        if method == "POST" and re.fullmatch(r"statuses/[0-9a-f]+", rest):
            if body.get("state") not in {"error", "failure", "pending", "success"}:
                return 422, {"message": "Validation Failed"}
            return 201, {"state": body["state"], "context": body["context"]}
        return 404, {"message": "Not Found"}

    @staticmethod
    def git_data(
        repo: Repo, method: str, rest: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if method == "GET" and (m := re.fullmatch(r"trees/([0-9a-f]+)", rest)):
            sha = m.group(1)
            tree = repo.trees.get(repo.commits[sha]["tree"] if sha in repo.commits else sha)
            if tree is None or query.get("recursive") != ["1"]:
                return 404, {"message": "Not Found"}
            entries = [
                {"path": p, "mode": "100644", "type": "blob", "sha": s} for p, s in tree.items()
            ]
            return 200, {"sha": sha, "tree": entries, "truncated": False}
        if method == "GET" and (m := re.fullmatch(r"blobs/([0-9a-f]+)", rest)):
            if m.group(1) not in repo.blobs:
                return 404, {"message": "Not Found"}
            content = base64.b64encode(repo.blobs[m.group(1)]).decode()
            return 200, {"sha": m.group(1), "encoding": "base64", "content": content}
        if method == "GET" and (m := re.fullmatch(r"commits/([0-9a-f]+)", rest)):
            commit = repo.commits.get(m.group(1))
            if commit is None:
                return 404, {"message": "Not Found"}
            return 200, {"sha": m.group(1), "tree": {"sha": commit["tree"]}}
        if method == "POST" and rest == "blobs":
            if body.get("encoding") != "base64":
                return 422, {"message": "Validation Failed"}
            return 201, {"sha": repo.add_blob(base64.b64decode(body["content"]))}
        if method == "POST" and rest == "trees":
            base = repo.trees.get(body.get("base_tree", ""))
            if base is None or any(e["sha"] not in repo.blobs for e in body["tree"]):
                return 422, {"message": "Validation Failed"}
            tree = {**base, **{e["path"]: e["sha"] for e in body["tree"]}}
            sha = _sha("tree", json.dumps(sorted(tree.items())).encode())
            repo.trees[sha] = tree
            return 201, {"sha": sha}
        if method == "POST" and rest == "commits":
            if body["tree"] not in repo.trees or any(
                p not in repo.commits for p in body["parents"]
            ):
                return 422, {"message": "Validation Failed"}
            sha = _sha("commit", json.dumps(body, sort_keys=True).encode())
            repo.commits[sha] = body
            return 201, {"sha": sha}
        if method == "POST" and rest == "refs":
            if body["ref"] in repo.refs:
                return 422, {"message": "Reference already exists"}
            repo.refs[body["ref"]] = body["sha"]
            return 201, {"ref": body["ref"], "object": {"sha": body["sha"]}}
        if method == "PATCH" and (m := re.fullmatch(r"refs/(heads/.+)", rest)):
            ref = f"refs/{m.group(1)}"
            if ref not in repo.refs or body["sha"] not in repo.commits:
                return 422, {"message": "Validation Failed"}
            repo.refs[ref] = body["sha"]
            return 200, {"ref": ref, "object": {"sha": body["sha"]}}
        return 404, {"message": "Not Found"}


def reply(request: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)
