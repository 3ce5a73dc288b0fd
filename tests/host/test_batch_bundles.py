"""`tileport gpu-bundle --runs`: two real conversions stopped at the GPU boundary
become one GPU job, one library holding both ports (stored once) and a bundle per
run naming that run; runs stopped elsewhere, or without a bundle, are skipped with
where they stopped, and two runs of one operator are refused. The archive for the
GPU host holds what its documented command runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from pipeline_script import Step, run_script

from app.cli import main
from graph.runner import run_pipeline
from nodes.host_builder.batch import (
    RUN_BUNDLES,
    BatchError,
    NoRunBundled,
    build_batch,
    where_it_stopped,
    write_archive,
)
from schemas.exit_codes import ExitCode
from schemas.gpu import LIBRARY_FILE, BundleManifest
from schemas.pipeline import RunOptions, Stage
from toolchain.env import REPO_ROOT

KERNELS = REPO_ROOT / "examples" / "kernels"
OPERATORS = ("vector_add", "masked_softshrink")
BATCH_DOC = REPO_ROOT / "docs" / "C_ABI.md"


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


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_runs_become_one_job_with_one_library(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "bundles"
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    command = [sys.executable, "-m", "app.cli", "gpu-bundle", "--runs", *map(str, runs.values())]
    done = subprocess.run(
        [*command, str(unfinished), "--out", str(out), "--time-all"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [json.loads(line)["operator"] for line in done.stdout.splitlines()]
    assert printed == list(OPERATORS)
    assert f"skipped {unfinished}: not a finished run" in done.stderr
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


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_run_without_a_bundle_or_twice_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(BatchError, match="two runs of one operator: vector_add"):
        build_batch([runs["vector_add"]] * 2, tmp_path / "a", tmp_path / "ws")
    bare = tmp_path / "bare"
    shutil.copytree(runs["vector_add"] / "reports", bare / "reports")
    with pytest.raises(NoRunBundled, match=f"{bare}: no GPU job bundle"):
        build_batch([bare], tmp_path / "b", tmp_path / "ws")


def test_runs_not_at_the_gpu_boundary_are_skipped_with_where_they_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped, _ = run_script(
        tmp_path, {Stage.KERNEL_WRITER: [Step("FAIL_COMPILE")]}, run_dir=tmp_path / "stopped"
    )
    waiting, _ = run_script(
        tmp_path, {Stage.HOST_BUILDER: [Step("BLOCKED", "env")]}, run_dir=tmp_path / "waiting"
    )
    assert (stopped.gate_verdict, waiting.gate_verdict) == ("FAIL", "AWAITING_GPU")
    where = where_it_stopped(tmp_path / "stopped")
    assert where == "stopped after kernel_writer FAIL_COMPILE, gate FAIL: unsupported"
    assert where_it_stopped(tmp_path / "waiting") is None
    assert where_it_stopped(tmp_path / "nothing") == (
        "not a finished run: no valid reports/gate.json and reports/summary.json"
    )
    # Every run is looked at and listed; none can be bundled (the one at the boundary
    # was scripted without a bundle), which is the only way to fail.
    runs = [str(tmp_path / name) for name in ("stopped", "nothing", "waiting")]
    code = main(["gpu-bundle", "--runs", *runs, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == ExitCode.FAILED
    assert f"{tmp_path}/stopped: stopped after kernel_writer FAIL_COMPILE" in err
    assert f"{tmp_path}/nothing: not a finished run" in err
    assert f"{tmp_path}/waiting: no GPU job bundle in host/bundle" in err


def documented_batch() -> tuple[str, str, str, str]:
    """The batch command of docs/C_ABI.md and the GPU host's command after it: the
    bundles folder, the archive, the script the host runs and the folder it reads."""
    text = BATCH_DOC.read_text(encoding="utf-8")
    build = re.search(r"tileport gpu-bundle --runs \S+ --out (\S+) --archive (\S+)", text)
    host = re.search(r"tar -xJf (\S+) && python3 (\S+) (\S+)/\* --out", text)
    assert build is not None and host is not None, "docs/C_ABI.md lost the batch commands"
    assert host.group(1) == build.group(2)
    return build.group(1), build.group(2), host.group(2), host.group(3)


def test_the_archive_holds_every_file_its_documented_command_names(tmp_path: Path) -> None:
    out, archive, script, folder = documented_batch()
    bundles = tmp_path / out
    for operator in OPERATORS:
        (bundles / operator / "lib").mkdir(parents=True)
        (bundles / operator / "run.py").write_text("# the bundle's runner\n")
    first = bundles / OPERATORS[0] / "lib" / LIBRARY_FILE
    first.write_bytes(b"\x7fELF library")
    os.link(first, bundles / OPERATORS[1] / "lib" / LIBRARY_FILE)
    names = write_archive(bundles, tmp_path / archive)
    assert script == RUN_BUNDLES.as_posix() and script in names
    assert {f"{folder}/{operator}/run.py" for operator in OPERATORS} <= set(names)
    with tarfile.open(tmp_path / archive) as tar:
        libraries = [m for m in tar.getmembers() if m.name.endswith(LIBRARY_FILE)]
        assert sorted(m.islnk() for m in libraries) == [False, True]  # stored once
        extracted = tmp_path / "gpu-host"
        tar.extractall(extracted, filter="data")
    assert (extracted / script).read_bytes() == (REPO_ROOT / RUN_BUNDLES).read_bytes()
