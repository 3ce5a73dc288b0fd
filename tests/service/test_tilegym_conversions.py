"""TileGym through the service: a spec generated from its recorded launches names a
module of the unmodified library under SOURCE_ROOT; the run keeps a copy of the
library modules the kernel needs and converts from those. Skipped, with the reason,
where the TileGym snapshot or the pipeline is absent."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from service_support import AUTH, conversion_status, pipeline_missing, wait_for

from app.context import ServiceContext
from app.conversions import INPUT_DIR, run_dir
from app.worker.pool import WorkerPool
from nodes.spec_writer.writer import read_signature_hints, write_specs
from schemas.launch_capture import read_launch_records
from schemas.reports import GateReport, load_report
from schemas.run_layout import RunLayout
from toolchain.env import REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
LAUNCHES = Path(
    os.environ.get("TILEPORT_TILEGYM_LAUNCHES", REPO_ROOT.parent / "shared" / "tilegym-launches")
)
pytestmark = pytest.mark.skipif(
    not (TILEGYM / "src").is_dir() or not (LAUNCHES / "launches.jsonl").is_file(),
    reason="the TileGym snapshot and its recorded launches are not beside the checkout",
)
# relu; rms_norm (static persistent) and swiglu (forward) port sass-identical
KERNELS = ("relu_fwd_kernel", "rms_norm_kernel_static_persistent", "swiglu_forward_kernel")
RUN_TIMEOUT_S = 900.0


@pytest.fixture
def library(context: ServiceContext, tmp_path: Path) -> Path:
    """SOURCE_ROOT with TileGym's Python sources (a scratch copy) and generated specs."""
    root = tmp_path / "root"
    shutil.copytree(TILEGYM / "src", root / "tilegym-src", ignore=_not_python)
    records = [
        r
        for r in read_launch_records(LAUNCHES / "launches.jsonl")
        if r.kernel.strip("_") in KERNELS
    ]
    hints = read_signature_hints(LAUNCHES / "signatures.jsonl")
    # Relative: the service takes a spec's source_root only as a path under SOURCE_ROOT.
    written, problems = write_specs(
        records, root / "tilegym-src", root / "specs", hints, relative_source_root=True
    )
    assert problems == [] and len(written) == len(KERNELS)
    context.settings.source_root = root
    context.settings.no_gpu = True
    return root


def _not_python(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if not n.endswith(".py") and not Path(folder, n).is_dir()]


def start(client: TestClient, kernel: str) -> str:
    body = {"spec_path": f"specs/{kernel}.port.yaml", "options": {"no_gpu": True}}
    response = client.post("/v1/conversions", json=body, headers=AUTH)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def test_a_library_spec_brings_the_modules_its_kernel_needs(
    client: TestClient, context: ServiceContext, library: Path
) -> None:
    cid = start(client, "relu_fwd_kernel")
    inputs = run_dir(context.settings, cid) / INPUT_DIR
    spec = yaml.safe_load((inputs / "relu_fwd_kernel.port.yaml").read_text())
    assert spec["source_root"] == "library"
    copied = sorted(p.relative_to(inputs / "library").as_posix() for p in inputs.rglob("*.py"))
    assert "tilegym/ops/cutile/activation/relu.py" in copied and len(copied) <= 3
    assert (inputs / "library" / spec["module"].replace(".", "/")).with_suffix(".py").is_file()


def test_a_library_spec_naming_a_missing_module_is_refused(
    client: TestClient, library: Path
) -> None:
    path = library / "specs" / "relu_fwd_kernel.port.yaml"
    path.write_text(path.read_text().replace("module: tilegym.ops", "module: tilegym.no_such"))
    body = {"spec_path": "specs/relu_fwd_kernel.port.yaml", "options": {"no_gpu": True}}
    response = client.post("/v1/conversions", json=body, headers=AUTH)
    assert response.status_code == 422
    assert "no module 'tilegym.no_such" in response.json()["error"]["message"]


def test_a_library_outside_the_source_root_is_refused(
    client: TestClient, library: Path, tmp_path: Path
) -> None:
    path = library / "specs" / "relu_fwd_kernel.port.yaml"
    elsewhere = os.path.relpath(TILEGYM / "src", path.parent)
    text = path.read_text()
    path.write_text(text.replace("source_root: ../tilegym-src", f"source_root: {elsewhere}"))
    body = {"spec_path": "specs/relu_fwd_kernel.port.yaml"}
    response = client.post("/v1/conversions", json=body, headers=AUTH)
    assert response.status_code == 400
    assert "source_root is outside the source root" in response.json()["error"]["message"]


def test_a_library_module_that_is_a_link_is_refused(
    client: TestClient, library: Path, tmp_path: Path
) -> None:
    """A module the kernel needs, replaced by a link to a file outside SOURCE_ROOT
    (a secret of the server), is not read: 422 naming the module."""
    secret = tmp_path / "secret.py"
    secret.write_text("TOKEN = 'not for runs'\n")
    module = library / "tilegym-src" / "tilegym" / "ops" / "cutile" / "activation" / "relu.py"
    kept = module.read_text()
    module.unlink()
    secret.write_text(kept + "\nTOKEN = 'not for runs'\n")
    module.symlink_to(secret)
    body = {"spec_path": "specs/relu_fwd_kernel.port.yaml"}
    response = client.post("/v1/conversions", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "is a link, or leads out of source_root" in error["message"]
    assert error["detail"]["file"] == "tilegym/ops/cutile/activation/relu.py"


@pytest.fixture
def pool(context: ServiceContext) -> Iterator[WorkerPool]:
    workers = WorkerPool(context.settings, context.sessions, threads=1)
    workers.start()
    yield workers
    workers.stop()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # three conversions; the first may build the workspace's crates
@pytest.mark.skipif(pipeline_missing() is not None, reason=str(pipeline_missing()))
def test_three_tilegym_kernels_reach_the_gpu_boundary(
    client: TestClient, context: ServiceContext, library: Path, pool: WorkerPool
) -> None:
    if context.engine.dialect.name != "sqlite":
        pytest.skip("the runs do not depend on the database: SQLite shows it")
    ids = [start(client, kernel) for kernel in KERNELS]
    for cid in ids:
        wait_for(
            lambda cid=cid: conversion_status(client, cid) not in {"queued", "running"},
            RUN_TIMEOUT_S,
            f"conversion {cid} to end",
            step=1.0,
        )
    for kernel, cid in zip(KERNELS, ids, strict=True):
        assert conversion_status(client, cid) == "awaiting_gpu", kernel
        gate = load_report(GateReport, RunLayout(run_dir(context.settings, cid)))
        assert gate.reached_gpu_boundary, (kernel, gate)
