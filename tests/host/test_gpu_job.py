"""The GPU job bundle and its runner on a machine without a GPU: the bundle is
small, self-contained and checked; the run ends BLOCKED (class env) and says
plainly that nothing ran on a GPU; stages D and E report the same. On a GPU
host, the last test runs the bundle for real."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodes.correctness.runner import EXIT_BAD_BUNDLE, EXIT_BLOCKED, BundleError, load_bundle
from nodes.host_builder import run as run_host_builder
from nodes.host_builder.bundle import SIZE_LIMIT_BYTES, build_bundle, runner_modules
from nodes.host_builder.library import CHECKOUT, create_workspace, read_manifest
from nodes.perf_validator import run as run_perf_validator
from schemas.gpu import BundleManifest, GpuRunReport
from schemas.reports import CorrectnessReport, HostBuildReport, PerfReport
from schemas.state import PipelineState
from schemas.verdicts import CorrectnessVerdict, FailureClass, HostBuildVerdict, PerfVerdict
from toolchain.cupti import KernelRecord, Window, attribute, launch_attributes, summarise
from toolchain.env import REPO_ROOT

SPEC = REPO_ROOT / "examples" / "kernels" / "softmax.port.yaml"
NO_GPU_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scratch = tmp_path_factory.mktemp("bundle")
    root = scratch / "softmax"
    build_bundle(SPEC, root, create_workspace(scratch / "kernels_rs"), run_id="r-test", attempt=2)
    return root


@pytest.mark.slow
def test_bundle_is_small_complete_and_hashed(bundle: Path) -> None:
    manifest = BundleManifest.model_validate_json((bundle / "manifest.json").read_text())
    assert manifest.operator == "softmax" and manifest.run_id == "r-test"
    assert manifest.kernel_parameters == ["x", "y", "TILE_N"]
    assert sum(f.bytes for f in manifest.files) < SIZE_LIMIT_BYTES
    listed = {f.path for f in manifest.files}
    on_disk = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    assert on_disk - listed == {"manifest.json"}
    assert {"run.py", "lib/libtileport_kernels.so", "py/tileport_kernels.py"} <= listed
    assert {"spec/softmax.port.yaml", "spec/softmax.py", "spec/references.py"} <= listed
    assert "cdef fingerprint" in manifest.built_on


def test_runner_carries_only_light_modules() -> None:
    """The runner's import closure within the repository: schemas, its own modules
    and the CUPTI adapter, nothing of the service, graph or IR engine."""
    relative = {p.relative_to(REPO_ROOT).as_posix() for p in runner_modules()}
    assert "nodes/correctness/runner.py" in relative
    assert "toolchain/cupti.py" in relative
    assert not any(
        p.startswith(("app/", "graph/", "tileir/", "nodes/host_builder")) for p in relative
    )


def _run_isolated(bundle: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`python3 run.py` as on the GPU host: isolated mode, no repository on the path."""
    return subprocess.run(
        [sys.executable, "-I", str(bundle / "run.py"), "--out", str(out)],
        cwd=out.parent,
        env=NO_GPU_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_run_without_gpu_is_blocked_and_says_so(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = _run_isolated(bundle, out)
    assert done.returncode == EXIT_BLOCKED, done.stderr
    correctness = CorrectnessReport.model_validate_json((out / "correctness.json").read_text())
    perf = PerfReport.model_validate_json((out / "perf.json").read_text())
    run = GpuRunReport.model_validate_json((out / "gpu_run.json").read_text())
    assert correctness.verdict is CorrectnessVerdict.BLOCKED and not correctness.ran_on_gpu
    assert (correctness.run_id, correctness.attempt) == ("r-test", 2)
    assert correctness.summary.startswith("Nothing was run on a GPU")
    assert "class env" in correctness.summary
    assert perf.verdict is PerfVerdict.BLOCKED and not perf.rows
    assert not run.ran_on_gpu and run.statement.startswith("Nothing was run on a GPU")
    assert any("torch" in reason for reason in run.environment.missing)
    assert "Nothing was run on a GPU" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_runner_imports_resolve_inside_the_bundle(bundle: Path) -> None:
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import nodes.correctness.runner, schemas.gpu, toolchain.cupti;"
        "print([m.__file__ for n, m in sys.modules.items()"
        " if n.split('.')[0] in ('nodes', 'schemas', 'toolchain')"
        " and getattr(m, '__file__', None)])"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(bundle / "py")],
        capture_output=True,
        text=True,
        env=NO_GPU_ENV,
        check=True,
    )
    files = json.loads(done.stdout.replace("'", '"'))
    assert files and all(f.startswith(str(bundle)) for f in files)


@pytest.mark.slow
def test_a_damaged_bundle_is_refused(bundle: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-r", str(bundle), str(damaged)], check=True)
    with (damaged / "spec" / "softmax.py").open("a") as handle:
        handle.write("# changed in transfer\n")
    with pytest.raises(BundleError, match="does not match its sha256"):
        load_bundle(damaged)
    assert _run_isolated(damaged, tmp_path / "out").returncode == EXIT_BAD_BUNDLE


def test_kernels_are_attributed_to_their_window() -> None:
    records = [
        KernelRecord("flush", 0, 50),
        KernelRecord("port", 110, 150),
        KernelRecord("reference", 310, 360),
        KernelRecord("reference_tail", 365, 370),
        KernelRecord("straddles", 395, 420),
    ]
    windows = [Window("c:port", 100, 200), Window("c:reference", 300, 400)]
    timings = attribute(records, windows)
    assert [(t.label, t.device_ns, t.launches) for t in timings] == [
        ("c:port", 40, 1),
        ("c:reference", 55, 2),
    ]
    summary = summarise(timings, "c:reference")
    assert summary is not None and summary.median_us == 0.055 and summary.launches_per_call == 2
    assert summarise(timings, "c:torch") is None


def test_a_kernel_record_keeps_how_it_was_launched() -> None:
    class Activity:  # a CUPTI kernel record of a release without cluster fields
        grid_x, block_x, registers_per_thread, shared_memory_executed = 512, 128, 32, 0
        name = "k"

    assert launch_attributes(Activity()) == (
        ("grid_x", 512),
        ("block_x", 128),
        ("registers_per_thread", 32),
        ("shared_memory_executed", 0),
    )
    usual, carved = (("grid_x", 512),), (("grid_x", 512), ("shared_memory_executed", 1))
    records = [
        KernelRecord("k", 10, 20, usual),
        KernelRecord("k", 110, 120, carved),
        KernelRecord("k", 210, 220, usual),
    ]
    windows = [Window("c:port", 0, 50), Window("c:port", 100, 150), Window("c:port", 200, 250)]
    summary = summarise(attribute(records, windows), "c:port")
    assert summary is not None and summary.launch == (usual,)  # as most calls were launched


def _state(run_dir: Path, no_gpu: bool = False) -> PipelineState:
    from schemas.pipeline import RunOptions

    # The kernel the checkout's library holds for softmax: the stage reuses it, so the
    # run's workspace generates what the checkout holds.
    (run_dir / "generated").mkdir(parents=True, exist_ok=True)
    kernel = CHECKOUT.src_dir / read_manifest(CHECKOUT).operator("softmax").kernel
    (run_dir / "generated" / "kernel.rs").write_text(kernel.read_text(), encoding="utf-8")
    return PipelineState(
        run_id="r-stage",
        operator="softmax",
        spec_path=str(SPEC),
        run_dir=str(run_dir),
        options=RunOptions(no_gpu=no_gpu, llm=False),
        started_at=datetime.now(UTC),
    )


@pytest.mark.slow
def test_stage_d_reaches_the_gpu_boundary(tmp_path: Path) -> None:
    """Host part passes (library, pipeline check, ABI checks); correctness is BLOCKED
    env; the reports validate and name files that exist; the library is the run's
    workspace's. Re-running changes nothing."""
    state = _state(tmp_path / "run")
    manifest_before = read_manifest(CHECKOUT)
    result = run_host_builder(state)
    report = result.report
    assert isinstance(report, HostBuildReport)
    assert report.verdict is HostBuildVerdict.BLOCKED
    assert report.verdict_class is FailureClass.ENV
    assert report.host_part_passed(), report.host_checks
    assert report.c_symbol == "cutile_softmax"
    assert report.library == "host/library/ported/python/libtileport_kernels.so"
    for path in report.artifact_paths()[:3]:
        assert (tmp_path / "run" / path).is_file()
    (correctness,) = result.extra_reports
    assert isinstance(correctness, CorrectnessReport)
    assert correctness.gpu_statement() == "Nothing was run on a GPU: correctness is unproven."
    again = run_host_builder(state).report
    assert isinstance(again, HostBuildReport)
    assert again.host_checks[0].detail == "nothing changed"
    assert read_manifest(CHECKOUT) == manifest_before


def test_stage_e_without_gpu_results_is_blocked(tmp_path: Path) -> None:
    state = _state(tmp_path / "run", no_gpu=True)
    report = run_perf_validator(state).report
    assert isinstance(report, PerfReport)
    assert report.verdict is PerfVerdict.BLOCKED
    assert report.summary.startswith("Nothing was timed on a GPU")


@pytest.mark.slow
@pytest.mark.gpu
def test_bundle_runs_on_a_gpu(bundle: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: no GPU run here")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the GPU run is done by `tileport gpu-run` on a GPU host")
    from nodes.correctness.runner import run_bundle

    outcome = run_bundle(bundle, tmp_path / "results")
    assert outcome.correctness.ran_on_gpu
    assert outcome.run.cases
