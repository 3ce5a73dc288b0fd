"""A scripted double of the pipeline stages: each stage gives the verdicts a test
lists for it, in order, and schema-valid reports and files that back them up.
Unscripted executions take the happy-path verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from graph.build import compile_pipeline
from graph.runner import as_graph_input, run_pipeline
from graph.stages import StageFn, StageNodes
from nodes.final_gate import run_final_gate
from schemas.pipeline import Outcome, RunOptions, RunSummary, Stage, StageRecord
from schemas.reports import (
    AbiCheck,
    AnalysisReport,
    CheckResult,
    CorrectnessCase,
    CorrectnessReport,
    DiffAnalysisReport,
    DiffFinding,
    EntrySymbolPolicy,
    FindingSeverity,
    HostBuildReport,
    InvestigationReport,
    KernelAnalysis,
    KernelWriterReport,
    MeasurementEnvironment,
    OperatorConfig,
    OpsUsed,
    PerfCause,
    PerfReport,
    PerfRow,
    PreflightCheck,
    PreflightReport,
    RootCause,
    StageReport,
    Tolerance,
    Variant,
    VariantDiff,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState, ReportMeta, StageResult
from schemas.verdicts import (
    CorrectnessVerdict,
    DiffVerdict,
    FailureClass,
    FixOwner,
    HostBuildVerdict,
    InvestigationVerdict,
    PerfVerdict,
    SamenessLevel,
)

VARIANT = "main"
CONFIG = "rows_1003x517"


class StageCrash(RuntimeError):
    """Raised by a scripted stage to simulate a process dying mid-run."""


@dataclass(frozen=True)
class Step:
    verdict: str
    qualifier: str | None = None
    """The host builder's failure class, or the IR-diff analyst's fix owner."""
    correctness: str | None = None
    """Host builder only: the correctness verdict to write, if not the natural one."""
    crash: bool = False


HAPPY: Mapping[Stage, Step] = {
    Stage.PREFLIGHT: Step("PASS"),
    Stage.ANALYZER: Step("PASS"),
    Stage.KERNEL_WRITER: Step("COMPILED"),
    Stage.HOST_BUILDER: Step("ALL_PASS"),
    Stage.PERF_VALIDATOR: Step("DONE"),
    Stage.IR_DIFF_ANALYST: Step("PASS"),
    Stage.PERF_INVESTIGATOR: Step("ALIGNED"),
}

Script = Mapping[Stage, Sequence[Step]]


class ScriptedStages:
    def __init__(self, script: Script | None = None) -> None:
        self._queues = {stage: list(steps) for stage, steps in (script or {}).items()}
        self.calls: list[Stage] = []

    def nodes(self) -> StageNodes:
        return StageNodes(
            preflight=self._stage(Stage.PREFLIGHT),
            analyzer=self._stage(Stage.ANALYZER),
            kernel_writer=self._stage(Stage.KERNEL_WRITER),
            host_builder=self._stage(Stage.HOST_BUILDER),
            perf_validator=self._stage(Stage.PERF_VALIDATOR),
            ir_diff_analyst=self._stage(Stage.IR_DIFF_ANALYST),
            perf_investigator=self._stage(Stage.PERF_INVESTIGATOR),
            final_gate=self._gate,
        )

    def _gate(self, state: PipelineState) -> StageResult:
        self.calls.append(Stage.FINAL_GATE)
        return run_final_gate(state)

    def _stage(self, stage: Stage) -> StageFn:
        def run(state: PipelineState) -> StageResult:
            self.calls.append(stage)
            queue = self._queues.get(stage, [])
            step = queue.pop(0) if queue else HAPPY[stage]
            if step.crash:
                raise StageCrash(f"{stage.value} crashed")
            return BUILDERS[stage](state, step)

        return run


def _meta(state: PipelineState, stage: Stage) -> ReportMeta:
    return state.report_meta(stage)


def _touch(path: Path, text: str = "x\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def preflight(state: PipelineState, step: Step) -> StageResult:
    checks = [PreflightCheck(name="tileiras", ok=True, detail="13.4.92")]
    summary = ""
    if step.verdict != "PASS":
        checks.append(PreflightCheck(name="cargo", ok=False, remedy="install the Rust toolchain"))
        summary = "cargo is missing"
    meta = _meta(state, Stage.PREFLIGHT)
    return StageResult(
        PreflightReport(**meta, verdict=step.verdict, checks=checks, summary=summary)
    )


def sample_analysis(layout: RunLayout) -> KernelAnalysis:
    reference = layout.reference_ir(VARIANT)
    _touch(reference, "cuda_tile.module @softmax {}\n")
    return KernelAnalysis(
        operator="softmax",
        kernel_name="softmax_kernel",
        source_file="examples/kernels/softmax.py",
        reference_backend="cutile_python",
        launch_path="direct",
        pattern="single",
        ops=OpsUsed(ops=["load", "reduce_max", "exp"], uses_cdiv=True, check_bounds=True),
        configs=[OperatorConfig(id=CONFIG, dtype="float32", shapes={"x": [1003, 517]})],
        variants=[
            Variant(
                name=VARIANT,
                kernel_function="softmax_kernel",
                dispatch_condition="always",
                reference_ir=layout.relative(reference),
                reference_backend="cutile_python",
            )
        ],
        config_variants={CONFIG: VARIANT},
        correctness_reference={"function": "torch.softmax", "origin": "tests/test_softmax.py"},
        tolerances={"float32": Tolerance(atol=1e-6, rtol=1e-5, source="tests/test_softmax.py")},
        entry_symbols=EntrySymbolPolicy(c_symbol="cutile_softmax", rust_entries={VARIANT: "k"}),
    )


def analyzer(state: PipelineState, step: Step) -> StageResult:
    meta = _meta(state, Stage.ANALYZER)
    if step.verdict != "PASS":
        report = AnalysisReport(**meta, verdict=step.verdict, summary="no launch found")
    else:
        report = AnalysisReport(
            **meta, verdict=step.verdict, analysis=sample_analysis(state.layout())
        )
    return StageResult(report)


def kernel_writer(state: PipelineState, step: Step) -> StageResult:
    meta = _meta(state, Stage.KERNEL_WRITER)
    if step.verdict != "COMPILED":
        return StageResult(KernelWriterReport(**meta, verdict=step.verdict, summary="unsupported"))
    layout = state.layout()
    _touch(layout.kernel_rs, "// kernel\n")
    _touch(layout.generated_ir(VARIANT))
    log = layout.stage_log(Stage.KERNEL_WRITER, meta["attempt"])
    _touch(log)
    report = KernelWriterReport(
        **meta,
        verdict=step.verdict,
        kernel_rs=layout.relative(layout.kernel_rs),
        generated_ir={VARIANT: layout.relative(layout.generated_ir(VARIANT))},
        build_log=layout.relative(log),
        pipeline_check_passed=True,
        ir_self_check_passed=True,
    )
    return StageResult(report)


def correctness_report(
    state: PipelineState, verdict: CorrectnessVerdict, *, ran_on_gpu: bool = True
) -> CorrectnessReport:
    meta = _meta(state, Stage.HOST_BUILDER)
    if not ran_on_gpu:
        return CorrectnessReport(
            **meta, verdict=verdict, ran_on_gpu=False, summary="no GPU on this machine"
        )
    cases = [
        CorrectnessCase(
            config_id=CONFIG,
            dtype="float32",
            seed=seed,
            shapes={"x": [1003, 517]},
            passed=verdict is CorrectnessVerdict.ALL_PASS or seed == 0,
            atol=1e-6,
            rtol=1e-5,
        )
        for seed in (0, 1)
    ]
    if verdict is CorrectnessVerdict.BLOCKED:
        cases = []
    summary = "" if verdict is CorrectnessVerdict.ALL_PASS else f"correctness {verdict}"
    return CorrectnessReport(
        **meta, verdict=verdict, ran_on_gpu=True, gpu="NVIDIA H200", cases=cases, summary=summary
    )


def _natural_correctness(step: Step) -> CorrectnessVerdict | None:
    """What the correctness run said, for a host builder verdict; None when it never ran."""
    if step.correctness is not None:
        return CorrectnessVerdict(step.correctness)
    if step.qualifier == FailureClass.HOST:
        return None
    if step.verdict == HostBuildVerdict.ALL_PASS:
        return CorrectnessVerdict.ALL_PASS
    if step.verdict == HostBuildVerdict.FAIL:
        return CorrectnessVerdict.FAIL
    return CorrectnessVerdict.BLOCKED


def host_builder(state: PipelineState, step: Step) -> StageResult:
    meta = _meta(state, Stage.HOST_BUILDER)
    layout = state.layout()
    host_ok = step.qualifier != FailureClass.HOST
    for path in (layout.ffi_rs, layout.wrapper_py, layout.host_dir / "libtileport_kernels.so"):
        _touch(path)
    correctness_verdict = _natural_correctness(step)
    extra: tuple[StageReport, ...] = ()
    correctness_path = None
    if correctness_verdict is not None:
        on_gpu = step.qualifier != FailureClass.ENV
        extra = (correctness_report(state, correctness_verdict, ran_on_gpu=on_gpu),)
        correctness_path = f"reports/{CorrectnessReport.FILE_NAME}"
    report = HostBuildReport(
        **meta,
        verdict=step.verdict,
        verdict_class=step.qualifier,
        c_symbol="cutile_softmax",
        ffi_rs=layout.relative(layout.ffi_rs),
        wrapper=layout.relative(layout.wrapper_py),
        library="host/libtileport_kernels.so",
        host_checks=[
            CheckResult(name="library build", passed=host_ok),
            CheckResult(name="pipeline check", passed=True),
        ],
        abi_checks=[AbiCheck(case="null descriptor", expected_code=-1, returned_code=-1)],
        correctness_report=correctness_path,
        summary="" if step.verdict == HostBuildVerdict.ALL_PASS else f"{step.verdict}",
    )
    return StageResult(report, extra_reports=extra)


def perf_rows(ratio: float) -> list[PerfRow]:
    return [
        PerfRow(
            config_id=f"c{i}",
            variant=VARIANT,
            dtype="float32",
            shapes={"x": [1003 * (i + 1), 517]},
            port_us=10.0 * ratio * (i + 1),
            baseline_us=10.0 * (i + 1),
            baseline_backend="cutile_python",
            repetitions=50,
        )
        for i in range(3)
    ]


def perf_report(state: PipelineState, verdict: PerfVerdict, ratio: float) -> PerfReport:
    meta = _meta(state, Stage.PERF_VALIDATOR)
    if verdict is PerfVerdict.BLOCKED:
        return PerfReport(
            **meta, verdict=verdict, summary="CUPTI unavailable", **PerfReport.geomean_fields([])
        )
    rows = perf_rows(ratio)
    return PerfReport(
        **meta,
        verdict=verdict,
        l2_flush_bytes=256 << 20,
        warmup_iterations=5,
        interleaved=True,
        rows=rows,
        environment=MeasurementEnvironment(
            gpu="NVIDIA H200", driver="580", clocks="default", toolchain={"tileiras": "13.4.92"}
        ),
        **PerfReport.geomean_fields(rows),
    )


def perf_validator(state: PipelineState, step: Step) -> StageResult:
    verdict = PerfVerdict(step.verdict)
    return StageResult(perf_report(state, verdict, 1.0 if verdict is PerfVerdict.DONE else 1.2))


def ir_diff_analyst(state: PipelineState, step: Step) -> StageResult:
    meta = _meta(state, Stage.IR_DIFF_ANALYST)
    verdict = DiffVerdict(step.verdict)
    if verdict is DiffVerdict.BLOCKED:
        return StageResult(DiffAnalysisReport(**meta, verdict=verdict, summary="no IR"))
    findings = {
        DiffVerdict.PASS: [],
        DiffVerdict.PASS_WITH_NOTES: [
            DiffFinding(
                severity=FindingSeverity.WARN,
                category="latency hint",
                detail="missing latency hint",
                root_cause=RootCause.DSL_LIMITATION,
            )
        ],
        DiffVerdict.FAIL_FIXABLE: [
            DiffFinding(
                severity=FindingSeverity.CRITICAL,
                category="padding value",
                detail="zero instead of neg_inf",
                root_cause=RootCause.KERNEL_BUG,
                owner=step.qualifier,
                fix="pad with neg_inf",
            )
        ],
        DiffVerdict.FAIL_COMPILER_BUG: [
            DiffFinding(
                severity=FindingSeverity.CRITICAL,
                category="reduction",
                detail="identity dropped",
                root_cause=RootCause.COMPILER_BUG,
            )
        ],
    }[verdict]
    critical = any(f.severity is FindingSeverity.CRITICAL for f in findings)
    variant = VariantDiff(
        variant=VARIANT,
        level=SamenessLevel.DIFFERENT if critical else SamenessLevel.EXACT,
        reference_ir=f"reference/{VARIANT}.mlir",
        generated_ir=f"generated/{VARIANT}.mlir",
        findings=findings,
    )
    owner = FixOwner(step.qualifier) if step.qualifier else None
    report = DiffAnalysisReport(
        **meta, verdict=verdict, owner=owner, variants=[variant], summary=f"{verdict}"
    )
    return StageResult(report)


def perf_investigator(state: PipelineState, step: Step) -> StageResult:
    meta = _meta(state, Stage.PERF_INVESTIGATOR)
    verdict = InvestigationVerdict(step.verdict)
    causes = []
    if verdict is InvestigationVerdict.FIXABLE:
        causes = [
            PerfCause(side="host", category="wrapper copies", evidence="2 launches", fix="no copy")
        ]
    report = InvestigationReport(
        **meta, verdict=verdict, causes=causes, summary=f"{verdict}: residual gap"
    )
    return StageResult(report)


BUILDERS = {
    Stage.PREFLIGHT: preflight,
    Stage.ANALYZER: analyzer,
    Stage.KERNEL_WRITER: kernel_writer,
    Stage.HOST_BUILDER: host_builder,
    Stage.PERF_VALIDATOR: perf_validator,
    Stage.IR_DIFF_ANALYST: ir_diff_analyst,
    Stage.PERF_INVESTIGATOR: perf_investigator,
}


def spec_file(directory: Path) -> Path:
    spec = directory / "softmax.port.yaml"
    if not spec.exists():
        spec.write_text("operator: softmax\n")
    return spec


def run_script(
    tmp_path: Path,
    script: Script | None = None,
    *,
    run_dir: Path | None = None,
    spec: Path | None = None,
    nodes: StageNodes | None = None,
    **kwargs: Any,
) -> tuple[RunSummary, ScriptedStages]:
    """Run the whole pipeline through run_pipeline with scripted stages (or `nodes`)."""
    stages = ScriptedStages(script)
    summary = run_pipeline(
        spec or spec_file(tmp_path),
        run_dir or tmp_path / "run",
        options=RunOptions(no_gpu=False, llm=False),
        nodes=nodes or stages.nodes(),
        **kwargs,
    )
    return summary, stages


def path_of(summary: RunSummary) -> list[str]:
    return [record.stage.value for record in summary.stages]


def final_state(tmp_path: Path, script: Script | None = None) -> PipelineState:
    """Run the compiled graph and return its final state (for gate tests)."""
    stages = ScriptedStages(script)
    graph = compile_pipeline(stages.nodes(), checkpointer=InMemorySaver())
    layout = RunLayout(tmp_path / "run")
    layout.prepare_fresh()
    config: RunnableConfig = {"configurable": {"thread_id": "gate"}}
    graph.invoke(as_graph_input(new_state(tmp_path)), config)
    return PipelineState.model_validate(graph.get_state(config).values)


def new_state(tmp_path: Path, run_id: str = "run-1", **fields: Any) -> PipelineState:
    return PipelineState(
        run_id=run_id,
        operator="softmax",
        spec_path=str(spec_file(tmp_path)),
        run_dir=str(tmp_path / "run"),
        started_at=datetime.now(UTC),
        **fields,
    )


def route_from_seed(
    tmp_path: Path,
    after: Stage,
    step: Step,
    attempts: Mapping[Stage, int],
    verdicts: Mapping[Stage, str] | None = None,
) -> tuple[list[Stage], Outcome | None]:
    """Drive the compiled graph from a state the caps make unreachable by running:
    `after` has just given `step`, with `attempts` already used."""
    stages = ScriptedStages()
    graph = compile_pipeline(stages.nodes(), checkpointer=InMemorySaver())
    RunLayout(tmp_path / "run").prepare_fresh()
    classes = {after: step.qualifier} if step.qualifier else {}
    state = new_state(
        tmp_path,
        attempts=dict(attempts),
        verdicts={**(verdicts or {}), after: step.verdict},
        verdict_classes=classes,
        records=[_record(after, attempts[after], step.verdict)],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "seed"}}
    graph.update_state(config, as_graph_input(state), as_node=after.value)
    graph.invoke(None, config)
    final = PipelineState.model_validate(graph.get_state(config).values)
    return stages.calls, final.outcome


def _record(stage: Stage, attempt: int, verdict: str) -> StageRecord:
    now = datetime.now(UTC)
    return StageRecord(
        stage=stage, attempt=attempt, verdict=verdict, started_at=now, finished_at=now
    )
