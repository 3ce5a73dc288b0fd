"""`make demo`: the main job on embedded defaults.

Starts `tileport serve` on a fresh SQLite data directory, submits the example
softmax conversion over REST, follows its stage timeline, then prints the
status page URL and the outcome. Without a GPU the run ends `awaiting_gpu`:
every check that needs no GPU passed, and the demo prints the GPU job bundle and
the one command that completes the run from a GPU host. The server keeps
running until Ctrl-C when `--keep-serving` is given (so that command can reach
it); otherwise it is stopped once the run has settled."""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from toolchain.env import REPO_ROOT

KERNELS = REPO_ROOT / "examples" / "kernels"
SETTLED_STATUSES = frozenset({"finished", "cancelled", "error", "awaiting_gpu"})
POLL_S = 1.0
STARTUP_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 900.0
# Readiness checks that waiting cannot fix: the machine lacks something.
NEEDS_SETUP = frozenset({"sandbox", "toolchain"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(data_dir: Path, port: int, token: str, gpu_token: str) -> subprocess.Popen[bytes]:
    """The demo's user holds `token`; a GPU host that completes the run, `gpu_token`
    (only a GPU worker's results can make a run pass)."""
    env = dict(os.environ)
    env.update(
        {
            "TILEPORT_DATA_DIR": str(data_dir),
            "API_TOKENS": f"demo:{token},gpu-host:{gpu_token}",
            "API_GPU_WORKERS": "gpu-host",
            "TILEPORT_PUBLIC_URL": f"http://127.0.0.1:{port}",
        }
    )
    log = (data_dir / "serve.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
    )


class DemoError(RuntimeError):
    """The demo cannot go on; the message says why and, where known, the fix."""


def failure_text(response: httpx.Response) -> str:
    """A failed request's status and the body the service answered with."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:2000]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return f"HTTP {response.status_code} {error.get('code')}: {error.get('message')}"
    return f"HTTP {response.status_code}: {body}"


def wait_ready(client: httpx.Client, server: subprocess.Popen[bytes], data_dir: Path) -> None:
    """Until /readyz answers 200. A server that says what it lacks (the sandbox, a
    tool) is not waited for: the demo stops with the checks that failed."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise DemoError(f"tileport serve exited during start-up; see {data_dir / 'serve.log'}")
        try:
            response = client.get("/readyz")
        except httpx.TransportError:
            time.sleep(0.5)
            continue
        if response.status_code == 200:
            return
        failed = {
            name: result
            for name, result in response.json().get("checks", {}).items()
            if result != "ok"
        }
        if any(name in NEEDS_SETUP for name in failed):
            lines = "\n".join(f"  {name}: {result}" for name, result in failed.items())
            raise DemoError(f"tileport serve is not ready:\n{lines}")
        time.sleep(0.5)
    raise DemoError(f"tileport serve did not become ready; see {data_dir / 'serve.log'}")


def submit(client: httpx.Client, token: str, no_gpu: bool) -> dict[str, Any]:
    files = {
        "source": ("softmax.py", (KERNELS / "softmax.py").read_bytes()),
        "spec": ("softmax.port.yaml", (KERNELS / "softmax.port.yaml").read_bytes()),
        "reference": ("references.py", (KERNELS / "references.py").read_bytes()),
    }
    response = client.post(
        "/v1/conversions",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "demo-softmax"},
        files=files,
        data={"options": f'{{"no_gpu": {"true" if no_gpu else "false"}}}'},
    )
    if response.status_code != 202:
        raise DemoError(f"the service refused the conversion: {failure_text(response)}")
    body: dict[str, Any] = response.json()
    return body


def follow(client: httpx.Client, conversion_id: str) -> dict[str, Any]:
    """Poll the status, printing each stage once as it ends."""
    shown: set[tuple[str, int]] = set()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        response = client.get(f"/v1/conversions/{conversion_id}")
        if response.status_code != 200:
            raise DemoError(f"could not read conversion {conversion_id}: {failure_text(response)}")
        status: dict[str, Any] = response.json()
        for stage in status.get("stages", []):
            key = (str(stage.get("stage")), int(stage.get("attempt", 1)))
            if key not in shown and stage.get("verdict"):
                shown.add(key)
                verdict_class = f" ({stage['verdict_class']})" if stage.get("verdict_class") else ""
                print(f"  {key[0]:<18} attempt {key[1]}  {stage['verdict']}{verdict_class}")
        if status.get("status") in SETTLED_STATUSES:
            return status
        time.sleep(POLL_S)
    raise DemoError(f"conversion {conversion_id} did not finish in {RUN_TIMEOUT_S:.0f} s")


def print_awaiting_gpu(status: dict[str, Any], data_dir: Path, gpu_token: str) -> None:
    """A run stopped for want of a GPU: what the CPU side reached, and the command
    that completes it (the GPU stages are still to run, not failed)."""
    conversion_id = status["id"]
    gpu = status["gpu"]
    print("outcome: awaiting a GPU: every check that needs no GPU passed")
    reached = [
        f"{stage['stage']} {stage['verdict']}"
        for stage in status.get("stages", [])
        if stage.get("verdict_class") is None and stage["stage"] != "final_gate"
    ]
    print(f"  reached: {', '.join(reached)}; host part of host_builder passed")
    if status.get("level"):
        print(f"  level: {status['level']}")
    print("  still to run on a GPU host: correctness, then performance against the reference")
    print(f"GPU job bundle: {data_dir / 'artifacts' / 'runs' / conversion_id / gpu['bundle']}")
    print("complete the run from a GPU host (the server must be up: --keep-serving):")
    print(f"  TILEPORT_API_TOKEN={gpu_token} {gpu['command']}")


def print_outcome(status: dict[str, Any]) -> None:
    for key, value in (status.get("headline") or {}).items():
        print(f"  {key}: {value}")
    print(
        f"outcome: {status.get('status')}, {status.get('outcome')}, "
        f"final gate {status.get('gate_verdict')}"
    )
    if status.get("error"):
        print(f"error: {status['error']}")


def run_demo(keep_serving: bool, no_gpu: bool) -> int:
    data_dir = Path(tempfile.mkdtemp(prefix="tileport-demo-"))
    port, token, gpu_token = free_port(), secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    base = f"http://127.0.0.1:{port}"
    print(f"starting tileport serve on {base} (SQLite in {data_dir})")
    server = start_server(data_dir, port, token, gpu_token)
    auth = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, timeout=30.0, headers=auth) as client:
            wait_ready(client, server, data_dir)
            created = submit(client, token, no_gpu)
            conversion_id = str(created["id"])
            print(f"submitted softmax: conversion {conversion_id}")
            page = f"{base}{created['links']['web']}"
            print(f"status page: {page}")
            status = follow(client, conversion_id)
        print(f"status page: {page} (sign in with the API token {token})")
        if status.get("status") == "awaiting_gpu" and status.get("gpu"):
            print_awaiting_gpu(status, data_dir, gpu_token)
        else:
            print_outcome(status)
        if keep_serving:
            print("serving until Ctrl-C")
            server.wait()
        settled_well = status.get("status") == "awaiting_gpu" or (
            status.get("status") == "finished" and status.get("gate_verdict") == "PASS"
        )
        return 0 if settled_well else 1
    except DemoError as error:
        print(f"demo stopped: {error}", file=sys.stderr)
        return 1
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep-serving", action="store_true", help="leave the server running")
    parser.add_argument("--gpu", action="store_true", help="allow GPU stages (needs a GPU)")
    args = parser.parse_args(argv)
    return run_demo(args.keep_serving, no_gpu=not args.gpu)


if __name__ == "__main__":
    sys.exit(main())
