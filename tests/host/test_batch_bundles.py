"""`tileport gpu-bundle --runs`: two real conversions stopped at the GPU boundary
become one GPU job, one library holding both ports (stored once) and a bundle per
run naming that run; a run without a bundle, or two runs of one operator, are
refused with the run named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graph.runner import run_pipeline
from nodes.host_builder.batch import BatchError, build_batch
from schemas.gpu import LIBRARY_FILE, BundleManifest
from schemas.pipeline import RunOptions
from toolchain.env import REPO_ROOT

KERNELS = REPO_ROOT / "examples" / "kernels"
OPERATORS = ("vector_add", "masked_softshrink")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    done: dict[str, Path] = {}
    for operator in OPERATORS:
        summary = run_pipeline(
            KERNELS / f"{operator}.port.yaml", root / operator, options=RunOptions(no_gpu=True)
        )
        assert summary.gate_verdict == "AWAITING_GPU", summary
        done[operator] = root / operator
    return done


def test_runs_become_one_job_with_one_library(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "bundles"
    command = [sys.executable, "-m", "app.cli", "gpu-bundle", "--runs", *map(str, runs.values())]
    done = subprocess.run(
        [*command, "--out", str(out), "--time-all"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [json.loads(line)["operator"] for line in done.stdout.splitlines()]
    assert printed == list(OPERATORS)
    libraries = []
    for operator, run in runs.items():
        own = BundleManifest.model_validate_json((run / "host/bundle/manifest.json").read_text())
        batch = BundleManifest.model_validate_json((out / operator / "manifest.json").read_text())
        assert (batch.operator, batch.run_id, batch.attempt) == (
            operator,
            own.run_id,
            own.attempt,
        )
        assert batch.time_all_configs and not own.time_all_configs
        libraries.append((out / operator / "lib" / LIBRARY_FILE).stat())
    # Both bundles carry the one library that holds both ports: a hard link.
    assert libraries[0].st_ino == libraries[1].st_ino
    wrapper = (out / OPERATORS[0] / "py" / "tileport_kernels.py").read_text()
    assert all(f'"{operator}"' in wrapper for operator in OPERATORS)


def test_a_run_without_a_bundle_or_twice_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(BatchError, match="two runs of one operator: vector_add"):
        build_batch([runs["vector_add"]] * 2, tmp_path / "a", tmp_path / "ws")
    bare = tmp_path / "bare"
    shutil.copytree(runs["vector_add"] / "reports", bare / "reports")
    with pytest.raises(BatchError, match=f"{bare}: no GPU job bundle"):
        build_batch([bare], tmp_path / "b", tmp_path / "ws")
