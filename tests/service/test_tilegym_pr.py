"""The PR bot in a TileGym-layout repository: `/tileport port relu` on a pull request
delivers relu as TileGym's cutile-rs backend, from the PR head's cutile source and
the launch records the repository ships, as one commit on `tileport/relu` (the git
data API of the loopback GitHub server) and a comment with the evidence.

The fixture repository is the unmodified TileGym snapshot beside the checkout (the
backend, its op tests, the crate) with relu's recorded launches at
`tileport/launches.jsonl`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from github_fake import FakeGitHub, Repo
from sqlalchemy import select
from test_webhook import GH_TOKEN, HEAD, REPO, comment, deliver

from app.context import ServiceContext
from app.storage.models import Conversion, WebhookDelivery
from toolchain.env import REPO_ROOT

TILEGYM = REPO_ROOT.parent / "shared" / "tilegym"
LAUNCHES = REPO_ROOT.parent / "shared" / "tilegym-launches" / "launches.jsonl"
pytestmark = pytest.mark.skipif(
    not (TILEGYM / "src").is_dir() or not LAUNCHES.is_file(),
    reason="the TileGym snapshot and its recorded launches are not beside the checkout",
)


def _files(records: list[str]) -> dict[str, bytes]:
    files = {
        str(path.relative_to(TILEGYM)): path.read_bytes()
        for top in ("src/tilegym/ops", "tests/ops")
        for path in sorted((TILEGYM / top).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    files["README.md"] = (TILEGYM / "README.md").read_bytes()  # not read by the delivery
    if records:
        files["tileport/launches.jsonl"] = ("\n".join(records) + "\n").encode()
    return files


def _relu_records() -> list[str]:
    lines = LAUNCHES.read_text().splitlines()
    return [
        line for line in lines if line.strip() and json.loads(line)["kernel"] == "_relu_fwd_kernel"
    ]


@pytest.fixture
def tilegym_repo(context: ServiceContext) -> Iterator[FakeGitHub]:
    fake = FakeGitHub(GH_TOKEN).start()
    fake.repos[REPO] = Repo(HEAD, _files(_relu_records()))
    context.settings.github_api_url = fake.base_url
    context.settings.github_token = GH_TOKEN
    yield fake
    fake.stop()


def _delivery(context: ServiceContext) -> WebhookDelivery:
    with context.sessions() as session:
        [row] = session.scalars(select(WebhookDelivery))
        return row


def _command(client: TestClient, github: FakeGitHub, text: str) -> list[str]:
    """Comment `text` on the pull request; the bot's replies, once the delivery ran
    (the answer comes first; the test client waits for what runs after it)."""
    response = deliver(client, "issue_comment", comment(text))
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "accepted"
    assert "TileGym layout" in response.json()["reason"]
    return [c.body["body"] for c in github.calls_to("POST", r".*/issues/7/comments")]


@pytest.mark.slow
def test_port_command_delivers_the_op_as_a_commit_on_a_branch(
    client: TestClient, context: ServiceContext, tilegym_repo: FakeGitHub
) -> None:
    [reply] = _command(client, tilegym_repo, "/tileport port relu")
    repo = tilegym_repo.repos[REPO]

    branch = repo.refs["refs/heads/tileport/relu"]
    commit = repo.commits[branch]
    assert commit["parents"] == [HEAD]
    assert commit["message"].startswith("cutile-rs relu: ported by tileport")
    files = repo.tree_of(branch)
    before = repo.tree_of(HEAD)
    changed = {path for path in files if files[path] != before.get(path)}
    assert {
        "src/tilegym/ops/cutile_rs/relu.py",
        "src/tilegym/ops/cutile_rs/relu_kernel/kernel.rs",
        "src/tilegym/ops/cutile_rs/relu_kernel/ffi.rs",
        "src/tilegym/ops/cutile_rs/cutile_kernels/src/lib.rs",
        "src/tilegym/ops/cutile_rs/cutile_kernels/Cargo.toml",
        "tests/ops/activation/test_relu.py",
    } <= changed
    assert files["README.md"] == before["README.md"]  # the rest of the tree is the head's
    wrapper = files["src/tilegym/ops/cutile_rs/relu.py"].decode()
    assert '@register_impl("relu", backend="cutile-rs")' in wrapper
    # Only what the delivery reads was fetched (no README blob).
    fetched = {c.path.rsplit("/", 1)[-1] for c in tilegym_repo.calls_to("GET", r".*/git/blobs/.+")}
    assert repo.add_blob(before["README.md"]) not in fetched

    assert "branch `tileport/relu`" in reply
    assert "| `_relu_fwd_kernel` | COMPILED |" in reply
    statuses = [c.body for c in tilegym_repo.calls_to("POST", rf".*/statuses/{HEAD}")]
    assert [s["state"] for s in statuses] == ["pending", "success"]
    assert _delivery(context).status == "delivered"
    with context.sessions() as session:
        assert list(session.scalars(select(Conversion))) == []  # no port-spec conversion


def test_without_launch_records_the_pr_is_told_how_to_make_them(
    client: TestClient, context: ServiceContext, tilegym_repo: FakeGitHub
) -> None:
    tilegym_repo.repos[REPO] = Repo(HEAD, _files([]))
    [reply] = _command(client, tilegym_repo, "/tileport port relu")
    assert "no launch records at tileport/launches.jsonl" in reply
    assert "tileport capture" in reply
    assert tilegym_repo.repos[REPO].refs == {}
    assert _delivery(context).status == "failed"


@pytest.mark.slow
def test_an_op_it_cannot_deliver_is_refused_on_the_pr(
    client: TestClient, context: ServiceContext, tilegym_repo: FakeGitHub
) -> None:
    [reply] = _command(client, tilegym_repo, "/tileport port no_such_op")
    assert "could not deliver `no_such_op`" in reply and "unknown op 'no_such_op'" in reply
    statuses = [c.body["state"] for c in tilegym_repo.calls_to("POST", rf".*/statuses/{HEAD}")]
    assert statuses == ["pending", "failure"]
    assert tilegym_repo.repos[REPO].refs == {}
    assert _delivery(context).status == "failed"
