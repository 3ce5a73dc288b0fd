"""Runs through LangGraph checkpointers: in memory, and SQLite resuming after a crash
without executing the finished stages again."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pipeline_script import HAPPY, StageCrash, Step, path_of, run_script, spec_file

from graph.runner import ResumeMismatch
from schemas.pipeline import Stage, StageRecord

HAPPY_PATH = ["preflight", "analyzer", "kernel_writer", "host_builder", "perf_validator"]


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.sqlite"


@pytest.fixture
def open_saver(sqlite_path: Path) -> Iterator[Callable[[], SqliteSaver]]:
    """Open a fresh SqliteSaver per call (as a new process would), close them all after."""
    connections: list[sqlite3.Connection] = []

    def factory() -> SqliteSaver:
        connection = sqlite3.connect(sqlite_path, check_same_thread=False)
        connections.append(connection)
        return SqliteSaver(connection)

    yield factory
    for connection in connections:
        connection.close()


def test_in_memory_saver_runs_and_reruns_on_one_thread(tmp_path: Path) -> None:
    saver = InMemorySaver()
    first, _ = run_script(tmp_path, checkpointer=saver, thread_id="softmax")
    second, stages = run_script(tmp_path, checkpointer=saver, thread_id="softmax")
    assert path_of(first) == path_of(second) == [*HAPPY_PATH, "final_gate"]
    assert second.gate_verdict == "PASS"
    assert len(stages.calls) == 6


def test_sqlite_resume_after_a_crash_skips_finished_stages(
    tmp_path: Path, open_saver: Callable[[], SqliteSaver], caplog: pytest.LogCaptureFixture
) -> None:
    crash = {Stage.HOST_BUILDER: [Step("ALL_PASS", crash=True)]}
    with pytest.raises(StageCrash):
        run_script(tmp_path, crash, checkpointer=open_saver(), thread_id="t1")
    assert not (tmp_path / "run" / "reports" / "summary.json").exists()

    with caplog.at_level(logging.WARNING):
        summary, stages = run_script(tmp_path, checkpointer=open_saver(), thread_id="t1")
    assert stages.calls == [Stage.HOST_BUILDER, Stage.PERF_VALIDATOR, Stage.FINAL_GATE]
    assert path_of(summary) == [*HAPPY_PATH, "final_gate"]
    assert [r.attempt for r in summary.stages] == [1] * 6
    assert summary.gate_verdict == "PASS"
    assert "unregistered type" not in caplog.text


def test_a_stage_is_told_once_checkpointed_and_told_again_after_a_crash(
    tmp_path: Path, open_saver: Callable[[], SqliteSaver]
) -> None:
    """A stage's execution is told when the next stage starts, from its checkpoint: a
    crash there resumes after the stage (not redoing it) and tells it again."""

    def die_after_host_builder(record: StageRecord) -> None:
        if record.stage is Stage.HOST_BUILDER:
            raise StageCrash("killed while the host build was being recorded")

    with pytest.raises(StageCrash):
        run_script(
            tmp_path, checkpointer=open_saver(), thread_id="t2", on_stage=die_after_host_builder
        )
    reports = tmp_path / "run" / "reports"
    assert (reports / "host_build.json").is_file()

    seen: list[StageRecord] = []
    summary, stages = run_script(
        tmp_path, checkpointer=open_saver(), thread_id="t2", on_stage=seen.append
    )
    assert [r.stage for r in seen] == [Stage.HOST_BUILDER, Stage.PERF_VALIDATOR, Stage.FINAL_GATE]
    assert summary.gate_verdict == "PASS"
    assert sorted(p.name for p in (reports / "history").glob("host_build.*")) == [
        "host_build.1.json"
    ]
    assert json.loads((reports / "host_build.json").read_text())["attempt"] == 1
    assert stages.calls == [Stage.PERF_VALIDATOR, Stage.FINAL_GATE]


def test_resume_refuses_another_run_directory(
    tmp_path: Path, open_saver: Callable[[], SqliteSaver]
) -> None:
    crash = {Stage.ANALYZER: [Step("PASS", crash=True)]}
    with pytest.raises(StageCrash):
        run_script(tmp_path, crash, checkpointer=open_saver(), thread_id="t3")
    with pytest.raises(ResumeMismatch, match="use another thread id"):
        run_script(tmp_path, checkpointer=open_saver(), thread_id="t3", run_dir=tmp_path / "other")


def test_a_run_whose_folder_was_moved_resumes_there(
    tmp_path: Path, open_saver: Callable[[], SqliteSaver]
) -> None:
    """A service's data restored elsewhere: with its spec at the same place inside the
    run's folder it is the same run, and its remaining stages write in the new folder."""
    first = tmp_path / "old" / "run"
    (first / "input").mkdir(parents=True)
    spec = spec_file(first / "input")
    crash = {Stage.HOST_BUILDER: [Step("ALL_PASS", crash=True)]}
    with pytest.raises(StageCrash):
        run_script(
            tmp_path, crash, run_dir=first, spec=spec, checkpointer=open_saver(), thread_id="t6"
        )
    moved = tmp_path / "new" / "run"
    moved.parent.mkdir()
    first.rename(moved)
    summary, stages = run_script(
        tmp_path,
        run_dir=moved,
        spec=moved / "input" / spec.name,
        checkpointer=open_saver(),
        thread_id="t6",
    )
    assert stages.calls == [Stage.HOST_BUILDER, Stage.PERF_VALIDATOR, Stage.FINAL_GATE]
    assert summary.gate_verdict == "PASS"
    assert (moved / "reports" / "summary.json").is_file() and not first.exists()


def test_a_moved_run_with_its_spec_elsewhere_is_another_run(
    tmp_path: Path, open_saver: Callable[[], SqliteSaver]
) -> None:
    first = tmp_path / "old" / "run"
    (first / "input").mkdir(parents=True)
    crash = {Stage.ANALYZER: [Step("PASS", crash=True)]}
    with pytest.raises(StageCrash):
        run_script(
            tmp_path,
            crash,
            run_dir=first,
            spec=spec_file(first / "input"),
            checkpointer=open_saver(),
            thread_id="t8",
        )
    moved = tmp_path / "new" / "run"
    moved.parent.mkdir()
    first.rename(moved)
    with pytest.raises(ResumeMismatch, match="use another thread id"):
        run_script(tmp_path, run_dir=moved, checkpointer=open_saver(), thread_id="t8")


def test_a_new_thread_starts_fresh_beside_an_unfinished_one(
    tmp_path: Path, open_saver: Callable[[], SqliteSaver]
) -> None:
    crash = {Stage.KERNEL_WRITER: [Step("COMPILED", crash=True)]}
    with pytest.raises(StageCrash):
        run_script(tmp_path, crash, checkpointer=open_saver(), thread_id="t4")
    summary, stages = run_script(tmp_path, checkpointer=open_saver(), thread_id="t5")
    assert stages.calls[0] is Stage.PREFLIGHT
    assert summary.gate_verdict == "PASS"


def test_happy_table_is_a_complete_script() -> None:
    assert set(HAPPY) == {stage for stage in Stage if stage is not Stage.FINAL_GATE}
