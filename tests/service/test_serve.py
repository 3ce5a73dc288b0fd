"""`tileport serve` as a real process: migrates the database, makes a local API
token when none is configured, answers on HTTP, and stops cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
from service_support import FIXTURES, free_port, service_env, stop_process, wait_http

from app.settings import Settings, load_settings


def test_serve_starts_on_sqlite_with_no_other_setup(tmp_path: Path) -> None:
    settings: Settings = load_settings({}, data_dir=tmp_path / "data", source_root=FIXTURES)
    env = service_env(settings)
    del env["API_TOKENS"], env["DATABASE_URL"]
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli_serve", "serve", "--port", str(port), "--workers", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/readyz")
        token_file = tmp_path / "data" / "api-token"
        assert (tmp_path / "data" / "tileport.db").is_file()
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        body = {"source_path": "vadd.py"}
        refused = httpx.post(f"{base}/v1/conversions", json=body)
        assert refused.status_code == 401
        auth = {"Authorization": f"Bearer {token}"}
        accepted = httpx.post(f"{base}/v1/conversions", json=body, headers=auth)
        assert accepted.status_code == 202, accepted.text
        assert httpx.get(f"{base}/v1/conversions").status_code == 401
        assert httpx.get(f"{base}/v1/conversions", headers=auth).json()["total"] == 1
    finally:
        stop_process(server)
    output = server.stdout.read().decode() if server.stdout else ""
    assert "api-token" in output
    assert "Application shutdown complete" in output
    # uvicorn re-raises the SIGTERM it handled once it has shut down.
    assert server.returncode in (0, -signal.SIGTERM), output
