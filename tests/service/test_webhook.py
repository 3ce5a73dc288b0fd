"""The PR bot: signature, replay, malformed deliveries, the comment command, the
port label, and the reports back through the (loopback) GitHub REST API."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from github_fake import FakeGitHub, Repo
from service_support import FIXTURES
from sqlalchemy import select

from app.context import ServiceContext
from app.github.client import GitHubError
from app.github.report import report_conversion
from app.storage.models import Conversion, Event, WebhookDelivery
from app.worker import queue
from app.worker.job import StageRecorder
from schemas.api import ConversionStatus
from schemas.pipeline import Stage, StageRecord

REPO = "acme/kernels"
HEAD = "a" * 40
GH_TOKEN = "gh-token"


@pytest.fixture
def github(context: ServiceContext) -> Iterator[FakeGitHub]:
    fake = FakeGitHub(GH_TOKEN).start()
    files = {
        f"examples/kernels/{name}": (FIXTURES / name).read_bytes()
        for name in ("vadd.py", "vadd.port.yaml", "vadd_reference.py")
    }
    fake.repos[REPO] = Repo(HEAD, files, changed=["README.md", "examples/kernels/vadd.py"])
    context.settings.github_api_url = fake.base_url
    context.settings.github_token = GH_TOKEN
    context.settings.public_url = "https://tileport.example"
    yield fake
    fake.stop()


def sign(body: bytes, secret: str = "webhook-secret") -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    client: TestClient,
    event: str,
    payload: Any,
    delivery: str | None = None,
    signature: str | None = None,
    raw: bytes | None = None,
) -> Any:
    body = raw if raw is not None else json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body) if signature is None else signature,
        "Content-Type": "application/json",
    }
    return client.post("/v1/webhooks/github", content=body, headers=headers)


def comment(body: str, association: str = "COLLABORATOR", on_pr: bool = True) -> dict[str, Any]:
    issue: dict[str, Any] = {"number": 7}
    if on_pr:
        issue["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/7"}
    return {
        "action": "created",
        "issue": issue,
        "comment": {"body": body, "author_association": association, "user": {"login": "ada"}},
        "repository": {"full_name": REPO},
    }


def labelled(label: str = "tileport:port") -> dict[str, Any]:
    return {
        "action": "labeled",
        "label": {"name": label},
        "pull_request": {"number": 7, "head": {"sha": HEAD}},
        "repository": {"full_name": REPO},
        "sender": {"login": "ada"},
    }


def conversions(context: ServiceContext) -> list[Conversion]:
    with context.sessions() as session:
        return list(session.scalars(select(Conversion)))


def deliveries(context: ServiceContext) -> list[WebhookDelivery]:
    with context.sessions() as session:
        return list(session.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id)))


def test_comment_command_starts_a_port_of_the_pr_head(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    response = deliver(client, "issue_comment", comment("Looks good.\n/tileport port vadd\n"))
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["status"] == "accepted" and len(answer["conversions"]) == 1
    [conversion] = conversions(context)
    assert conversion.operator == "vadd" and conversion.status == "queued"
    assert conversion.origin["head_sha"] == HEAD and conversion.origin["pull_request"] == 7
    assert conversion.submitted_by == "github:ada"
    fetched = github.calls_to("GET", r"/api/v3/repos/acme/kernels/contents/.+")
    assert {call.path.rsplit("/", 1)[-1] for call in fetched} == {
        "lib.rs",  # the TileGym-layout probe: not there, so a port spec is read
        "vadd.port.yaml",
        "vadd.py",
        "vadd_reference.py",
    }
    assert all(call.query["ref"] == [HEAD] for call in fetched)
    [status] = github.calls_to("POST", rf"/api/v3/repos/acme/kernels/statuses/{HEAD}")
    assert status.body["state"] == "pending" and status.body["context"] == "tileport/vadd"
    assert status.body["target_url"] == f"https://tileport.example/runs/{conversion.id}"
    assert all(call.authorization == f"Bearer {GH_TOKEN}" for call in github.calls)
    assert deliveries(context)[0].status == "accepted"


def test_forged_signature_is_rejected_and_logged(
    client: TestClient,
    context: ServiceContext,
    github: FakeGitHub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = comment("/tileport port vadd")
    with caplog.at_level(logging.WARNING, logger="tileport.webhook"):
        forged = deliver(client, "issue_comment", payload, signature=sign(b"other body"))
        wrong_secret = deliver(
            client, "issue_comment", payload, signature=sign(json.dumps(payload).encode(), "x")
        )
        unsigned = deliver(client, "issue_comment", payload, signature="")
        sha1 = deliver(client, "issue_comment", payload, signature="sha1=" + "0" * 40)
    for response in (forged, wrong_secret, unsigned, sha1):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "bad_signature"
    assert conversions(context) == [] and github.calls == []
    rows = deliveries(context)
    assert [row.status for row in rows] == ["rejected"] * 4
    assert all(row.delivery_id is None and not row.signature_ok for row in rows)
    assert caplog.text.count("rejected: bad signature") == 4


def test_a_forged_delivery_cannot_burn_a_real_delivery_id(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    payload = comment("/tileport port vadd")
    assert (
        deliver(client, "issue_comment", payload, "d-1", signature="sha256=00").status_code == 401
    )
    assert deliver(client, "issue_comment", payload, "d-1").status_code == 202


def test_without_a_secret_every_delivery_is_refused(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    context.settings.github_webhook_secret = ""
    response = deliver(client, "ping", {"zen": "hi"}, signature=sign(b'{"zen": "hi"}', ""))
    assert response.status_code == 401


def test_replayed_delivery_is_rejected(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    payload = comment("/tileport port vadd")
    assert deliver(client, "issue_comment", payload, "delivery-1").status_code == 202
    replay = deliver(client, "issue_comment", payload, "delivery-1")
    assert replay.status_code == 409
    assert replay.json()["error"]["code"] == "replayed_delivery"
    assert len(conversions(context)) == 1
    assert [row.status for row in deliveries(context)] == ["accepted", "replayed"]


def test_malformed_deliveries_are_rejected(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    not_json = deliver(client, "issue_comment", None, raw=b"{not json")
    assert not_json.status_code == 400
    not_object = deliver(client, "issue_comment", [1, 2])
    assert not_object.status_code == 400
    missing = comment("/tileport port vadd")
    del missing["comment"]["author_association"]
    assert deliver(client, "issue_comment", missing).status_code == 400
    no_id = deliver(client, "ping", {}, delivery="../etc")
    assert no_id.status_code == 400
    for response in (not_json, not_object, no_id):
        assert response.json()["error"]["code"] == "malformed_delivery"
    assert conversions(context) == []
    assert {row.status for row in deliveries(context)} == {"rejected"}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (comment("/tileport port vadd", association="NONE"), "not a collaborator"),
        (comment("/tileport port vadd", on_pr=False), "not on a pull request"),
        (comment("please /tileport port vadd now"), "no /tileport command"),
        ({**comment("/tileport port vadd"), "action": "edited"}, "not newly created"),
    ],
)
def test_comments_that_are_not_commands_are_ignored(
    client: TestClient,
    context: ServiceContext,
    github: FakeGitHub,
    payload: dict[str, Any],
    reason: str,
) -> None:
    response = deliver(client, "issue_comment", payload)
    assert response.status_code == 200
    assert response.json()["status"] == "ignored" and reason in response.json()["reason"]
    assert conversions(context) == []


def test_ping_and_unknown_events(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    assert deliver(client, "ping", {"zen": "x"}).json()["reason"] == "pong"
    assert deliver(client, "push", {"ref": "main"}).json()["status"] == "ignored"


def test_port_label_ports_every_changed_kernel(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    assert deliver(client, "pull_request", labelled("bug")).json()["status"] == "ignored"
    response = deliver(client, "pull_request", labelled())
    assert response.status_code == 202
    [conversion] = conversions(context)
    assert conversion.origin["trigger"] == "label"
    files = github.calls_to("GET", r"/api/v3/repos/acme/kernels/pulls/7/files")
    assert files[0].query["per_page"] == ["100"]


def test_a_broken_spec_in_the_pr_is_reported_on_the_pr(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    github.repos[REPO].files["examples/kernels/vadd.port.yaml"] = b"spec_version: 9\n"
    response = deliver(client, "issue_comment", comment("/tileport port vadd"))
    assert response.status_code == 200
    assert response.json()["status"] == "failed"
    [note] = github.calls_to("POST", r"/api/v3/repos/acme/kernels/issues/7/comments")
    assert "could not start the port of `vadd`" in note.body["body"]
    assert "\n- `spec_version`: " in note.body["body"], "the comment names the failing fields"
    [status] = github.calls_to("POST", rf"/api/v3/repos/acme/kernels/statuses/{HEAD}")
    assert status.body["state"] == "error"
    assert conversions(context) == []


def test_a_comment_and_a_label_on_one_commit_share_one_run(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    first = deliver(client, "issue_comment", comment("/tileport port vadd")).json()
    second = deliver(client, "pull_request", labelled()).json()
    again = deliver(client, "issue_comment", comment("/tileport port vadd")).json()
    [conversion] = conversions(context)
    assert first["conversions"] == second["conversions"] == again["conversions"] == [conversion.id]
    statuses = github.calls_to("POST", rf"/api/v3/repos/acme/kernels/statuses/{HEAD}")
    assert len(statuses) == 1, "one pending status for the one run"
    github.repos[REPO].head_sha = "b" * 40
    newer = deliver(client, "issue_comment", comment("/tileport port vadd")).json()
    assert newer["conversions"] != first["conversions"], "a new head commit is a new run"


def test_an_unknown_operator_is_reported(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    response = deliver(client, "issue_comment", comment("/tileport port nosuchop"))
    assert response.json()["status"] == "failed"
    assert "HTTP 404" in response.json()["reason"]


def finished_conversion(client: TestClient, context: ServiceContext, gate: str) -> str:
    cid = str(
        deliver(client, "issue_comment", comment("/tileport port vadd")).json()["conversions"][0]
    )
    claim = queue.try_claim(context.sessions, cid, "worker", 30.0)
    assert claim is not None
    now = datetime.now(UTC)
    StageRecorder(context.sessions, cid, context.settings.data_dir, 1)(
        StageRecord(
            stage=Stage.PREFLIGHT,
            attempt=1,
            verdict="PASS",
            started_at=now - timedelta(seconds=3),
            finished_at=now,
        )
    )
    with context.sessions.begin() as session:
        row = session.get_one(Conversion, cid)
        row.outcome, row.gate_verdict = "complete", gate
        row.headline = {"sameness": "exact", "geomean_ratio": 0.998}
    assert queue.finish(context.sessions, claim, ConversionStatus.FINISHED)
    return cid


@pytest.mark.parametrize(("gate", "state"), [("PASS", "success"), ("FAIL", "failure")])
def test_the_outcome_is_reported_with_figures(
    client: TestClient, context: ServiceContext, github: FakeGitHub, gate: str, state: str
) -> None:
    cid = finished_conversion(client, context, gate)
    report_conversion(context.settings, context.sessions, cid)
    [note] = github.calls_to("POST", r"/api/v3/repos/acme/kernels/issues/7/comments")
    text = note.body["body"]
    assert "**finished**" in text and f"gate {gate}" in text
    assert "| geomean_ratio | 0.998 |" in text and "| preflight | 1 | PASS | 3.0 |" in text
    assert f"https://tileport.example/runs/{cid}" in text
    final = github.calls_to("POST", rf"/api/v3/repos/acme/kernels/statuses/{HEAD}")[-1]
    assert final.body["state"] == state and final.body["context"] == "tileport/vadd"


def test_a_run_awaiting_a_gpu_is_pending_with_its_level(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    cid = finished_conversion(client, context, "AWAITING_GPU")
    with context.sessions.begin() as session:
        row = session.get_one(Conversion, cid)
        row.status = ConversionStatus.AWAITING_GPU
        row.headline = {"level": "IR exact, SASS-identical sm_90/sm_100"}
    report_conversion(context.settings, context.sessions, cid)
    final = github.calls_to("POST", rf"/api/v3/repos/acme/kernels/statuses/{HEAD}")[-1]
    assert final.body["state"] == "pending"
    assert final.body["description"] == "IR exact, SASS-identical sm_90/sm_100; GPU run pending"
    [note] = github.calls_to("POST", r"/api/v3/repos/acme/kernels/issues/7/comments")
    assert "**awaiting_gpu**" in note.body["body"]


def test_a_github_outage_while_reporting_is_recorded(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    cid = finished_conversion(client, context, "PASS")
    github.broken = True
    with pytest.raises(GitHubError):
        report_conversion(context.settings, context.sessions, cid)
    with context.sessions() as session:
        kinds = list(session.scalars(select(Event.kind).where(Event.conversion_id == cid)))
    assert "github.report_failed" in kinds


def test_api_conversions_are_not_reported_to_github(
    client: TestClient, context: ServiceContext, github: FakeGitHub
) -> None:
    from service_support import submit

    cid = submit(client).json()["id"]
    report_conversion(context.settings, context.sessions, cid)
    assert github.calls == []
