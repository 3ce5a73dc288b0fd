"""Completing a run that stopped at the GPU boundary: the graph forks before the
host builder's attempt the GPU results belong to and runs on to a real verdict."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from pipeline_script import CONFIG, ScriptedStages, Step, path_of, run_script, spec_file

from graph.gpu_resume import complete_with_gpu_results
from nodes.gpu_completion import GpuResults, GpuResultsError
from schemas.gpu import BundleManifest, GpuEnvironment, GpuRunReport
from schemas.pipeline import Stage
from schemas.reports import (
    CorrectnessCase,
    CorrectnessReport,
    HostBuildReport,
    PerfReport,
    load_report,
)
from schemas.run_layout import RunLayout
from schemas.verdicts import CorrectnessVerdict, PerfVerdict

BOUNDARY = {Stage.HOST_BUILDER: [Step("BLOCKED", "env")]}


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    yield SqliteSaver(connection)
    connection.close()


def gpu_results(folder: Path, run_id: str, verdict: CorrectnessVerdict) -> GpuResults:
    """What a GPU run of this run's bundle (attempt 1) says, written to `folder`."""
    meta = {"run_id": run_id, "attempt": 1}
    cases = [
        CorrectnessCase(
            config_id=CONFIG,
            dtype="float32",
            seed=seed,
            shapes={"x": [1003, 517]},
            passed=verdict is CorrectnessVerdict.ALL_PASS,
            atol=1e-6,
            rtol=1e-5,
        )
        for seed in (0, 1)
    ]
    correctness = CorrectnessReport(
        **meta,
        verdict=verdict,
        ran_on_gpu=True,
        gpu="NVIDIA H200",
        cases=cases,
        summary=f"2 cases on NVIDIA H200 ({verdict})",
    )
    perf = PerfReport(
        **meta,
        verdict=PerfVerdict.BLOCKED,
        summary="timed elsewhere",
        **PerfReport.geomean_fields([]),
    )
    run = GpuRunReport(
        operator="softmax",
        ran_on_gpu=True,
        statement="Ran on NVIDIA H200: 2 correctness cases.",
        environment=GpuEnvironment(gpu="NVIDIA H200"),
        correctness_verdict=verdict.value,
        perf_verdict=perf.verdict.value,
        elapsed_s=1.0,
    )
    manifest = BundleManifest(
        operator="softmax",
        symbol="cutile_softmax",
        run_id=run_id,
        spec="spec/softmax.port.yaml",
        reference_source="spec/softmax.py",
        kernel_parameters=["x"],
        library="lib/libtileport_kernels.so",
        wrapper="py/tileport_kernels.py",
        files=[],
        built_on={},
        seeds=[0, 1],
        perf_repetitions=5,
        perf_warmup=1,
    )
    folder.mkdir(parents=True)
    for report in (correctness, perf, run):
        (folder / report.FILE_NAME).write_text(report.model_dump_json())
    return GpuResults(folder, manifest, correctness, perf, run)


def test_gpu_results_complete_the_run_without_redoing_earlier_stages(
    tmp_path: Path, saver: SqliteSaver
) -> None:
    first, _ = run_script(tmp_path, BOUNDARY, checkpointer=saver, thread_id="g1")
    assert first.gate_verdict == "AWAITING_GPU"
    layout = RunLayout(tmp_path / "run")
    run_id = load_report(HostBuildReport, layout).run_id
    results = gpu_results(tmp_path / "upload", run_id, CorrectnessVerdict.ALL_PASS)
    stages = ScriptedStages()
    summary = complete_with_gpu_results(
        spec_file(tmp_path),
        layout.root,
        results,
        checkpointer=saver,
        thread_id="g1",
        nodes=stages.nodes(),
    )
    assert stages.calls == [Stage.PERF_VALIDATOR, Stage.FINAL_GATE]
    assert summary.gate_verdict == "PASS"
    assert path_of(summary) == [
        "preflight",
        "analyzer",
        "kernel_writer",
        "host_builder",
        "perf_validator",
        "final_gate",
    ]
    host = load_report(HostBuildReport, layout)
    assert (host.verdict, host.attempt, host.run_id) == ("ALL_PASS", 1, run_id)
    assert load_report(CorrectnessReport, layout).gpu == "NVIDIA H200"
    assert (layout.host_dir / "gpu" / "gpu_run.json").is_file()


def test_failing_gpu_results_end_the_run_with_a_real_fail(
    tmp_path: Path, saver: SqliteSaver
) -> None:
    run_script(tmp_path, BOUNDARY, checkpointer=saver, thread_id="g2")
    layout = RunLayout(tmp_path / "run")
    run_id = load_report(HostBuildReport, layout).run_id
    results = gpu_results(tmp_path / "upload", run_id, CorrectnessVerdict.FAIL)
    stages = ScriptedStages()
    summary = complete_with_gpu_results(
        spec_file(tmp_path),
        layout.root,
        results,
        checkpointer=saver,
        thread_id="g2",
        nodes=stages.nodes(),
    )
    assert summary.gate_verdict == "FAIL"
    assert load_report(HostBuildReport, layout).verdict_class == "kernel"


def test_only_a_run_awaiting_a_gpu_can_be_completed(tmp_path: Path, saver: SqliteSaver) -> None:
    run_script(tmp_path, checkpointer=saver, thread_id="g3")
    results = gpu_results(tmp_path / "upload", "any", CorrectnessVerdict.ALL_PASS)
    with pytest.raises(GpuResultsError, match="not awaiting a GPU"):
        complete_with_gpu_results(
            spec_file(tmp_path),
            tmp_path / "run",
            results,
            checkpointer=saver,
            thread_id="g3",
            nodes=ScriptedStages().nodes(),
        )
