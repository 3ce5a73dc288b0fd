"""The report schemas refuse verdicts their own content does not support."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline_script import (
    CONFIG,
    VARIANT,
    correctness_report,
    new_state,
    perf_report,
    perf_rows,
    sample_analysis,
)
from pydantic import ValidationError

from schemas.pipeline import Stage
from schemas.reports import (
    AnalysisReport,
    CorrectnessReport,
    DiffAnalysisReport,
    HostBuildReport,
    InvestigationReport,
    KernelAnalysis,
    KernelWriterReport,
    PerfReport,
    PreflightCheck,
    PreflightReport,
    ReportInvalid,
    ReportMissing,
    load_report,
    save_report,
)
from schemas.run_layout import RunLayout
from schemas.verdicts import CorrectnessVerdict, PerfVerdict, SamenessLevel

META: dict[str, Any] = {"run_id": "r1", "attempt": 1}


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    run = RunLayout(tmp_path / "run")
    run.prepare_fresh()
    return run


def _analysis_data(layout: RunLayout) -> dict[str, Any]:
    data: dict[str, Any] = sample_analysis(layout).model_dump(mode="json")
    return data


def test_preflight_pass_with_a_failed_check_is_refused() -> None:
    bad = PreflightCheck(name="cargo", ok=False, remedy="install it")
    with pytest.raises(ValidationError, match="PASS with failed checks"):
        PreflightReport(**META, verdict="PASS", checks=[bad])


def test_preflight_blocked_needs_a_remedy_per_missing_piece() -> None:
    vague = PreflightCheck(name="cargo", ok=False)
    with pytest.raises(ValidationError, match="without a remedy"):
        PreflightReport(**META, verdict="BLOCKED", checks=[vague], summary="cargo missing")


def test_analysis_round_trips(layout: RunLayout) -> None:
    report = AnalysisReport(**META, verdict="PASS", analysis=sample_analysis(layout))
    save_report(report, layout)
    assert load_report(AnalysisReport, layout) == report
    assert (layout.reports_dir / "analysis.json").is_file()
    assert (layout.reports_dir / "history" / "analysis.1.json").is_file()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["config_variants"].clear(), "config_variants must map every config"),
        (lambda d: d["config_variants"].update({CONFIG: "nope"}), "unknown variants"),
        (lambda d: d["tolerances"].clear(), "at least 1 item"),
        (lambda d: d["tolerances"].update({"float16": d["tolerances"].pop("float32")}), "no tol"),
        (lambda d: d.update(pattern="multi_variant"), "pattern multi_variant with 1 variant"),
        (lambda d: d.update(launch_path="autotuned"), "without an autotune space"),
        (lambda d: d.update(configs=[]), "at least 1 item"),
        (lambda d: d["configs"].append(d["configs"][0]), "duplicate config id"),
        (lambda d: d["variants"][0].update(reference_ir="../elsewhere.mlir"), "inside the run"),
        (lambda d: d["variants"][0].update(reference_ir="/abs/x.mlir"), "inside the run"),
        (lambda d: d["variants"][0].update(name="../x"), "not a safe file name"),
        (lambda d: d["tolerances"]["float32"].update(source=""), "at least 1 character"),
        (lambda d: d["entry_symbols"].update(c_symbol="softmax"), "String should match"),
        (lambda d: d["entry_symbols"]["rust_entries"].clear(), "at least 1 item"),
    ],
)
def test_analysis_contract_violations_are_refused(
    layout: RunLayout, mutate: Any, message: str
) -> None:
    data = _analysis_data(layout)
    mutate(data)
    with pytest.raises(ValidationError, match=message):
        KernelAnalysis.model_validate(data)


def test_analysis_array_facts_must_match_rank(layout: RunLayout) -> None:
    data = _analysis_data(layout)
    data["variants"][0]["arrays"] = [
        {"name": "x", "dtype": "float32", "ndim": 2, "stride_divisible_by": [16]}
    ]
    with pytest.raises(ValidationError, match="has 1 entries, ndim 2"):
        KernelAnalysis.model_validate(data)


def test_analysis_pass_needs_the_analysis() -> None:
    with pytest.raises(ValidationError, match="PASS without an analysis"):
        AnalysisReport(**META, verdict="PASS")


def test_failures_need_a_reason() -> None:
    with pytest.raises(ValidationError, match="needs a summary"):
        AnalysisReport(**META, verdict="BLOCKED")


def test_compiled_needs_both_proofs() -> None:
    with pytest.raises(ValidationError, match="both the pipeline check and the IR self-check"):
        KernelWriterReport(
            **META,
            verdict="COMPILED",
            kernel_rs="generated/kernel.rs",
            generated_ir={VARIANT: "generated/main.mlir"},
            pipeline_check_passed=True,
        )


def _host(**fields: Any) -> HostBuildReport:
    base: dict[str, Any] = {
        **META,
        "ffi_rs": "host/ffi.rs",
        "wrapper": "host/wrapper.py",
        "library": "host/lib.so",
        "host_checks": [{"name": "library build", "passed": True}],
        "abi_checks": [{"case": "null", "expected_code": -1, "returned_code": -1}],
        "correctness_report": "reports/correctness.json",
    }
    return HostBuildReport(**{**base, **fields})


def test_host_all_pass_is_accepted() -> None:
    assert _host(verdict="ALL_PASS").host_part_passed()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"verdict": "ALL_PASS", "verdict_class": "host"}, "carries no failure class"),
        (
            {"verdict": "ALL_PASS", "abi_checks": [{"case": "null", "expected_code": -1}]},
            "ALL_PASS needs",
        ),
        ({"verdict": "ALL_PASS", "correctness_report": None}, "ALL_PASS needs"),
        ({"verdict": "FAIL", "verdict_class": "env", "summary": "x"}, "BLOCKED env, not FAIL"),
        ({"verdict": "FAIL", "verdict_class": "kernel"}, "needs a summary"),
    ],
)
def test_host_verdict_must_match_content(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _host(**fields)


def test_correctness_all_pass_without_gpu_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="without a GPU run"):
        CorrectnessReport(**META, verdict="ALL_PASS", ran_on_gpu=False)


def test_correctness_all_pass_needs_several_seeds(tmp_path: Path) -> None:
    report = correctness_report(new_state(tmp_path), CorrectnessVerdict.ALL_PASS)
    data = report.model_dump(mode="json")
    data["cases"] = [data["cases"][0]]
    with pytest.raises(ValidationError, match="2 distinct seeds"):
        CorrectnessReport.model_validate(data)


def test_correctness_nonfinite_case_cannot_pass(tmp_path: Path) -> None:
    report = correctness_report(new_state(tmp_path), CorrectnessVerdict.ALL_PASS)
    data = report.model_dump(mode="json")
    data["cases"][0]["nonfinite_outputs"] = True
    with pytest.raises(ValidationError, match="non-finite outputs cannot pass"):
        CorrectnessReport.model_validate(data)


def test_correctness_fail_needs_a_failed_case(tmp_path: Path) -> None:
    report = correctness_report(new_state(tmp_path), CorrectnessVerdict.ALL_PASS)
    data = {**report.model_dump(mode="json"), "verdict": "FAIL", "summary": "x"}
    with pytest.raises(ValidationError, match="FAIL without a failed case"):
        CorrectnessReport.model_validate(data)


def test_perf_verdict_follows_the_geomean(tmp_path: Path) -> None:
    state = new_state(tmp_path)
    assert PerfReport.verdict_for(perf_rows(1.05)) is PerfVerdict.DONE
    assert PerfReport.verdict_for(perf_rows(1.0501)) is PerfVerdict.INVESTIGATE
    slow = perf_report(state, PerfVerdict.INVESTIGATE, 1.2).model_dump(mode="json")
    with pytest.raises(ValidationError, match="contradicts geomean"):
        PerfReport.model_validate({**slow, "verdict": "DONE"})


def test_perf_geomean_line_is_authoritative(tmp_path: Path) -> None:
    data = perf_report(new_state(tmp_path), PerfVerdict.DONE, 1.0).model_dump(mode="json")
    with pytest.raises(ValidationError, match="geomean_line does not match"):
        PerfReport.model_validate({**data, "geomean_line": "geomean = 0.5 (trust me)"})
    with pytest.raises(ValidationError, match=r"geomean_ratio 0\.9 does not match"):
        PerfReport.model_validate({**data, "geomean_ratio": 0.9})


def test_perf_rows_need_the_protocol(tmp_path: Path) -> None:
    data = perf_report(new_state(tmp_path), PerfVerdict.DONE, 1.0).model_dump(mode="json")
    with pytest.raises(ValidationError, match="interleaved and warmed up"):
        PerfReport.model_validate({**data, "interleaved": False})
    with pytest.raises(ValidationError, match="environment and the L2 flush"):
        PerfReport.model_validate({**data, "environment": None})
    with pytest.raises(ValidationError, match="cupti_device_time"):
        PerfReport.model_validate({**data, "timing": "cuda_events"})


def _diff(**fields: Any) -> DiffAnalysisReport:
    variant = {
        "variant": VARIANT,
        "level": "exact",
        "reference_ir": "reference/main.mlir",
        "generated_ir": "generated/main.mlir",
        "findings": [],
    }
    return DiffAnalysisReport(**{**META, "variants": [variant], **fields})


def test_diff_owner_only_with_fail_fixable() -> None:
    with pytest.raises(ValidationError, match="exactly when the verdict is FAIL_FIXABLE"):
        _diff(verdict="PASS", owner="kernel")
    with pytest.raises(ValidationError, match="exactly when the verdict is FAIL_FIXABLE"):
        _diff(verdict="FAIL_FIXABLE")


def test_diff_level_must_match_findings() -> None:
    critical = {
        "severity": "critical",
        "category": "padding",
        "detail": "zero vs neg_inf",
        "root_cause": "kernel_bug",
        "owner": "kernel",
        "fix": "pad with neg_inf",
    }
    variant = {
        "variant": VARIANT,
        "level": "exact",
        "reference_ir": "reference/main.mlir",
        "generated_ir": "generated/main.mlir",
        "findings": [critical],
    }
    with pytest.raises(ValidationError, match="level exact but critical=True"):
        _diff(verdict="FAIL_FIXABLE", owner="kernel", variants=[variant])
    ok = _diff(verdict="FAIL_FIXABLE", owner="kernel", variants=[{**variant, "level": "different"}])
    assert ok.routing_class() == "kernel"
    assert ok.level() is SamenessLevel.DIFFERENT


def test_investigation_fixable_needs_fixes() -> None:
    with pytest.raises(ValidationError, match="FIXABLE needs causes"):
        InvestigationReport(**META, verdict="FIXABLE")


def test_load_report_distinguishes_missing_and_invalid(layout: RunLayout) -> None:
    with pytest.raises(ReportMissing):
        load_report(PerfReport, layout)
    (layout.reports_dir / "perf.json").write_text(json.dumps({"verdict": "DONE"}))
    with pytest.raises(ReportInvalid, match="does not match PerfReport"):
        load_report(PerfReport, layout)


def test_a_report_of_another_stage_does_not_load_as_this_one(layout: RunLayout) -> None:
    report = InvestigationReport(**META, verdict="ALIGNED")
    (layout.reports_dir / "perf.json").write_text(report.model_dump_json())
    with pytest.raises(ReportInvalid):
        load_report(PerfReport, layout)


def test_extra_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        InvestigationReport(**META, verdict="ALIGNED", stage_verdict="PASS")  # type: ignore[call-arg]


def test_each_report_names_its_stage() -> None:
    assert InvestigationReport(**META, verdict="ALIGNED").stage is Stage.PERF_INVESTIGATOR
    with pytest.raises(ValidationError):
        InvestigationReport(**META, verdict="ALIGNED", stage=Stage.PREFLIGHT)
