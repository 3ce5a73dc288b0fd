"""Artifacts: listing, download from the blob store, and every way a path could
escape the run or a stored file could be changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_support import submit

from app.context import ServiceContext
from app.conversions import run_dir
from app.storage.models import Event
from app.worker.ingest import ingest_files, ingest_run


@pytest.fixture
def conversion_id(client: TestClient) -> str:
    return str(submit(client).json()["id"])


@pytest.fixture
def run(context: ServiceContext, conversion_id: str) -> Path:
    root = run_dir(context.settings, conversion_id)
    (root / "reports").mkdir()
    (root / "reports" / "gate.json").write_text('{"verdict": "PASS"}')
    (root / "generated").mkdir()
    (root / "generated" / "kernel.rs").write_text("pub fn kernel() {}\n")
    (root / "generated" / "page.html").write_text("<script>alert(1)</script>")
    ingest_files(context.sessions, context.settings, conversion_id)
    return root


def test_list_and_download(client: TestClient, conversion_id: str, run: Path) -> None:
    listing = client.get(f"/v1/conversions/{conversion_id}/artifacts").json()
    paths = {item["path"]: item for item in listing["items"]}
    assert {"reports/gate.json", "generated/kernel.rs", "input/vadd.py"} <= set(paths)
    assert paths["reports/gate.json"]["kind"] == "report"
    assert paths["generated/kernel.rs"]["kind"] == "source"
    response = client.get(paths["generated/kernel.rs"]["url"])
    assert response.status_code == 200
    assert response.text == "pub fn kernel() {}\n"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["x-content-type-options"] == "nosniff"
    report = client.get(f"/v1/conversions/{conversion_id}/artifacts/reports/gate.json")
    assert report.headers["content-type"] == "application/json"


def test_html_is_never_served_as_a_page(client: TestClient, conversion_id: str, run: Path) -> None:
    response = client.get(f"/v1/conversions/{conversion_id}/artifacts/generated/page.html")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"


@pytest.mark.parametrize(
    "path",
    [
        "..%2F..%2F..%2Fetc%2Fpasswd",
        "reports%2F..%2F..%2Fsecret",
        "%2Fetc%2Fpasswd",
        "reports%5C..%5Cgate.json",
        "reports%2F.%2Fgate.json",
        "reports//gate.json",
        "reports%00.json",
    ],
)
def test_traversal_is_refused(client: TestClient, conversion_id: str, run: Path, path: str) -> None:
    response = client.get(f"/v1/conversions/{conversion_id}/artifacts/{path}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_artifact_path"


def test_symlink_out_of_the_run_is_not_served(
    client: TestClient, context: ServiceContext, conversion_id: str, run: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (run / "reports" / "leak.txt").symlink_to(secret)
    (run / "linkdir").symlink_to(tmp_path)
    ingest_files(context.sessions, context.settings, conversion_id)
    for path in ("reports/leak.txt", "linkdir/secret.txt"):
        response = client.get(f"/v1/conversions/{conversion_id}/artifacts/{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "unknown_artifact"
    listing = client.get(f"/v1/conversions/{conversion_id}/artifacts").json()
    assert not any("secret" in item["path"] or "leak" in item["path"] for item in listing["items"])


def test_another_runs_file_is_not_reachable(
    client: TestClient, conversion_id: str, run: Path
) -> None:
    other = submit(client, headers={"Idempotency-Key": "other"}).json()["id"]
    response = client.get(f"/v1/conversions/{other}/artifacts/reports/gate.json")
    assert response.status_code == 404


def test_recorded_artifacts_outlive_the_run_directory(
    client: TestClient, context: ServiceContext, conversion_id: str, run: Path
) -> None:
    ingest_run(context.sessions, context.settings, conversion_id)
    (run / "generated" / "kernel.rs").unlink()
    listing = client.get(f"/v1/conversions/{conversion_id}/artifacts").json()
    kernel = next(item for item in listing["items"] if item["path"] == "generated/kernel.rs")
    assert kernel["sha256"] and kernel["size"] == len("pub fn kernel() {}\n")
    assert client.get(kernel["url"]).text == "pub fn kernel() {}\n"


def test_unknown_artifact(client: TestClient, conversion_id: str, run: Path) -> None:
    response = client.get(f"/v1/conversions/{conversion_id}/artifacts/reports/nope.json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_artifact"


def test_files_not_yet_stored_are_not_served(
    client: TestClient, conversion_id: str, run: Path
) -> None:
    (run / "reports" / "late.txt").write_text("written after the last stage ended")
    response = client.get(f"/v1/conversions/{conversion_id}/artifacts/reports/late.txt")
    assert response.status_code == 404


def test_a_changed_run_file_does_not_change_what_is_served(
    client: TestClient, conversion_id: str, run: Path
) -> None:
    (run / "generated" / "kernel.rs").write_text("tampered after it was stored\n")
    response = client.get(f"/v1/conversions/{conversion_id}/artifacts/generated/kernel.rs")
    assert response.text == "pub fn kernel() {}\n"


def test_a_tampered_blob_is_detected_reported_and_not_served(
    client: TestClient, context: ServiceContext, conversion_id: str, run: Path
) -> None:
    listing = client.get(f"/v1/conversions/{conversion_id}/artifacts").json()
    kernel = next(item for item in listing["items"] if item["path"] == "generated/kernel.rs")
    blob = context.settings.resolved_artifact_root / "objects" / kernel["sha256"][:2]
    blob = blob / kernel["sha256"]
    assert blob.stat().st_mode & 0o777 == 0o444
    blob.chmod(0o644)
    blob.write_text("pub fn kernel() { steal() }\n")
    response = client.get(kernel["url"])
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "artifact_corrupt"
    assert "steal" not in response.text
    with context.sessions() as session:
        events = session.query(Event).filter(Event.kind == "artifact.corrupt").all()
    assert [event.data["path"] for event in events] == ["generated/kernel.rs"]
