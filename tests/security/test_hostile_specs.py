"""Specs built to hurt the parser: nested deeper than the interpreter's stack, in
YAML (a multipart spec) or in JSON (a SOURCE_ROOT submission's body). Refused as
invalid requests (4xx), never a 500 nor a crashed worker."""

from __future__ import annotations

from fastapi.testclient import TestClient
from service_support import AUTH, submit


def test_a_spec_nested_too_deeply_is_rejected(client: TestClient) -> None:
    response = submit(client, spec=b"name: " + b"[" * 5000 + b"]" * 5000)
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_spec"
    [problem] = response.json()["error"]["detail"]["problems"]
    assert problem["message"] == "nested too deeply"
    deep_json = b'{"spec_path": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    headers = {**AUTH, "Content-Type": "application/json"}
    response = client.post("/v1/conversions", content=deep_json, headers=headers)
    assert 400 <= response.status_code < 500
