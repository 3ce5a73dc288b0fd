"""A run awaiting a GPU, finished over REST from the folder the H200 made of its own
bundle, nothing rewritten.

`fixtures/h200_completion/service/` is the data directory `make demo` left: its
SQLite database (the conversion, its events, its checkpoints at the GPU boundary)
and the run's folder, without what a completion does not read: the built library
(two copies), the bundle's runner modules and the cffi wrapper (the bundle's
manifest still names them, with their sha256). `fixtures/h200_completion/gpu_results/` is what
`python3 BUNDLE/run.py` (the same runner as `tileport gpu-run`) wrote for that
very bundle on an NVIDIA H200. The test restores the data directory somewhere
else (the run resumes from its moved folder), starts the service on it, uploads
the folder and waits for the run's real verdict (the H200's: correct, at parity,
one configuration outside its A/A band for stage F, so the gate fails).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_support import AUTH, TOKEN, conversion_status, make_context, wait_for

from app.api.main import create_app
from app.context import ServiceContext
from app.settings import load_settings
from app.storage.migrate import upgrade_to_head
from app.worker.pool import WorkerPool
from toolchain.env import REPO_ROOT

FIXTURE = Path(__file__).parent / "fixtures" / "h200_completion"
RESULTS = FIXTURE / "gpu_results"
RESULT_FILES = ("correctness.json", "perf.json", "gpu_run.json")
WORKER_TOKEN = "gpu-host-token"

pytestmark = pytest.mark.timeout(600)


def _conversion_id() -> str:
    (run,) = (FIXTURE / "service" / "artifacts" / "runs").iterdir()
    return run.name


@pytest.fixture
def restored(tmp_path: Path) -> Iterator[ServiceContext]:
    data = tmp_path / "elsewhere" / "data"
    shutil.copytree(FIXTURE / "service", data)
    settings = load_settings(
        {},
        data_dir=data,
        source_root=REPO_ROOT / "examples" / "kernels",
        # The run's submitter, and the GPU host whose results can make a run pass.
        api_tokens={"demo": TOKEN, "h200": WORKER_TOKEN},
        api_gpu_workers=["h200"],
        no_gpu=True,
        lease_s=3.0,
        poll_s=0.2,
    )
    context = make_context(settings)
    upgrade_to_head(context.engine)  # as `tileport serve` does at start
    yield context
    context.engine.dispose()


@pytest.mark.parametrize(
    ("sender", "trust"),
    [(WORKER_TOKEN, "gpu-worker"), (TOKEN, "user-reported")],
    ids=["from-the-gpu-host", "from-the-submitter"],
)
def test_the_h200_folder_of_a_runs_own_bundle_finishes_it(
    restored: ServiceContext, sender: str, trust: str
) -> None:
    """Sent by the GPU host (a token in API_GPU_WORKERS) or by the run's submitter,
    whose results are kept as user-reported (a PASS would be UNVERIFIED)."""
    cid = _conversion_id()
    workers = WorkerPool(restored.settings, restored.sessions, threads=1)
    workers.start()
    try:
        with TestClient(create_app(restored), headers=AUTH) as client:
            view = client.get(f"/v1/conversions/{cid}").json()
            assert view["status"] == "awaiting_gpu"
            files = [("files", (n, (RESULTS / n).read_bytes())) for n in RESULT_FILES]
            url = f"/v1/conversions/{cid}/gpu-results"
            accepted = client.post(url, files=files, headers={"Authorization": f"Bearer {sender}"})
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["resumed"] and accepted.json()["correctness"] == "ALL_PASS"
            assert accepted.json()["trust"] == trust
            wait_for(
                lambda: conversion_status(client, cid) not in {"queued", "running"},
                300.0,
                "the completion",
                step=0.5,
            )
            view = client.get(f"/v1/conversions/{cid}").json()
    finally:
        workers.stop()
    # The H200's own verdict, carried to the end: every case correct, the geomean at
    # parity, and one configuration (8k x 2k float32: port / reference 0.9998, its
    # A/A band 0.9982-0.9996) that the rule of that day put outside its A/A band:
    # INVESTIGATE, recorded, keeps the gate from passing. Stage F, judging by today's
    # rule (the ratio's interval reaches the band), finds nothing outside: ALIGNED.
    assert view["status"] == "finished", view["error"]
    assert view["gate_verdict"] == "FAIL" and not view["reached_gpu_boundary"]
    assert view["gpu_results_trust"] == trust
    timeline = [(s["stage"], s["attempt"], s["verdict"]) for s in view["stages"]]
    assert timeline[-5:] == [
        ("host_builder", 1, "ALL_PASS"),
        ("perf_validator", 1, "INVESTIGATE"),
        ("ir_diff_analyst", 1, "PASS"),
        ("perf_investigator", 1, "ALIGNED"),
        ("final_gate", 1, "FAIL"),
    ]
    perf = json.loads((RESULTS / "perf.json").read_text())
    assert view["headline"]["geomean_line"] == perf["geomean_line"]
    assert view["headline"]["correctness"] == "ALL_PASS"
    assert perf["summary"].endswith("outside their A/A band, for stage F: perf_8k_x_2k_f32")
    gpu = json.loads((RESULTS / "gpu_run.json").read_text())
    assert gpu["statement"].startswith("Ran on NVIDIA H200")


def test_a_folder_of_the_h200_with_one_figure_changed_is_refused(
    restored: ServiceContext, tmp_path: Path
) -> None:
    """The binding is to the bundle, so a folder edited after the run is not the run."""
    cid = _conversion_id()
    forged = tmp_path / "forged"
    forged.mkdir()
    for name in RESULT_FILES:
        report = json.loads((RESULTS / name).read_text())
        if name == "gpu_run.json":
            report["operator"] = "vector_add"
        (forged / name).write_text(json.dumps(report))
    with TestClient(create_app(restored), headers=AUTH) as client:
        files = [("files", (n, (forged / n).read_bytes())) for n in RESULT_FILES]
        refused = client.post(f"/v1/conversions/{cid}/gpu-results", files=files, headers=AUTH)
        assert refused.status_code == 422, refused.text
        problems = "\n".join(refused.json()["error"]["detail"]["problems"])
        assert "gpu_run.json is for vector_add" in problems
        assert conversion_status(client, cid) == "awaiting_gpu"
