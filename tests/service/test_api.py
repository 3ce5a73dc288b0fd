"""The REST API: submissions, validation errors, idempotency, auth, listing,
cancel, backpressure, health and OpenAPI."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from fastapi.testclient import TestClient
from service_support import AUTH, fixture_bytes, make_context, submit, upload_files
from sqlalchemy import func, select

from app.api.main import create_app
from app.context import ServiceContext
from app.conversions import run_dir
from app.settings import load_settings
from app.storage.models import Conversion, Event
from app.worker.queue import try_claim


def conversion_count(context: ServiceContext) -> int:
    with context.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Conversion)) or 0)


def error_code(response: object) -> str:
    body = response.json()  # type: ignore[attr-defined]
    return str(body["error"]["code"])


def test_upload_is_queued_with_its_files_laid_out_for_the_spec(
    client: TestClient, context: ServiceContext
) -> None:
    response = submit(client)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "queued" and body["operator"] == "vadd"
    assert response.headers["location"] == f"/v1/conversions/{body['id']}"
    inputs = run_dir(context.settings, body["id"]) / "input"
    assert (inputs / "vadd.port.yaml").read_bytes() == fixture_bytes("vadd.port.yaml")
    assert (inputs / "vadd.py").read_bytes() == fixture_bytes("vadd.py")
    assert (inputs / "vadd_reference.py").is_file()
    view = client.get(f"/v1/conversions/{body['id']}").json()
    assert view["kernel"] == "vadd_kernel"
    assert view["submitted_by"] == "ci"
    assert view["stages"] == [] and view["worker_attempts"] == 0


def test_source_is_stored_under_the_spec_name_whatever_the_upload_name(
    client: TestClient, context: ServiceContext
) -> None:
    response = submit(client, source_name="something_else.py")
    assert response.status_code == 202
    inputs = run_dir(context.settings, response.json()["id"]) / "input"
    assert (inputs / "vadd.py").is_file()
    assert not (inputs / "something_else.py").exists()


def test_idempotency_key_replays_the_same_conversion(
    client: TestClient, context: ServiceContext
) -> None:
    first = submit(client, headers={"Idempotency-Key": "abc"})
    again = submit(client, headers={"Idempotency-Key": "abc"})
    assert again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["duplicate"] is True
    assert again.headers["idempotent-replayed"] == "true"
    assert conversion_count(context) == 1


def test_idempotency_key_reused_for_another_request_is_a_conflict(
    client: TestClient, context: ServiceContext
) -> None:
    submit(client, headers={"Idempotency-Key": "abc"})
    other_source = fixture_bytes("vadd.py") + b"\n# changed\n"
    response = submit(client, headers={"Idempotency-Key": "abc"}, source=other_source)
    assert response.status_code == 409
    assert error_code(response) == "idempotency_conflict"
    assert conversion_count(context) == 1


def test_invalid_yaml_spec_is_rejected(client: TestClient, context: ServiceContext) -> None:
    response = submit(client, spec=b"name: [unclosed\n")
    assert response.status_code == 422
    assert error_code(response) == "invalid_spec"
    assert conversion_count(context) == 0


def test_spec_failing_the_schema_names_the_field(client: TestClient) -> None:
    spec = fixture_bytes("vadd.port.yaml").replace(b"spec_version: 1", b"spec_version: 7")
    response = submit(client, spec=spec)
    assert response.status_code == 422
    problems = response.json()["error"]["detail"]["problems"]
    assert any(problem["field"] == "spec_version" for problem in problems)


def test_spec_with_a_path_escaping_the_inputs_is_rejected(client: TestClient) -> None:
    spec = fixture_bytes("vadd.port.yaml").replace(b"source: vadd.py", b"source: ../../x.py")
    response = submit(client, spec=spec)
    assert response.status_code == 422
    assert error_code(response) == "invalid_spec"


def test_a_bytecode_dump_is_a_submitted_file_below_the_spec(
    client: TestClient, context: ServiceContext
) -> None:
    """A variant's `reference_bytecode` names a file of the submission: never a path
    of the server (read by the job, outside the sandbox), never one not submitted."""
    spec = fixture_bytes("vadd.port.yaml")
    for escape in (b"../../../etc/shadow", b"/dev/zero"):
        named = _with_dump(spec, escape)
        response = submit(client, spec=named)
        assert response.status_code == 422 and error_code(response) == "invalid_spec"
        [problem] = response.json()["error"]["detail"]["problems"]
        assert problem["field"] == "variants[0].reference_bytecode"
    response = submit(client, spec=_with_dump(spec, b"dumps/vadd.tileirbc"))
    assert response.status_code == 422 and error_code(response) == "invalid_spec"
    assert response.json()["error"]["detail"]["expected_file"] == "dumps/vadd.tileirbc"
    # Uploaded as a `bytecode` part, it is kept where the spec names it.
    files = {
        **upload_files(spec=_with_dump(spec, b"dumps/vadd.tileirbc")),
        "bytecode": ("vadd.tileirbc", b"TileIR\x00dump"),
    }
    response = client.post("/v1/conversions", files=files, headers=AUTH)
    assert response.status_code == 202, response.text
    inputs = run_dir(context.settings, response.json()["id"]) / "input"
    assert (inputs / "dumps" / "vadd.tileirbc").read_bytes() == b"TileIR\x00dump"


def _with_dump(spec: bytes, dump: bytes) -> bytes:
    """`spec` whose first variant's reference is the bytecode dump `dump`."""
    data = yaml.safe_load(spec)
    data["variants"][0]["reference_bytecode"] = dump.decode()
    return yaml.safe_dump(data, sort_keys=False).encode()


def test_source_without_a_kernel_is_not_a_kernel(
    client: TestClient, context: ServiceContext
) -> None:
    response = submit(client, source=b"def vadd_kernel(a, b, c):\n    return a\n")
    assert response.status_code == 422
    assert error_code(response) == "not_a_kernel"
    assert response.json()["error"]["detail"]["reason"] == "no_kernel"
    assert conversion_count(context) == 0


def test_syntax_error_reports_its_line(client: TestClient) -> None:
    response = submit(client, source=b"import cuda.tile as ct\n\n@ct.kernel\ndef f(:\n")
    assert response.status_code == 422
    detail = response.json()["error"]["detail"]
    assert detail["reason"] == "syntax_error" and detail["line"] == 4


def test_binary_upload_is_not_a_kernel(client: TestClient) -> None:
    response = submit(client, source=bytes(range(256)) * 4)
    assert response.status_code == 422
    assert response.json()["error"]["detail"]["reason"] == "not_utf8"


def test_spec_naming_a_kernel_the_source_lacks_is_rejected(client: TestClient) -> None:
    source = fixture_bytes("vadd.py").replace(b"def vadd_kernel", b"def other_kernel")
    response = submit(client, source=source)
    assert response.status_code == 422
    assert response.json()["error"]["detail"]["kernels"] == ["other_kernel"]


def test_kernel_check_never_executes_the_source(client: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    source = fixture_bytes("vadd.py") + f"\nopen({str(marker)!r}, 'w').write('x')\n".encode()
    assert submit(client, source=source).status_code == 202
    assert not marker.exists()


def test_missing_reference_module_is_an_invalid_spec(client: TestClient) -> None:
    files = upload_files()
    del files["reference"]
    response = client.post("/v1/conversions", files=files, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["error"]["detail"]["expected_file"] == "vadd_reference.py"


def test_oversized_file_is_413(client: TestClient, context: ServiceContext) -> None:
    limit = context.settings.max_upload_bytes
    padding = b"#" * (limit + 1)
    response = submit(client, source=fixture_bytes("vadd.py") + padding)
    assert response.status_code == 413
    assert error_code(response) == "upload_too_large"
    assert conversion_count(context) == 0


def test_oversized_body_is_refused_before_parsing(client: TestClient) -> None:
    body = b"x" * (3 * 64 * 1024 + 100_000)
    response = client.post(
        "/v1/conversions",
        content=body,
        headers={**AUTH, "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert response.status_code == 413
    assert error_code(response) == "upload_too_large"


def test_oversized_chunked_body_without_length_is_refused(client: TestClient) -> None:
    def chunks() -> object:
        for _ in range(40):
            yield b"y" * 10_000

    response = client.post(
        "/v1/conversions",
        content=chunks(),  # type: ignore[arg-type]
        headers={**AUTH, "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert response.status_code == 413


def test_mutations_need_a_valid_bearer_token(client: TestClient, anonymous: TestClient) -> None:
    files = upload_files()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        response = anonymous.post("/v1/conversions", files=files, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert error_code(response) == "unauthorized"
    accepted = submit(client).json()["id"]
    assert anonymous.post(f"/v1/conversions/{accepted}/cancel").status_code == 401
    assert client.get(f"/v1/conversions/{accepted}").status_code == 200


def test_unknown_options_are_refused_with_the_known_keys(client: TestClient) -> None:
    for response in (
        client.post(
            "/v1/conversions",
            files=upload_files(),
            data={"options": '{"no-gpu": true}'},
            headers=AUTH,
        ),
        client.post(
            "/v1/conversions",
            json={"source_path": "vadd.py", "options": {"no-gpu": True}},
            headers=AUTH,
        ),
    ):
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_options" and error["detail"]["unknown"] == ["no-gpu"]
        assert error["detail"]["known"] == ["no_gpu", "llm", "gpu_arch", "time_all_configs"]


def test_json_submission_reads_files_under_the_source_root(client: TestClient) -> None:
    response = client.post(
        "/v1/conversions",
        json={"source_path": "vadd.py", "options": {"no_gpu": True}},
        headers=AUTH,
    )
    assert response.status_code == 202, response.text
    view = client.get(f"/v1/conversions/{response.json()['id']}").json()
    assert view["options"] == {
        "no_gpu": True,
        "llm": False,
        "gpu_arch": None,
        "time_all_configs": False,
    }


def test_json_submission_with_spec_path_and_inline_spec(client: TestClient) -> None:
    by_path = client.post("/v1/conversions", json={"spec_path": "vadd.port.yaml"}, headers=AUTH)
    assert by_path.status_code == 202
    inline = fixture_bytes("vadd.port.yaml").decode()
    by_text = client.post(
        "/v1/conversions", json={"source_path": "vadd.py", "spec": inline}, headers=AUTH
    )
    assert by_text.status_code == 202


def test_a_source_root_spec_brings_its_bytecode_dump(
    client: TestClient, context: ServiceContext, source_root: Path, tmp_path: Path
) -> None:
    """A spec under SOURCE_ROOT naming a dump: the dump beside it comes into the run;
    a link in its place, out of the source root, is refused."""
    (source_root / "dumps").mkdir()
    (source_root / "dumps" / "vadd.tileirbc").write_bytes(b"TileIR\x00dump")
    spec = _with_dump(fixture_bytes("vadd.port.yaml"), b"dumps/vadd.tileirbc")
    (source_root / "vadd.port.yaml").write_bytes(spec)
    response = client.post("/v1/conversions", json={"spec_path": "vadd.port.yaml"}, headers=AUTH)
    assert response.status_code == 202, response.text
    inputs = run_dir(context.settings, response.json()["id"]) / "input"
    assert (inputs / "dumps" / "vadd.tileirbc").read_bytes() == b"TileIR\x00dump"
    (source_root / "dumps" / "vadd.tileirbc").unlink()
    secret = tmp_path / "secret"
    secret.write_bytes(b"not for runs")
    (source_root / "dumps" / "vadd.tileirbc").symlink_to(secret)
    response = client.post("/v1/conversions", json={"spec_path": "vadd.port.yaml"}, headers=AUTH)
    assert response.status_code == 400 and error_code(response) == "invalid_source_path"


def test_json_submission_cannot_leave_the_source_root(
    client: TestClient, source_root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.py"
    outside.write_bytes(fixture_bytes("vadd.py"))
    (source_root / "link.py").symlink_to(outside)
    for path in ("../outside.py", str(outside), "link.py", "sub/../../outside.py"):
        response = client.post("/v1/conversions", json={"source_path": path}, headers=AUTH)
        assert response.status_code == 400, path
        assert error_code(response) == "invalid_source_path"


def test_json_submission_source_path_must_match_the_spec(
    client: TestClient, source_root: Path
) -> None:
    (source_root / "copy.py").write_bytes(fixture_bytes("vadd.py"))
    inline = fixture_bytes("vadd.port.yaml").decode()
    response = client.post(
        "/v1/conversions", json={"source_path": "copy.py", "spec": inline}, headers=AUTH
    )
    assert response.status_code == 422
    assert error_code(response) == "invalid_spec"


def test_json_submission_without_a_source_root(client: TestClient, context: ServiceContext) -> None:
    context.settings.source_root = None
    response = client.post("/v1/conversions", json={"source_path": "vadd.py"}, headers=AUTH)
    assert response.status_code == 400
    assert error_code(response) == "invalid_source_path"


def test_bad_request_bodies(client: TestClient) -> None:
    not_json = client.post(
        "/v1/conversions",
        content=b"{",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400 and error_code(not_json) == "invalid_request"
    extra = client.post("/v1/conversions", json={"source_path": "vadd.py", "x": 1}, headers=AUTH)
    assert extra.status_code == 400
    text = client.post(
        "/v1/conversions", content=b"hi", headers={**AUTH, "Content-Type": "text/plain"}
    )
    assert text.status_code == 415
    bad_options = client.post(
        "/v1/conversions", files=upload_files(), data={"options": "[1]"}, headers=AUTH
    )
    assert bad_options.status_code == 400
    missing_spec = upload_files()
    del missing_spec["spec"]
    response = client.post("/v1/conversions", files=missing_spec, headers=AUTH)
    assert response.status_code == 400 and response.json()["error"]["detail"]["field"] == "spec"


def test_list_filters_and_pages(client: TestClient, context: ServiceContext) -> None:
    ids = [submit(client).json()["id"] for _ in range(5)]
    client.post(f"/v1/conversions/{ids[0]}/cancel", headers=AUTH)
    page = client.get("/v1/conversions", params={"limit": 2}).json()
    assert page["total"] == 5 and len(page["items"]) == 2 and page["next_offset"] == 2
    last = client.get("/v1/conversions", params={"limit": 2, "offset": 4}).json()
    assert len(last["items"]) == 1 and last["next_offset"] is None
    seen = {
        item["id"]
        for offset in (0, 2, 4)
        for item in client.get("/v1/conversions", params={"limit": 2, "offset": offset}).json()[
            "items"
        ]
    }
    assert seen == set(ids)
    cancelled = client.get("/v1/conversions", params={"status": "cancelled"}).json()
    assert [item["id"] for item in cancelled["items"]] == [ids[0]]
    by_operator = client.get("/v1/conversions", params={"operator": "nope"}).json()
    assert by_operator["total"] == 0
    assert client.get("/v1/conversions", params={"status": "bogus"}).status_code == 422
    assert client.get("/v1/conversions", params={"limit": 0}).status_code == 422


def test_unknown_conversion_is_404(client: TestClient) -> None:
    for path in ("/v1/conversions/nope", "/v1/conversions/nope/artifacts"):
        response = client.get(path)
        assert response.status_code == 404 and error_code(response) == "unknown_conversion"
    response = client.post("/v1/conversions/nope/cancel", headers=AUTH)
    assert response.status_code == 404


def test_cancel_queued_then_again(client: TestClient, context: ServiceContext) -> None:
    cid = submit(client).json()["id"]
    response = client.post(f"/v1/conversions/{cid}/cancel", headers=AUTH)
    assert response.status_code == 202
    assert response.json()["status"] == "cancelled"
    again = client.post(f"/v1/conversions/{cid}/cancel", headers=AUTH)
    assert again.status_code == 409 and error_code(again) == "not_cancellable"
    assert try_claim(context.sessions, cid, "w", 5.0) is None


def test_cancel_running_flags_it_for_the_worker(
    client: TestClient, context: ServiceContext
) -> None:
    cid = submit(client).json()["id"]
    assert try_claim(context.sessions, cid, "worker-a", 30.0) is not None
    response = client.post(f"/v1/conversions/{cid}/cancel", headers=AUTH)
    assert response.json()["status"] == "running"
    assert response.json()["cancel_requested"] is True
    with context.sessions() as session:
        kinds = session.scalars(select(Event.kind).where(Event.conversion_id == cid)).all()
    assert "conversion.cancel_requested" in kinds


def test_full_queue_answers_429_with_retry_after(
    client: TestClient, context: ServiceContext
) -> None:
    context.settings.queue_max_pending = 2
    assert submit(client).status_code == 202
    assert submit(client).status_code == 202
    response = submit(client)
    assert response.status_code == 429
    assert response.headers["retry-after"] == str(context.settings.queue_retry_after_s)
    assert error_code(response) == "queue_full"
    assert conversion_count(context) == 2


def test_broker_failure_is_503_and_the_conversion_is_marked(
    client: TestClient, context: ServiceContext
) -> None:
    class DownBroker:
        def dispatch(self, conversion_id: str) -> None:
            raise ConnectionRefusedError("broker down")

        def ping(self) -> None:
            raise ConnectionRefusedError("broker down")

    context.dispatcher = DownBroker()
    response = submit(client)
    assert response.status_code == 503 and error_code(response) == "broker_unavailable"
    view = client.get("/v1/conversions").json()["items"][0]
    assert view["status"] == "error"
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["checks"]["queue"].startswith("failed")


def test_a_missing_requirement_makes_the_server_unready_and_refuse(
    client: TestClient, context: ServiceContext
) -> None:
    context.missing_requirements = ["cargo: run `make setup`"]
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["toolchain"] == "failed: cargo: run `make setup`"
    response = submit(client)
    assert response.status_code == 503 and error_code(response) == "requirement_missing"
    assert "cargo: run `make setup`" in response.json()["error"]["message"]
    assert client.get("/v1/conversions").json()["total"] == 0


def test_health_ready_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {
        "database": "ok",
        "artifacts": "ok",
        "queue": "ok",
        "sandbox": "ok",
        "toolchain": "ok",
    }
    submit(client)
    client.get("/v1/conversions/nope")
    metrics = client.get("/metrics").text
    assert 'tileport_conversions{status="queued"} 1.0' in metrics
    assert 'tileport_conversions_submitted_total{origin="api"} 1.0' in metrics
    assert 'route="/v1/conversions/{conversion_id}",status="404"' in metrics


def test_readyz_reports_pending_migrations(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=tmp_path, api_tokens={"ci": "t"})
    unmigrated = make_context(settings)
    with TestClient(create_app(unmigrated)) as fresh:
        response = fresh.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "migrations pending"


def test_openapi_documents_the_api(client: TestClient) -> None:
    spec = client.get("/v1/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/v1/conversions",
        "/v1/conversions/{conversion_id}",
        "/v1/conversions/{conversion_id}/cancel",
        "/v1/conversions/{conversion_id}/artifacts",
        "/v1/conversions/{conversion_id}/artifacts/{path}",
        "/v1/webhooks/github",
    ):
        assert path in paths, path
    create = paths["/v1/conversions"]["post"]
    assert {"multipart/form-data", "application/json"} <= set(create["requestBody"]["content"])
    assert create["security"] == [{"HTTPBearer": []}]
    assert "ErrorBody" in spec["components"]["schemas"]


def test_nothing_stored_is_lost_by_a_rejected_request(
    client: TestClient, context: ServiceContext
) -> None:
    cid = submit(client, headers={"Idempotency-Key": "keep"}).json()["id"]
    submit(client, spec=b"::")
    submit(client, source=b"nothing")
    submit(client, headers={"Idempotency-Key": "keep"}, source=fixture_bytes("vadd.py") + b"#")
    assert client.get(f"/v1/conversions/{cid}").json()["status"] == "queued"
    assert (run_dir(context.settings, cid) / "input" / "vadd.py").is_file()
    assert os.listdir(run_dir(context.settings, cid).parent) == [cid]
