"""Stage F from the reports it reads. The perf numbers here are test inputs that
exercise the decision rules; no GPU result is claimed."""

from __future__ import annotations

from pathlib import Path

import pytest
from stage_support import EXAMPLES, fresh_state

from nodes.perf_investigator import investigate
from schemas.pipeline import Stage
from schemas.reports import (
    AnalysisReport,
    AutotuneSpace,
    CauseSide,
    DiffAnalysisReport,
    DiffFinding,
    EntrySymbolPolicy,
    FindingSeverity,
    InvestigationReport,
    KernelAnalysis,
    MeasurementEnvironment,
    OperatorConfig,
    OpsUsed,
    PerfReport,
    PerfRow,
    RootCause,
    Tolerance,
    Variant,
    VariantDiff,
    load_report,
    save_report,
)
from schemas.state import PipelineState
from schemas.verdicts import (
    AnalyzerVerdict,
    DiffVerdict,
    FixOwner,
    InvestigationVerdict,
    PerfVerdict,
    SamenessLevel,
)

ENV = MeasurementEnvironment(
    gpu="test input", driver="test input", clocks="test input", toolchain={"tileiras": "13.4"}
)


def row(
    config: str,
    port: float,
    base: float,
    *,
    variant: str = "row",
    launches: tuple[int, int] | None = None,
) -> PerfRow:
    return PerfRow(
        config_id=config,
        variant=variant,
        dtype="float16",
        shapes={"x": [4096, 4096]},
        port_us=port,
        baseline_us=base,
        baseline_backend="cutile_python",
        repetitions=100,
        port_launches=launches[0] if launches else None,
        baseline_launches=launches[1] if launches else None,
    )


def state_with(
    tmp_path: Path, rows: list[PerfRow], verdict: PerfVerdict | None = None
) -> PipelineState:
    state = fresh_state(EXAMPLES / "softmax.port.yaml", tmp_path / "run")
    verdict = verdict or (PerfReport.verdict_for(rows) if rows else PerfVerdict.BLOCKED)
    measured = (
        {
            "l2_flush_bytes": 1 << 28,
            "warmup_iterations": 10,
            "interleaved": True,
            "environment": ENV,
        }
        if rows
        else {}
    )
    save_report(
        PerfReport(
            run_id=state.run_id,
            attempt=1,
            verdict=verdict,
            rows=rows,
            summary="" if rows else "no GPU on this machine: nothing was measured",
            **measured,
            **PerfReport.geomean_fields(rows),  # type: ignore[arg-type]
        ),
        state.layout(),
    )
    return state


def save_diff(state: PipelineState, level: SamenessLevel, findings: list[DiffFinding]) -> None:
    critical = any(f.severity is FindingSeverity.CRITICAL for f in findings)
    owner = FixOwner.KERNEL if critical else None
    verdict = (
        DiffVerdict.FAIL_FIXABLE
        if critical
        else DiffVerdict.PASS_WITH_NOTES
        if findings
        else DiffVerdict.PASS
    )
    save_report(
        DiffAnalysisReport(
            run_id=state.run_id,
            attempt=1,
            verdict=verdict,
            owner=owner,
            summary="diff",
            variants=[
                VariantDiff(
                    variant="row",
                    level=level,
                    reference_ir="reference/row.mlir",
                    generated_ir="generated/row.mlir",
                    findings=findings,
                )
            ],
        ),
        state.layout(),
    )


def checked(state: PipelineState) -> InvestigationReport:
    report = investigate(state)
    assert report.attempt == state.next_attempt(Stage.PERF_INVESTIGATOR)
    save_report(report, state.layout())
    assert load_report(InvestigationReport, state.layout()) == report
    return report


def test_extra_launches_are_a_host_cause(tmp_path: Path) -> None:
    rows = [row(f"c{i}", 12.0 * (i + 1), 10.0 * (i + 1), launches=(2, 1)) for i in range(3)]
    report = checked(state_with(tmp_path, rows))
    assert report.verdict is InvestigationVerdict.FIXABLE
    cause = report.causes[0]
    assert cause.side is CauseSide.HOST and cause.category == "launch count"
    assert "2 kernel(s) per call, the baseline 1" in cause.evidence
    assert (report.port_launches_per_call, report.baseline_launches_per_call) == (2, 1)


def test_uniform_ratio_without_launch_counts_suggests_a_wrapper_copy(tmp_path: Path) -> None:
    rows = [row(f"c{i}", 12.0 * (i + 1), 10.0 * (i + 1)) for i in range(4)]
    report = checked(state_with(tmp_path, rows))
    assert report.verdict is InvestigationVerdict.FIXABLE
    assert [c.category for c in report.causes] == ["wrapper copies"]
    assert "1.200 to 1.200 on all 4 configurations" in report.causes[0].evidence


def test_non_uniform_gap_is_not_called_a_wrapper_copy(tmp_path: Path) -> None:
    rows = [row("a", 11.0, 10.0, launches=(1, 1)), row("b", 15.0, 10.0, launches=(1, 1))]
    report = checked(state_with(tmp_path, rows))
    assert report.verdict is InvestigationVerdict.BLOCKED
    assert "device side is not explained" in report.summary
    assert "no IR diff of this run" in "\n".join(report.notes)


def test_ir_differences_are_device_causes(tmp_path: Path) -> None:
    rows = [row("a", 13.0, 10.0, launches=(1, 1)), row("b", 26.0, 20.0, launches=(1, 1))]
    state = state_with(tmp_path, rows)
    findings = [
        DiffFinding(
            severity=FindingSeverity.CRITICAL,
            category="memory_op_family",
            detail="load_ptr_tko where the reference has load_view_tko",
            root_cause=RootCause.KERNEL_BUG,
            owner=FixOwner.KERNEL,
            fix="use the reference's memory API",
        ),
        DiffFinding(
            severity=FindingSeverity.WARN,
            category="latency_hint",
            detail="latency 8 vs 4",
            root_cause=RootCause.KERNEL_BUG,
            owner=FixOwner.KERNEL,
            fix="match the latency hint",
        ),
        DiffFinding(
            severity=FindingSeverity.NOISE,
            category="dead_constant",
            detail="2 vs 3",
            root_cause=RootCause.SEMANTIC_EQUIVALENCE,
        ),
    ]
    save_diff(state, SamenessLevel.DIFFERENT, findings)
    report = checked(state)
    assert report.verdict is InvestigationVerdict.FIXABLE
    assert [(c.side, c.category) for c in report.causes] == [
        (CauseSide.DEVICE, "memory-op family"),
        (CauseSide.DEVICE, "hints"),
    ]


def test_upstream_only_differences_leave_the_gap_unexplained(tmp_path: Path) -> None:
    rows = [row("a", 13.0, 10.0, launches=(1, 1)), row("b", 30.0, 20.0, launches=(1, 1))]
    state = state_with(tmp_path, rows)
    save_diff(
        state,
        SamenessLevel.EQUIVALENT,
        [
            DiffFinding(
                severity=FindingSeverity.WARN,
                category="token_order",
                detail="token plumbing differs",
                root_cause=RootCause.DSL_LIMITATION,
            ),
        ],
    )
    report = checked(state)
    assert report.verdict is InvestigationVerdict.BLOCKED
    assert any("no port change removes" in note for note in report.notes)


def test_same_device_code_and_launches_is_aligned(tmp_path: Path) -> None:
    rows = [row("a", 11.0, 10.0, launches=(1, 1)), row("b", 25.0, 20.0, launches=(1, 1))]
    state = state_with(tmp_path, rows)
    save_diff(state, SamenessLevel.EXACT, [])
    report = checked(state)
    assert report.verdict is InvestigationVerdict.ALIGNED
    assert "nothing on the port side differs" in report.summary


def test_no_gap_is_aligned(tmp_path: Path) -> None:
    rows = [row("a", 10.1, 10.0), row("b", 19.9, 20.0)]
    report = checked(state_with(tmp_path, rows))
    assert report.verdict is InvestigationVerdict.ALIGNED
    assert report.summary.startswith("no residual gap: geomean port/baseline = ")


def test_slow_configurations_of_one_variant_point_at_its_code(tmp_path: Path) -> None:
    rows = [
        row("big1", 15.0, 10.0, variant="large", launches=(1, 1)),
        row("big2", 30.0, 20.0, variant="large", launches=(1, 1)),
        row("small1", 10.0, 10.0, variant="small", launches=(1, 1)),
    ]
    report = checked(state_with(tmp_path, rows))
    assert report.verdict is InvestigationVerdict.FIXABLE
    (cause,) = report.causes
    assert cause.side is CauseSide.DEVICE and cause.category == "codegen"
    assert "variant large run at 1.500x" in cause.evidence and "small" in cause.evidence


def test_autotuned_reference_is_a_host_candidate(tmp_path: Path) -> None:
    rows = [row("a", 11.0, 10.0, launches=(1, 1)), row("b", 30.0, 20.0, launches=(1, 1))]
    state = state_with(tmp_path, rows)
    analysis = KernelAnalysis(
        operator="softmax",
        kernel_name="k",
        source_file="k.py",
        reference_backend="cutile_python",
        launch_path="autotuned",
        pattern="single",
        ops=OpsUsed(ops=["ct.load"], uses_cdiv=False, check_bounds=True),
        configs=[
            OperatorConfig(id="a", dtype="float16", shapes={"x": [1]}),
            OperatorConfig(id="b", dtype="float16", shapes={"x": [1]}),
        ],
        variants=[
            Variant(
                name="row",
                kernel_function="k",
                dispatch_condition="always",
                reference_ir="reference/row.mlir",
                reference_backend="cutile_python",
            )
        ],
        config_variants={"a": "row", "b": "row"},
        correctness_reference={"function": "m:f", "origin": "o"},
        tolerances={"float16": Tolerance(atol=1e-3, rtol=1e-3, source="s")},
        autotune=AutotuneSpace(key=["N"], space=[{"TILE": 64}, {"TILE": 128}]),
        entry_symbols=EntrySymbolPolicy(c_symbol="cutile_softmax", rust_entries={"row": "k"}),
    )
    save_report(
        AnalysisReport(
            run_id=state.run_id, attempt=1, verdict=AnalyzerVerdict.PASS, analysis=analysis
        ),
        state.layout(),
    )
    report = checked(state)
    assert report.verdict is InvestigationVerdict.FIXABLE
    assert [c.category for c in report.causes] == ["autotune"]
    assert "2 candidate(s) keyed on N" in report.causes[0].evidence


def test_nothing_measured_is_blocked(tmp_path: Path) -> None:
    report = checked(state_with(tmp_path, []))
    assert report.verdict is InvestigationVerdict.BLOCKED
    assert report.summary == "nothing was measured: no GPU on this machine: nothing was measured"


def test_missing_or_stale_perf_report_is_blocked(tmp_path: Path) -> None:
    state = fresh_state(EXAMPLES / "softmax.port.yaml", tmp_path / "run")
    assert "perf.json: missing" in checked(state).summary
    rows = [row("a", 12.0, 10.0)]
    other = state_with(tmp_path / "other", rows)
    stale = load_report(PerfReport, other.layout()).model_copy(update={"run_id": "older"})
    save_report(stale, state.layout())
    assert "belongs to another run" in checked(state).summary


@pytest.mark.parametrize("launches", [(1, 1), None])
def test_uniform_ratio_with_counted_launches_is_noted_not_blamed(
    tmp_path: Path, launches: tuple[int, int] | None
) -> None:
    rows = [row(f"c{i}", 12.0 * (i + 1), 10.0 * (i + 1), launches=launches) for i in range(3)]
    report = checked(state_with(tmp_path, rows))
    categories = [c.category for c in report.causes]
    if launches is None:
        assert categories == ["wrapper copies"]
    else:
        assert categories == []
        assert any(note.startswith("uniform ratio (") for note in report.notes)


def test_a_configuration_outside_its_a_a_band_is_not_called_aligned(tmp_path: Path) -> None:
    """Same device code and launches, a geomean within the limit, and one configuration
    0.924 of the baseline where identical kernels give 0.996 to 1.004: not a re-measure
    but something the launches differ in besides the code."""
    band = (0.996, 1.004)
    rows = [
        row("a", 9.24, 10.0, launches=(1, 1)).model_copy(update={"aa_band": band}),
        row("b", 10.0, 10.0, launches=(1, 1)).model_copy(update={"aa_band": band}),
    ]
    state = state_with(tmp_path, rows)
    save_diff(state, SamenessLevel.SASS_IDENTICAL, [])
    report = checked(state)
    assert report.verdict is InvestigationVerdict.BLOCKED
    assert report.summary.startswith("outside their A/A band: a; compare")
    assert "cluster dims, shared-memory carve-out" in report.summary
    assert any(n.startswith("a: port/baseline 0.9240 is outside") for n in report.notes)
