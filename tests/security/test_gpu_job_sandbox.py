"""The GPU worker runs a bundle with `tileport gpu-run` in the sandbox, its results
folder the only writable path, and reads back only plain files from it; without a
sandbox the bundle does not run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.worker.celery_app import EXIT_NO_SANDBOX, result_files, run_gpu_job
from nodes.correctness.runner import EXIT_BAD_BUNDLE


@pytest.fixture(autouse=True)
def _fresh_probe() -> None:
    from toolchain import sandbox

    sandbox._probe.cache_clear()


def test_a_bundle_runs_in_the_sandbox(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    done = run_gpu_job(str(bundle), "sm_90")
    assert done["returncode"] == EXIT_BAD_BUNDLE, done
    assert "manifest.json: No such file or directory" in done["output_tail"]
    assert (bundle / "results").is_dir()


def test_no_sandbox_no_gpu_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "true").symlink_to(shutil.which("true") or "/bin/true")
    monkeypatch.setenv("PATH", str(tools))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    done = run_gpu_job(str(bundle), "sm_90")
    assert done["returncode"] == EXIT_NO_SANDBOX
    assert "the sandbox is unavailable" in done["output_tail"]


def test_a_link_in_the_results_folder_is_not_followed(tmp_path: Path) -> None:
    token = tmp_path / "api-token"
    token.write_text("secret")
    results = tmp_path / "results"
    results.mkdir()
    (results / "correctness.json").symlink_to(token)
    (results / "perf.json").write_text("{}")
    assert result_files(results) == {"perf.json": "{}"}
