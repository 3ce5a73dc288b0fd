"""`tileport convert SPEC`: run the whole conversion pipeline on one port spec.

    tileport convert examples/kernels/softmax.port.yaml [--out DIR] [--no-gpu] [--llm]
                     [--time-all] [--json]

Stages are shown as they run (a live table on a terminal, one plain line per
finished stage otherwise). The run directory defaults to `runs/<operator>`.
With `--json`, stdout carries one machine-readable summary and the progress
lines go to stderr. Exit codes (`schemas/exit_codes.py`, the same in every
command; also in `tileport convert --help`):

    0  the final gate passed
    1  the final gate failed on what ran on a GPU
    2  bad input: the spec file is missing, unreadable or invalid
    3  a stage failed before the GPU boundary (the run stopped there, or ended
       with that stage's diagnosis): a tool missing, the kernel writer, binding,
       building or checking the library
    4  awaiting a GPU: everything that needs no GPU passed and the run stopped
       at the GPU boundary (gate AWAITING_GPU); nothing ran on a GPU
    5  the pipeline itself failed: a stage is missing or raised
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from graph.routing import next_target
from graph.runner import run_pipeline
from graph.stages import StageNodes, StageNotImplemented
from schemas.exit_codes import ExitCode, exit_code_epilog
from schemas.pipeline import RunOptions, RunSummary, Stage, StageRecord
from schemas.port_spec import operator_name
from schemas.reports import CorrectnessReport, GateReport, ReportError, ReportT, load_report
from schemas.run_layout import RunLayout
from schemas.state import PipelineState
from schemas.verdicts import AnalyzerVerdict, GateVerdict
from toolchain.llm import ENV_BASE_URL, ENV_MODEL, LlmConfigError, load_llm_settings

EXIT_MEANINGS: Final[dict[ExitCode, str]] = {
    ExitCode.OK: "the final gate passed",
    ExitCode.FAILED: "the final gate failed on what ran on a GPU",
    ExitCode.BAD_INPUT: "bad input: the spec file is missing, unreadable or invalid",
    ExitCode.STAGE_FAILED: "a stage failed before the GPU boundary (the run stopped there, "
    "or ended with that stage's diagnosis): a tool missing, the kernel writer, binding, "
    "building or checking the library",
    ExitCode.AWAITING_GPU: "awaiting a GPU: everything that needs no GPU passed and the run "
    "stopped at the GPU boundary; nothing ran on a GPU",
    ExitCode.INTERNAL_ERROR: "the pipeline itself failed: a stage is missing or raised",
}

STAGE_ORDER: Final = tuple(Stage)
SUMMARY_WIDTH: Final = 90


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    convert = commands.add_parser(
        "convert",
        help="port one kernel: run the whole pipeline on its port spec",
        description="Run preflight, analysis, kernel writing, host build, validation and the "
        "final gate on one port spec.",
        epilog=exit_code_epilog(EXIT_MEANINGS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    convert.add_argument("spec", type=Path, help="the kernel's <name>.port.yaml")
    convert.add_argument("--out", type=Path, help="run directory (default: runs/<operator>)")
    convert.add_argument(
        "--no-gpu", action="store_true", help="never run GPU stages; they end BLOCKED (env)"
    )
    convert.add_argument(
        "--llm", action="store_true", help="allow the LLM fallback (TILEPORT_LLM_* settings)"
    )
    convert.add_argument(
        "--time-all",
        action="store_true",
        help="time every configuration on the GPU, the test ones too (default: the perf set)",
    )
    convert.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    convert.set_defaults(handler=convert_command)


def convert_command(args: argparse.Namespace) -> int:
    options = RunOptions(no_gpu=args.no_gpu, llm=args.llm, time_all_configs=args.time_all)
    return convert(args.spec, out=args.out, options=options, as_json=args.json)


def convert(
    spec: Path,
    *,
    out: Path | None,
    options: RunOptions,
    as_json: bool = False,
    nodes: StageNodes | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    terminal: bool | None = None,
) -> int:
    """Run the pipeline on `spec`; print progress and a summary; return the exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    progress_stream = stderr if as_json else stdout
    console = Console(file=progress_stream, force_terminal=terminal, highlight=False)
    printer = _Printer(stdout, as_json, spec)
    if not spec.is_file():
        return printer.error(ExitCode.BAD_INPUT, f"no such spec file: {spec}")
    run_dir = out if out is not None else Path("runs") / operator_name(spec)
    try:
        stage_nodes = nodes or StageNodes.from_modules()
    except StageNotImplemented as exc:
        return printer.error(ExitCode.INTERNAL_ERROR, f"the pipeline is incomplete: {exc}")
    for warning in _llm_warnings(options):
        console.print(f"warning: {warning}", markup=False, soft_wrap=True)
    progress = Progress(operator=operator_name(spec), spec=spec, run_dir=run_dir)
    if not console.is_terminal:
        progress.echo = lambda line: console.print(line, markup=False, soft_wrap=True)
    console.print(f"converting {spec} into {run_dir}", markup=False, soft_wrap=True)
    try:
        with _display(console, progress):
            summary = run_pipeline(
                spec, run_dir, options=options, nodes=stage_nodes, on_stage=progress.finished
            )
    except Exception as exc:  # a stage that raises ends the run; say which and why
        where = progress.running.value if progress.running else "the pipeline"
        return printer.error(ExitCode.INTERNAL_ERROR, f"{where} raised {type(exc).__name__}: {exc}")
    layout = RunLayout(run_dir.resolve())
    gate = _report(GateReport, layout)
    correctness = _report(CorrectnessReport, layout)
    code = exit_code(summary, gate, correctness is not None and correctness.ran_on_gpu)
    printer.summary(summary, gate, code, run_dir)
    return code


def exit_code(summary: RunSummary, gate: GateReport | None, ran_on_gpu: bool) -> ExitCode:
    """The run's exit code. A failure is the gate's (1) only when something ran on a
    GPU; before that it is the stage's (3), whether the routing stopped the run there
    or sent it on to a diagnosis (a host builder that cannot bind the port)."""
    if summary.gate_verdict == GateVerdict.PASS:
        return ExitCode.OK
    if any(
        record.stage is Stage.ANALYZER and record.verdict == AnalyzerVerdict.FAIL_FIXABLE
        for record in summary.stages
    ):
        return ExitCode.BAD_INPUT
    if gate is not None and gate.reached_gpu_boundary:
        return ExitCode.AWAITING_GPU
    return ExitCode.FAILED if ran_on_gpu else ExitCode.STAGE_FAILED


def _report(model: type[ReportT], layout: RunLayout) -> ReportT | None:
    try:
        return load_report(model, layout)
    except ReportError:
        return None


def _llm_warnings(options: RunOptions) -> list[str]:
    if not options.llm:
        return []
    try:
        configured = load_llm_settings() is not None
    except LlmConfigError as exc:
        return [f"--llm given but the LLM settings are invalid: {exc}"]
    if configured:
        return []
    return [f"--llm given but {ENV_BASE_URL} / {ENV_MODEL} are not set: the LLM fallback is off"]


# -- progress -----------------------------------------------------------------------------


@dataclass
class Progress:
    """What has finished and what runs now, predicted with the graph's own routing."""

    operator: str
    spec: Path
    run_dir: Path
    records: list[StageRecord] = field(default_factory=list)
    running: Stage | None = Stage.PREFLIGHT
    running_since: float = field(default_factory=time.monotonic)
    echo: Callable[[str], None] | None = None
    """Where plain lines go when there is no live table."""

    def finished(self, record: StageRecord) -> None:
        self.records.append(record)
        if self.echo is not None:
            self.echo(plain_line(record))
        self.running = self._next(record)
        self.running_since = time.monotonic()

    def _next(self, record: StageRecord) -> Stage | None:
        if record.stage is Stage.FINAL_GATE:
            return None
        target = next_target(record.stage, self._state())
        return target if isinstance(target, Stage) else Stage.FINAL_GATE

    def _state(self) -> PipelineState:
        attempts: dict[Stage, int] = {}
        verdicts: dict[Stage, str] = {}
        classes: dict[Stage, str] = {}
        for record in self.records:
            attempts[record.stage] = record.attempt
            verdicts[record.stage] = record.verdict
            classes.pop(record.stage, None)
            if record.verdict_class is not None:
                classes[record.stage] = record.verdict_class
        return PipelineState(
            run_id="progress",
            operator=self.operator,
            spec_path=str(self.spec),
            run_dir=str(self.run_dir),
            started_at=datetime.now(UTC),
            attempts=attempts,
            verdicts=verdicts,
            verdict_classes=classes,
        )

    def table(self) -> RenderableType:
        table = Table(title=f"tileport convert {self.operator}", expand=False)
        for column in ("stage", "attempt", "verdict", "time", "summary"):
            table.add_column(column)
        latest = {record.stage: record for record in self.records}
        for stage in STAGE_ORDER:
            record = latest.get(stage)
            if stage is self.running:
                elapsed = f"{time.monotonic() - self.running_since:.1f} s"
                table.add_row(stage.value, "", Spinner("dots", text="running"), elapsed, "")
            elif record is not None:
                table.add_row(
                    stage.value,
                    str(record.attempt),
                    Text(_verdict_text(record), style=_style(record.verdict)),
                    f"{_seconds(record):.1f} s",
                    _shorten(record.summary),
                )
            else:
                table.add_row(Text(stage.value, style="dim"), "", Text("·", style="dim"), "", "")
        return Group(table)


def plain_line(record: StageRecord) -> str:
    summary = f": {record.summary}" if record.summary else ""
    timing = f"({_seconds(record):.1f} s)"
    return f"{record.stage.value} #{record.attempt} {_verdict_text(record)} {timing}{summary}"


def _verdict_text(record: StageRecord) -> str:
    return f"{record.verdict} ({record.verdict_class})" if record.verdict_class else record.verdict


def _seconds(record: StageRecord) -> float:
    return (record.finished_at - record.started_at).total_seconds()


def _style(verdict: str) -> str:
    if verdict in ("PASS", "COMPILED", "ALL_PASS", "DONE", "ALIGNED"):
        return "green"
    if verdict in ("BLOCKED", "PASS_WITH_NOTES", "INVESTIGATE"):
        return "yellow"
    return "red"


def _shorten(text: str) -> str:
    return text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 1] + "…"


@contextmanager
def _display(console: Console, progress: Progress) -> Iterator[None]:
    """A live table on a terminal; elsewhere `progress` echoes one line per stage."""
    if not console.is_terminal:
        yield
        return
    with Live(get_renderable=progress.table, console=console, refresh_per_second=4):
        yield


# -- the final summary ------------------------------------------------------------------------


@dataclass
class _Printer:
    stream: TextIO
    as_json: bool
    spec: Path

    def error(self, code: ExitCode, message: str) -> int:
        if self.as_json:
            payload = {"spec": str(self.spec), "exit_code": int(code), "error": message}
            self.stream.write(json.dumps(payload, indent=2) + "\n")
        else:
            self.stream.write(f"error: {message}\n")
        return int(code)

    def summary(
        self, summary: RunSummary, gate: GateReport | None, code: ExitCode, run_dir: Path
    ) -> None:
        if self.as_json:
            self.stream.write(
                json.dumps(_json_summary(summary, gate, code, run_dir), indent=2) + "\n"
            )
            return
        lines = [
            "",
            f"{summary.operator}: {summary.outcome.value}, final gate {summary.gate_verdict}",
        ]
        lines += [
            f"  {key}: {value}" for key, value in summary.headline.items() if value is not None
        ]
        if gate is not None:
            lines += [f"  failed check: {c.name}: {c.detail}" for c in gate.failures()]
        if summary.llm_tokens:
            lines.append(f"  LLM: {summary.llm_tokens} tokens, ${summary.llm_cost_usd:.4f}")
        lines.append(f"  reports: {RunLayout(run_dir).reports_dir}")
        lines.append(f"exit {int(code)}: {EXIT_MEANINGS[code]}")
        self.stream.write("\n".join(lines) + "\n")


def _json_summary(
    summary: RunSummary, gate: GateReport | None, code: ExitCode, run_dir: Path
) -> dict[str, Any]:
    return {
        "operator": summary.operator,
        "run_dir": str(run_dir),
        "exit_code": int(code),
        "exit_meaning": EXIT_MEANINGS[code],
        "outcome": summary.outcome.value,
        "gate_verdict": summary.gate_verdict,
        "reached_gpu_boundary": gate.reached_gpu_boundary if gate is not None else False,
        "gate_failures": [
            {"check": c.name, "detail": c.detail} for c in (gate.failures() if gate else [])
        ],
        "headline": summary.headline,
        "stages": [record.model_dump(mode="json") for record in summary.stages],
        "llm_tokens": summary.llm_tokens,
        "llm_cost_usd": summary.llm_cost_usd,
    }
