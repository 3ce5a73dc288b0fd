"""The status-polling load test command runs end to end and reports figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_loadtest_command_reports_latency_and_throughput() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.loadtest",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--concurrency",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["errors"] == 0 and result["requests"] > 50
    assert 0 < result["p50_ms"] <= result["p90_ms"] <= result["p99_ms"] <= result["max_ms"]
    assert result["throughput_rps"] > 0 and result["database"] == "sqlite"
    assert "CPUs" in result["machine"]
