"""Tenants apart: runs belong to their submitter, who alone (with an admin) acts on
them and reads them; GPU results count from a GPU worker only; idempotency keys and
the queue are each caller's own; pages are read through a session made from a token.

Each test is the reproduction of an attack on a service shared by several users."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from service_support import AUTH, TOKEN, fixture_bytes, make_context, submit

from app.access import SESSION_S, session_cookie, session_owner
from app.api.deps import SESSION_COOKIE
from app.api.main import create_app
from app.context import ServiceContext
from app.github.status import commit_state
from app.settings import Settings
from app.storage.models import Conversion
from app.worker.ingest import ingest_files
from app.worker.job import service_gate
from schemas.api import ConversionStatus, ResultsTrust
from schemas.verdicts import GateVerdict

MALLORY = {"Authorization": "Bearer m-token"}  # another tenant
OPS = {"Authorization": "Bearer o-token"}  # an admin, where API_ADMINS names "ops"
GPU_HOST = {"Authorization": "Bearer g-token"}  # a GPU host, where API_GPU_WORKERS names "h200"


@contextmanager
def tenants(settings: Settings, **changes: Any) -> Iterator[tuple[TestClient, ServiceContext]]:
    """A server whose tokens are the test's own ("ci"), another tenant's ("mallory"),
    "ops" and "h200", with `changes` to its settings; its client holds no token."""
    tokens = {**settings.api_tokens, "mallory": "m-token", "ops": "o-token", "h200": "g-token"}
    update = {"api_tokens": tokens, "api_admins": ["ops"], "api_gpu_workers": ["h200"]}
    context = make_context(settings.model_copy(update={**update, **changes}))
    try:
        with TestClient(create_app(context)) as client:
            yield client, context
    finally:
        context.engine.dispose()


def error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def test_only_the_submitter_or_an_admin_acts_on_a_conversion(settings: Settings) -> None:
    """Another tenant's token cannot cancel a conversion nor send its GPU results
    (403, nothing changed); an admin's (API_ADMINS) can."""
    with tenants(settings) as (client, _):
        cid = submit(client).json()["id"]
        response = client.post(f"/v1/conversions/{cid}/cancel", headers=MALLORY)
        assert response.status_code == 404  # she cannot read it either
        assert client.get(f"/v1/conversions/{cid}", headers=AUTH).json()["status"] == "queued"
        # Nor send its GPU results (checked before anything of the upload is read).
        results = f"/v1/conversions/{cid}/gpu-results"
        files = [("files", ("correctness.json", b"{}"))]
        response = client.post(results, files=files, headers=MALLORY)
        assert response.status_code == 403 and error_code(response) == "forbidden"
        for allowed in (AUTH, GPU_HOST):
            response = client.post(results, files=files, headers=allowed)
            assert response.status_code == 409  # allowed, but not awaiting a GPU
        response = client.post(f"/v1/conversions/{cid}/cancel", headers=OPS)
        assert response.status_code == 202 and response.json()["status"] == "cancelled"


def test_a_tenant_who_can_read_a_run_still_cannot_cancel_it(settings: Settings) -> None:
    with tenants(settings, public_read=True) as (client, _):
        cid = submit(client).json()["id"]
        response = client.post(f"/v1/conversions/{cid}/cancel", headers=MALLORY)
        assert response.status_code == 403 and error_code(response) == "forbidden"


def test_reads_need_a_token_and_show_a_tenant_only_its_own_runs(settings: Settings) -> None:
    """Anonymous: every read of a run, its artifacts, the list, the pages and /metrics
    is refused. Another tenant: the run does not exist for her. Admins and GPU
    workers read every run."""
    with tenants(settings) as (client, context):
        cid = submit(client).json()["id"]
        ingest_files(context.sessions, context.settings, cid)
        reads = [
            "/v1/conversions",
            f"/v1/conversions/{cid}",
            f"/v1/conversions/{cid}/artifacts",
            f"/v1/conversions/{cid}/artifacts/input/vadd.py",
            "/metrics",
        ]
        for path in reads:
            response = client.get(path)
            assert response.status_code == 401, path
            assert TOKEN not in response.text and cid not in response.text
        for page in ("/runs", "/runs/_rows", f"/runs/{cid}", f"/runs/{cid}/_timeline"):
            response = client.get(page, follow_redirects=False)
            assert response.status_code == 303, page
            assert response.headers["location"].startswith("/login?next=/runs")
        for path in reads[1:4]:
            assert client.get(path, headers=MALLORY).status_code == 404, path
        assert client.get(f"/runs/{cid}", headers=MALLORY).status_code == 404
        assert client.get("/v1/conversions", headers=MALLORY).json()["total"] == 0
        assert cid not in client.get("/runs", headers=MALLORY).text
        for reader in (AUTH, OPS, GPU_HOST):
            assert client.get("/v1/conversions", headers=reader).json()["total"] == 1
            for path in reads[1:4]:
                assert client.get(path, headers=reader).status_code == 200, path
            assert cid in client.get("/runs", headers=reader).text


def test_public_read_is_an_explicit_setting(settings: Settings) -> None:
    with tenants(settings, public_read=True) as (client, _):
        cid = submit(client).json()["id"]
        assert client.get(f"/v1/conversions/{cid}").status_code == 200
        assert cid in client.get("/runs").text
        assert client.post(f"/v1/conversions/{cid}/cancel").status_code == 401


def test_a_page_session_is_made_from_a_token_and_bound_to_it(settings: Settings) -> None:
    with tenants(settings) as (client, context):
        cid = submit(client).json()["id"]
        refused = client.post("/login", data={"token": "guess", "next": "/runs"})
        assert refused.status_code == 401 and SESSION_COOKIE not in refused.cookies
        signed_in = client.post(
            "/login", data={"token": TOKEN, "next": f"/runs/{cid}"}, follow_redirects=False
        )
        assert signed_in.status_code == 303 and signed_in.headers["location"] == f"/runs/{cid}"
        cookie = signed_in.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
        assert cid in client.get(f"/runs/{cid}").text
        assert client.get(f"/v1/conversions/{cid}").status_code == 200
        client.post("/logout")
        assert client.get(f"/runs/{cid}", follow_redirects=False).status_code == 303
        # Elsewhere to go after signing in is this service's pages only.
        away = client.post(
            "/login", data={"token": TOKEN, "next": "//evil.example/runs"}, follow_redirects=False
        )
        assert away.headers["location"] == "/runs"
        client.cookies.clear()
        crossed = client.post(
            "/login", data={"token": TOKEN}, headers={"Origin": "https://evil.example"}
        )
        assert crossed.status_code == 403 and SESSION_COOKIE not in crossed.cookies
    s = context.settings
    now = 1_000_000.0
    value = session_cookie(s, "ci", now)
    assert session_owner(s, value, now) == "ci"
    assert session_owner(s, value, now + SESSION_S + 1) is None  # expired
    assert session_owner(s, value.replace("ci.", "ops.", 1), now) is None  # renamed
    rotated = s.model_copy(update={"api_tokens": {**s.api_tokens, "ci": "new"}})
    assert session_owner(rotated, value, now) is None  # the token changed


def test_gpu_results_pass_only_from_a_gpu_worker() -> None:
    """A user-reported result (the submitter's or an admin's upload) can make a run at
    best UNVERIFIED, never PASS nor a green commit status."""
    user = ResultsTrust.USER_REPORTED
    assert service_gate(GateVerdict.PASS, user) == GateVerdict.UNVERIFIED
    assert service_gate(GateVerdict.FAIL, user) == GateVerdict.FAIL
    assert service_gate(GateVerdict.PASS, ResultsTrust.GPU_WORKER) == GateVerdict.PASS
    finished = Conversion(
        status=ConversionStatus.FINISHED,
        gate_verdict=GateVerdict.UNVERIFIED,
        outcome="complete",
        headline={"level": "IR exact"},
    )
    state, description = commit_state(finished)
    assert state == "failure" and "not a GPU worker" in description


def test_idempotency_keys_are_each_callers_own(settings: Settings) -> None:
    """The same key from another tenant starts that tenant's own conversion (no 409
    naming someone else's), and a key spelled like the PR bot's names no bot run."""
    with tenants(settings) as (client, context):
        first = submit(client, headers={"Idempotency-Key": "release"}).json()["id"]
        other = submit(client, headers={"Idempotency-Key": "release", **MALLORY})
        assert other.status_code == 202 and other.json()["duplicate"] is False
        assert other.json()["id"] != first
        changed = fixture_bytes("vadd.py") + b"# other\n"
        conflict = submit(client, headers={"Idempotency-Key": "release", **MALLORY}, source=changed)
        assert conflict.status_code == 409
        assert conflict.json()["error"]["detail"]["conversion_id"] == other.json()["id"]
        bot_key = {"Idempotency-Key": "github:0123456789abcdef:deadbeef:vadd", **MALLORY}
        squatted = submit(client, headers=bot_key).json()["id"]
        with context.sessions() as session:
            stored = session.get(Conversion, squatted)
            assert stored is not None and stored.idempotency_key is not None
            assert not stored.idempotency_key.startswith("github:")


def test_one_caller_cannot_fill_the_queue(settings: Settings) -> None:
    """A caller with its share waiting is refused (429) before its submission is
    read, however bad; another caller is still served."""
    with tenants(settings, queue_max_per_caller=1) as (client, _):
        assert submit(client, headers=MALLORY).status_code == 202
        for source in (None, b"not a kernel"):
            refused = submit(client, headers=MALLORY, source=source)
            assert refused.status_code == 429 and error_code(refused) == "queue_full"
            assert refused.json()["error"]["detail"] == {"caller_limit": 1}
        assert submit(client).status_code == 202
