"""A small client for the GitHub REST API endpoints the bot uses; the base URL
is configurable (GitHub Enterprise: https://HOST/api/v3)."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

import httpx

API_VERSION = "2022-11-28"
TIMEOUT_S = 10.0
MAX_FILE_PAGES = 10


class GitHubError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubClient:
    def __init__(self, base_url: str, token: str, transport: httpx.BaseTransport | None = None):
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "tileport-bot",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=TIMEOUT_S, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise GitHubError(f"{method} {path}: {type(error).__name__}") from error
        if response.status_code >= 400:
            raise GitHubError(
                f"{method} {path}: HTTP {response.status_code}", status=response.status_code
            )
        return response.json() if response.content else None

    @staticmethod
    def repo_path(repo: str) -> str:
        owner, _, name = repo.partition("/")
        return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"

    def pull_request(self, repo: str, number: int) -> dict[str, Any]:
        pull: dict[str, Any] = self.request("GET", f"{self.repo_path(repo)}/pulls/{number}")
        return pull

    def pull_request_files(self, repo: str, number: int) -> list[str]:
        names: list[str] = []
        for page in range(1, MAX_FILE_PAGES + 1):
            batch = self.request(
                "GET",
                f"{self.repo_path(repo)}/pulls/{number}/files",
                params={"per_page": 100, "page": page},
            )
            names.extend(str(item["filename"]) for item in batch)
            if len(batch) < 100:
                break
        return names

    def file_content(self, repo: str, path: str, ref: str) -> bytes:
        item = self.request(
            "GET",
            f"{self.repo_path(repo)}/contents/{quote(path)}",
            params={"ref": ref},
        )
        if not isinstance(item, dict) or item.get("type") != "file":
            raise GitHubError(f"{path} is not a file at {ref}")
        if item.get("encoding") != "base64":
            raise GitHubError(f"{path}: unsupported content encoding")
        return base64.b64decode(item.get("content", ""))

    def comment(self, repo: str, number: int, body: str) -> None:
        self.request(
            "POST", f"{self.repo_path(repo)}/issues/{number}/comments", json={"body": body}
        )

    def commit_status(
        self,
        repo: str,
        sha: str,
        state: str,
        context: str,
        description: str,
        target_url: str | None = None,
    ) -> None:
        payload: dict[str, str] = {
            "state": state,
            "context": context,
            "description": description[:140],
        }
        if target_url:
            payload["target_url"] = target_url
        self.request("POST", f"{self.repo_path(repo)}/statuses/{quote(sha)}", json=payload)

    # -- git data: reading a commit's tree, writing a commit on a branch -------------

    def tree(self, repo: str, sha: str) -> list[dict[str, Any]]:
        """Every entry of the commit's (or tree's) tree, recursively."""
        found = self.request(
            "GET", f"{self.repo_path(repo)}/git/trees/{quote(sha)}", params={"recursive": "1"}
        )
        if not isinstance(found, dict) or found.get("truncated"):
            raise GitHubError(f"the tree of {sha} is too large to read in one response")
        return list(found.get("tree", []))

    def blob(self, repo: str, sha: str) -> bytes:
        item = self.request("GET", f"{self.repo_path(repo)}/git/blobs/{quote(sha)}")
        if not isinstance(item, dict) or item.get("encoding") != "base64":
            raise GitHubError(f"blob {sha}: unsupported content encoding")
        return base64.b64decode(item.get("content", ""))

    def create_blob(self, repo: str, content: bytes) -> str:
        made = self.request(
            "POST",
            f"{self.repo_path(repo)}/git/blobs",
            json={"content": base64.b64encode(content).decode(), "encoding": "base64"},
        )
        return str(made["sha"])

    def create_tree(self, repo: str, base_tree: str, blobs: dict[str, str]) -> str:
        """A tree: `base_tree` with each path set to its blob (regular files)."""
        entries = [
            {"path": path, "mode": "100644", "type": "blob", "sha": sha}
            for path, sha in sorted(blobs.items())
        ]
        made = self.request(
            "POST",
            f"{self.repo_path(repo)}/git/trees",
            json={"base_tree": base_tree, "tree": entries},
        )
        return str(made["sha"])

    def create_commit(self, repo: str, message: str, tree: str, parent: str) -> str:
        made = self.request(
            "POST",
            f"{self.repo_path(repo)}/git/commits",
            json={"message": message, "tree": tree, "parents": [parent]},
        )
        return str(made["sha"])

    def commit_tree(self, repo: str, sha: str) -> str:
        """The tree a commit points at."""
        commit = self.request("GET", f"{self.repo_path(repo)}/git/commits/{quote(sha)}")
        return str(commit["tree"]["sha"])

    def set_branch(self, repo: str, branch: str, sha: str) -> None:
        """Point `refs/heads/<branch>` at `sha`: created, or moved when it exists."""
        try:
            self.request(
                "POST",
                f"{self.repo_path(repo)}/git/refs",
                json={"ref": f"refs/heads/{branch}", "sha": sha},
            )
        except GitHubError as error:
            if error.status != 422:  # 422: the reference already exists
                raise
            self.request(
                "PATCH",
                f"{self.repo_path(repo)}/git/refs/heads/{quote(branch)}",
                json={"sha": sha, "force": True},
            )
