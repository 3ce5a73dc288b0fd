"""The front door on a machine without the sandbox tool: `make demo` installs it or
stops before building anything with the one command that fixes it; `tileport
serve` says it is not ready and why; a submission is refused naming the cause."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_support import free_port, service_env, stop_process, wait_for

from app.settings import load_settings
from toolchain import sandbox
from toolchain.doctor import check_sandbox
from toolchain.env import REPO_ROOT

FIX = "apt-get install -y bubblewrap"
TOKEN = "front-door-token"


def path_without_bwrap(folder: Path) -> str:
    """A PATH holding only what these commands need, bwrap and apt-get left out."""
    folder.mkdir()
    for tool in ("id", "env", "true", "cargo", "rustc", "gcc", "cc"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    return str(folder)


@pytest.fixture(autouse=True)
def _fresh_probe() -> None:
    sandbox._probe.cache_clear()


def test_make_demo_without_bwrap_stops_first_with_the_fix(tmp_path: Path) -> None:
    make = shutil.which("make")
    assert make is not None
    env = {"PATH": path_without_bwrap(tmp_path / "bin"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [make, "-C", str(REPO_ROOT), "demo"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert f"install bubblewrap ({FIX})" in done.stderr
    assert "pip install" not in done.stdout and "cargo build" not in done.stdout


def test_the_doctor_names_the_missing_sandbox_and_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_without_bwrap(tmp_path / "bin"))
    check = check_sandbox()
    assert not check.ok and check.fix is not None
    assert "bwrap is not installed" in check.fix and FIX in check.fix
    monkeypatch.setenv(sandbox.MODE_ENV, sandbox.WEAK)
    assert check_sandbox().ok


def test_serve_is_not_ready_and_refuses_submissions_without_a_sandbox(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=tmp_path / "data", source_root=tmp_path)
    env = service_env(settings)
    env["PATH"] = path_without_bwrap(tmp_path / "bin")
    env["API_TOKENS"] = f"tester:{TOKEN}"
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli_serve", "serve", "--port", str(port), "--workers", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(answers, 60, base)
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 503
        said = ready.json()["checks"]["sandbox"]
        assert said.startswith("failed: the sandbox is unavailable: bwrap is not installed")
        assert FIX in said
        source = b"import cuda.tile as ct\n@ct.kernel\ndef k(x):\n    pass\n"
        refused = httpx.post(
            f"{base}/v1/conversions",
            headers={"Authorization": f"Bearer {TOKEN}"},
            files={"source": ("k.py", source), "spec": ("k.port.yaml", b"name: k\n")},
        )
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "sandbox_unavailable" and FIX in error["message"]
    finally:
        stop_process(server)
    log = server.stdout.read().decode() if server.stdout else ""
    assert "not ready: sandbox: the sandbox is unavailable" in log


def test_the_demo_stops_with_what_the_server_lacks(tmp_path: Path) -> None:
    """Started where no sandbox can be made, the demo prints the failed readiness
    checks and exits 1: no traceback, no 503 from a submission."""
    env = {
        "PATH": path_without_bwrap(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.demo"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "demo stopped: tileport serve is not ready:" in done.stderr
    assert "sandbox: failed: the sandbox is unavailable: bwrap is not installed" in done.stderr
    assert "Traceback" not in done.stderr
