"""`tileport convert`: exit codes per outcome, progress, the JSON summary; driven
with scripted stages (tests/graph/pipeline_script.py) and with the real
preflight and analyzer."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
from pipeline_script import ScriptedStages, Step, spec_file
from stage_support import EXAMPLES

from app import cli_convert
from app.cli_convert import convert, register
from graph.stages import StageNodes, StageNotImplemented
from nodes import analyzer, preflight
from nodes.host_builder import library
from nodes.host_builder import stage as host_stage
from schemas.exit_codes import ExitCode
from schemas.pipeline import RunOptions, Stage
from schemas.state import PipelineState, StageResult

OPTIONS = RunOptions(no_gpu=True)


def run_cli(
    spec: Path,
    out: Path | None,
    nodes: StageNodes | None,
    *,
    as_json: bool = False,
    terminal: bool = False,
) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = convert(
        spec,
        out=out,
        options=OPTIONS,
        as_json=as_json,
        nodes=nodes,
        stdout=stdout,
        stderr=stderr,
        terminal=terminal,
    )
    return code, stdout.getvalue(), stderr.getvalue()


def scripted(script: dict[Stage, list[Step]] | None = None) -> StageNodes:
    return ScriptedStages(script).nodes()


def test_gate_pass_is_zero_with_one_line_per_stage(tmp_path: Path) -> None:
    code, out, _ = run_cli(spec_file(tmp_path), tmp_path / "run", scripted())
    assert code == ExitCode.OK == 0
    lines = out.splitlines()
    assert lines[0].startswith("converting ")
    assert [line.split()[0] for line in lines[1:7]] == [
        "preflight",
        "analyzer",
        "kernel_writer",
        "host_builder",
        "perf_validator",
        "final_gate",
    ]
    assert lines[1].startswith("preflight #1 PASS (")
    assert "final gate PASS" in out and out.rstrip().endswith("exit 0: the final gate passed")


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ({Stage.PREFLIGHT: [Step("BLOCKED")]}, ExitCode.STAGE_FAILED),
        ({Stage.ANALYZER: [Step("BLOCKED")]}, ExitCode.STAGE_FAILED),
        ({Stage.ANALYZER: [Step("FAIL_FIXABLE")]}, ExitCode.BAD_INPUT),
        ({Stage.HOST_BUILDER: [Step("BLOCKED", "env")]}, ExitCode.AWAITING_GPU),
        ({Stage.PERF_VALIDATOR: [Step("INVESTIGATE")]}, ExitCode.FAILED),
        ({Stage.KERNEL_WRITER: [Step("FAIL_COMPILE")]}, ExitCode.STAGE_FAILED),
        # The library does not build, twice: the routing completes the run, but
        # nothing ran on a GPU, so the failure is the stage's.
        ({Stage.HOST_BUILDER: [Step("FAIL", "host")] * 2}, ExitCode.STAGE_FAILED),
    ],
)
def test_exit_code_per_outcome(
    tmp_path: Path, script: dict[Stage, list[Step]], expected: ExitCode
) -> None:
    code, out, _ = run_cli(spec_file(tmp_path), tmp_path / "run", scripted(script))
    assert code == expected
    assert out.rstrip().endswith(f"exit {int(expected)}: {cli_convert.EXIT_MEANINGS[expected]}")


UNBINDABLE_PORT = """\
#[cutile::module]
pub mod softmax_port {
    use cutile::core::*;

    #[cutile::entry()]
    unsafe fn softmax_kernel<const TILE_N: i32>(x: *mut f32, x_rows: i32) {}
}
"""


def test_a_binding_failure_is_a_stage_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real host builder on a port whose entry takes too few parameters:
    binding.py refuses it (BindingError), the routing sends the run to the IR-diff
    analyst and completes it, and the exit is 3 as for any stage before the GPU."""
    base = scripted()

    def unbindable_port(state: PipelineState) -> StageResult:
        result = base.for_stage(Stage.KERNEL_WRITER)(state)
        state.layout().kernel_rs.write_text(UNBINDABLE_PORT)
        return result

    # The checkout's workspace, copied without the library lock a build elsewhere may
    # hold for minutes: binding fails before anything is built.
    monkeypatch.setattr(host_stage, "create_workspace", library._copy_checkout)
    real = {"kernel_writer": unbindable_port, "host_builder": host_stage.run}
    nodes = StageNodes(**{**{s.value: base.for_stage(s) for s in Stage}, **real})
    code, out, _ = run_cli(EXAMPLES / "softmax.port.yaml", tmp_path / "run", nodes, as_json=True)
    summary = json.loads(out)
    host = next(s for s in summary["stages"] if s["stage"] == "host_builder")
    assert (host["verdict"], host["verdict_class"]) == ("FAIL", "kernel")
    assert "entry softmax_kernel takes 2 parameters" in host["summary"]
    assert code == summary["exit_code"] == ExitCode.STAGE_FAILED


def test_json_summary_is_machine_readable(tmp_path: Path) -> None:
    script = {Stage.HOST_BUILDER: [Step("BLOCKED", "env")]}
    code, out, err = run_cli(spec_file(tmp_path), tmp_path / "run", scripted(script), as_json=True)
    summary = json.loads(out)  # stdout holds the JSON only
    assert code == summary["exit_code"] == ExitCode.AWAITING_GPU
    assert summary["reached_gpu_boundary"] is True
    assert summary["outcome"] == "stop" and summary["gate_verdict"] == "AWAITING_GPU"
    assert [s["stage"] for s in summary["stages"]][-2:] == ["host_builder", "final_gate"]
    assert summary["stages"][3]["verdict_class"] == "env"
    assert any(f["check"] == "run completed" for f in summary["gate_failures"])
    assert "host_builder #1 BLOCKED (env)" in err  # progress went to stderr


def test_missing_spec_is_bad_input(tmp_path: Path) -> None:
    code, out, _ = run_cli(tmp_path / "nope.port.yaml", None, scripted())
    assert code == ExitCode.BAD_INPUT
    assert out == f"error: no such spec file: {tmp_path / 'nope.port.yaml'}\n"
    code, out, _ = run_cli(tmp_path / "nope.port.yaml", None, scripted(), as_json=True)
    assert json.loads(out)["error"].startswith("no such spec file")


def test_a_stage_that_raises_is_a_pipeline_error(tmp_path: Path) -> None:
    def broken(state: PipelineState) -> StageResult:
        raise RuntimeError("disk full")

    base = scripted()
    nodes = StageNodes(**{**{s.value: base.for_stage(s) for s in Stage}, "analyzer": broken})
    code, out, _ = run_cli(spec_file(tmp_path), tmp_path / "run", nodes)
    assert code == ExitCode.INTERNAL_ERROR
    assert "error: analyzer raised RuntimeError: disk full" in out


def test_missing_stage_module_is_a_pipeline_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def incomplete(cls: type[StageNodes], package: str = "nodes") -> StageNodes:
        raise StageNotImplemented("stage kernel_writer has no module nodes.kernel_writer")

    monkeypatch.setattr(StageNodes, "from_modules", classmethod(incomplete))
    code, out, _ = run_cli(spec_file(tmp_path), tmp_path / "run", None)
    assert code == ExitCode.INTERNAL_ERROR
    assert "the pipeline is incomplete: stage kernel_writer has no module" in out


def test_live_table_on_a_terminal(tmp_path: Path) -> None:
    code, out, _ = run_cli(spec_file(tmp_path), tmp_path / "run", scripted(), terminal=True)
    assert code == 0
    assert "tileport convert softmax" in out and "perf_investigator" in out
    assert "exit 0" in out


def test_default_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, _ = run_cli(spec_file(tmp_path), None, scripted())
    assert code == 0
    assert (tmp_path / "runs" / "softmax" / "reports" / "summary.json").is_file()


def test_real_preflight_and_analyzer(tmp_path: Path) -> None:
    """The first two stages for real on softmax; the rest scripted. The scripted
    kernel writer ports a variant the real analysis does not have, so the gate
    fails on coverage: a completed run with a failing gate."""
    base = scripted()
    real = {"preflight": preflight.run, "analyzer": analyzer.run}
    nodes = StageNodes(**{**{s.value: base.for_stage(s) for s in Stage}, **real})
    code, out, _ = run_cli(EXAMPLES / "softmax.port.yaml", tmp_path / "run", nodes, as_json=True)
    summary = json.loads(out)
    assert [s["verdict"] for s in summary["stages"][:2]] == ["PASS", "PASS"]
    assert code == ExitCode.FAILED
    assert any(f["check"] == "kernel covers every variant" for f in summary["gate_failures"])
    assert (tmp_path / "run" / "reference" / "row.mlir").is_file()


def test_register_wires_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["convert", "x.port.yaml", "--no-gpu", "--llm", "--json"])
    seen: dict[str, object] = {}

    def fake_convert(spec: Path, *, out: Path | None, options: RunOptions, as_json: bool) -> int:
        seen.update(spec=spec, out=out, options=options, as_json=as_json)
        return 7

    monkeypatch.setattr(cli_convert, "convert", fake_convert)
    assert args.handler(args) == 7
    assert seen == {
        "spec": Path("x.port.yaml"),
        "out": None,
        "options": RunOptions(no_gpu=True, llm=True),
        "as_json": True,
    }
    assert "exit codes:" in parser._subparsers._group_actions[0].choices["convert"].format_help()  # type: ignore[union-attr]


def test_llm_flag_without_settings_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILEPORT_LLM_BASE_URL", raising=False)
    stdout = io.StringIO()
    convert(
        spec_file(tmp_path),
        out=tmp_path / "run",
        options=RunOptions(llm=True),
        nodes=scripted(),
        stdout=stdout,
        stderr=io.StringIO(),
        terminal=False,
    )
    assert "warning: --llm given but TILEPORT_LLM_BASE_URL" in stdout.getvalue()
