"""Functions shared by the service tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from app.context import ServiceContext, build_context
from app.settings import ENV_FIELDS, Settings
from app.worker.dispatch import Dispatcher, TableQueueDispatcher

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def make_context(settings: Settings, dispatcher: Dispatcher | None = None) -> ServiceContext:
    return build_context(settings, dispatcher or TableQueueDispatcher())


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def upload_files(
    source: bytes | None = None,
    spec: bytes | None = None,
    reference: bytes | None = None,
    source_name: str = "vadd.py",
) -> dict[str, Any]:
    files: dict[str, Any] = {
        "source": (source_name, fixture_bytes("vadd.py") if source is None else source),
        "spec": ("vadd.port.yaml", fixture_bytes("vadd.port.yaml") if spec is None else spec),
        "reference": (
            "vadd_reference.py",
            fixture_bytes("vadd_reference.py") if reference is None else reference,
        ),
    }
    return files


def submit(client: TestClient, headers: dict[str, str] | None = None, **files: Any) -> Any:
    return client.post(
        "/v1/conversions", files=upload_files(**files), headers={**AUTH, **(headers or {})}
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def service_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment for a service subprocess using the test's settings."""
    env = {key: value for key, value in os.environ.items() if key not in ENV_FIELDS}
    env.update(
        {
            "TILEPORT_DATA_DIR": str(settings.data_dir),
            "DATABASE_URL": settings.resolved_database_url,
            "API_TOKENS": ",".join(f"{k}:{v}" for k, v in settings.api_tokens.items()),
            "WORKER_LEASE_S": str(settings.lease_s),
            "WORKER_POLL_S": str(settings.poll_s),
            "GITHUB_WEBHOOK_SECRET": settings.github_webhook_secret,
        }
    )
    if settings.source_root is not None:
        env["SOURCE_ROOT"] = str(settings.source_root)
    env.update(extra)
    return env


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def wait_http(url: str, timeout: float = 30.0) -> None:
    def answers() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(answers, timeout, url)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def pipeline_missing() -> str | None:
    """Why a real pipeline run cannot happen here, or None when it can."""
    try:
        from graph.stages import StageNodes, StageNotImplemented

        StageNodes.from_modules()
    except ImportError as error:
        return f"the pipeline graph is not importable: {error}"
    except StageNotImplemented as error:
        return f"the pipeline is incomplete: {error}"
    return None


def corpus_copy(target: Path) -> Path:
    """The example corpus, copied so that runs cannot touch the repository's files."""
    shutil.copytree(REPO / "examples" / "kernels", target)
    return target


def conversion_status(client: Any, conversion_id: str) -> str:
    return str(client.get(f"/v1/conversions/{conversion_id}").json()["status"])
