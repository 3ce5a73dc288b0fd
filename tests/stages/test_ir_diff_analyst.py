"""Stage C on a real reference export of softmax against deliberately mutated
generated IR: classification, owner, fix, sameness level and verdict."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from stage_support import EXAMPLES, fresh_state

from nodes.analyzer import run as run_analyzer
from nodes.ir_diff_analyst import analyse
from schemas.pipeline import RunOptions, Stage, StageRecord
from schemas.port_spec import load_port_spec
from schemas.reports import (
    AnalysisReport,
    CorrectnessCase,
    CorrectnessReport,
    DiffAnalysisReport,
    FindingSeverity,
    KernelWriterReport,
    RootCause,
    load_report,
    save_report,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState
from schemas.verdicts import (
    CorrectnessVerdict,
    DiffVerdict,
    FixOwner,
    KernelWriterVerdict,
    SamenessLevel,
)
from tileir.diff import diff_texts
from toolchain.reference_export import export_reference, specialise

SPEC = EXAMPLES / "softmax.port.yaml"
Mutation = Callable[[str], str]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real analyzer run (reference export included), copied by each test."""
    run_dir = tmp_path_factory.mktemp("analysed") / "run"
    state = fresh_state(SPEC, run_dir)
    report = run_analyzer(state).report
    assert report.verdict == "PASS", report.problems
    save_report(report, RunLayout(run_dir))
    return run_dir


def stage_c_state(
    analysed: Path, tmp_path: Path, mutate: Mutation, **options: bool
) -> PipelineState:
    """A run in which the analyzer passed and the kernel writer 'wrote' the mutated IR."""
    run_dir = tmp_path / "run"
    state = fresh_state(SPEC, run_dir, options=RunOptions(no_gpu=True, **options))
    for earlier in ("reference", "reports"):
        shutil.copytree(analysed / earlier, run_dir / earlier, dirs_exist_ok=True)
    layout = state.layout()
    layout.generated_ir("row").write_text(mutate(layout.reference_ir("row").read_text()))
    layout.kernel_rs.write_text("// kernel\n")
    save_report(
        KernelWriterReport(
            run_id=state.run_id,
            attempt=1,
            verdict=KernelWriterVerdict.COMPILED,
            kernel_rs="generated/kernel.rs",
            generated_ir={"row": "generated/row.mlir"},
            pipeline_check_passed=True,
            ir_self_check_passed=True,
        ),
        layout,
    )
    return state


def diff(state: PipelineState) -> DiffAnalysisReport:
    report, tokens, cost = analyse(state)
    assert (tokens, cost) == (0, 0.0)
    # What the graph would write must load back through the same model.
    save_report(report, state.layout())
    assert load_report(DiffAnalysisReport, state.layout()) == report
    return report


def renamed(text: str) -> str:
    """Other value names and another entry symbol: the same IR."""
    text = re.sub(r"%tview", "%view_of_tensor", text)
    return re.sub(r"entry @\w+", "entry @softmax_kernel_entry", text, count=1)


def test_exact_port_passes(analysed: Path, tmp_path: Path) -> None:
    report = diff(stage_c_state(analysed, tmp_path, renamed))
    assert report.verdict is DiffVerdict.PASS and report.owner is None
    assert report.level() is SamenessLevel.EXACT
    assert not any(f.severity is FindingSeverity.CRITICAL for f in report.findings())


def test_padding_zero_instead_of_neg_inf_is_the_kernels_to_fix(
    analysed: Path, tmp_path: Path
) -> None:
    state = stage_c_state(
        analysed, tmp_path, lambda t: t.replace("padding_value = neg_inf", "padding_value = zero")
    )
    report = diff(state)
    assert report.verdict is DiffVerdict.FAIL_FIXABLE and report.owner is FixOwner.KERNEL
    (variant,) = report.variants
    assert variant.level is SamenessLevel.DIFFERENT
    (finding,) = [f for f in variant.findings if f.severity is FindingSeverity.CRITICAL]
    assert finding.category == "padding_value" and finding.root_cause is RootCause.KERNEL_BUG
    assert "neg_inf" in finding.fix and "generated line" in finding.detail
    assert report.routing_class() == "kernel"
    assert "padding_value" in report.summary


def test_pointer_alignment_fact_is_the_hosts_to_fix(analysed: Path, tmp_path: Path) -> None:
    state = stage_c_state(
        analysed,
        tmp_path,
        lambda t: t.replace("assume div_by<16>, %arg0", "assume div_by<8>, %arg0", 1),
    )
    report = diff(state)
    assert report.verdict is DiffVerdict.FAIL_FIXABLE and report.owner is FixOwner.HOST
    assert any(f.category == "pointer_assume" and f.fix for f in report.findings())


def test_kernel_fix_wins_over_a_host_fix(analysed: Path, tmp_path: Path) -> None:
    def both(text: str) -> str:
        text = text.replace("assume div_by<16>, %arg0", "assume div_by<8>, %arg0", 1)
        return text.replace("= exp %", "= exp2 %")

    report = diff(stage_c_state(analysed, tmp_path, both))
    assert report.verdict is DiffVerdict.FAIL_FIXABLE and report.owner is FixOwner.KERNEL
    owners = {f.owner for f in report.findings() if f.severity is FindingSeverity.CRITICAL}
    assert owners == {FixOwner.KERNEL, FixOwner.HOST}


def reordered(text: str) -> str:
    """The first two independent `assume div_by` ops swapped: same code, other order."""
    lines = text.splitlines()
    first, second = [i for i, line in enumerate(lines) if " = assume div_by<" in line][:2]
    lines[first], lines[second] = lines[second], lines[first]
    return "\n".join(lines) + "\n"


def test_the_reordering_is_equivalent_but_not_exact(analysed: Path) -> None:
    """The premise of the next two tests, stated against the IR engine itself."""
    reference = RunLayout(analysed).reference_ir("row").read_text()
    engine = diff_texts(reference, reordered(reference))
    assert not engine.exact and engine.counts.critical == 0 and engine.counts.warn == 0


def test_noise_only_is_equivalent_without_sass(analysed: Path, tmp_path: Path) -> None:
    report = diff(stage_c_state(analysed, tmp_path, reordered))
    assert report.verdict is DiffVerdict.PASS
    assert report.level() is SamenessLevel.EQUIVALENT
    assert {f.severity for f in report.findings()} <= {
        FindingSeverity.NOISE,
        FindingSeverity.EQUIVALENT,
    }


def test_sass_decides_sass_identical(analysed: Path, tmp_path: Path) -> None:
    """Real tileiras and cuobjdump on both bytecodes."""
    state = stage_c_state(analysed, tmp_path, reordered)
    layout = state.layout()
    shutil.copyfile(layout.reference_dir / "row.bytecode", layout.generated_dir / "row.bytecode")
    report = diff(state)
    assert report.verdict is DiffVerdict.PASS
    assert report.level() is SamenessLevel.SASS_IDENTICAL
    assert any("SASS sm_90 identical" in note for note in report.notes)


def test_exact_ir_with_different_sass_is_a_compiler_bug(analysed: Path, tmp_path: Path) -> None:
    state = stage_c_state(analysed, tmp_path, renamed)
    spec = load_port_spec(SPEC)
    other = next(c for c, _ in spec.all_configs() if c.name == "pow2_f16")
    export_reference(
        EXAMPLES / "softmax.py",
        "softmax_kernel",
        [specialise(spec.resolve(other, "test"))],
        tmp_path / "other",
        cubin_targets=[],
    )
    shutil.copyfile(
        tmp_path / "other" / "row.bytecode", state.layout().generated_dir / "row.bytecode"
    )
    report = diff(state)
    assert report.verdict is DiffVerdict.FAIL_COMPILER_BUG
    (variant,) = report.variants
    assert variant.level is SamenessLevel.EXACT
    assert [f.root_cause for f in variant.findings] == [RootCause.COMPILER_BUG]


def test_correctness_failure_with_matching_ir_points_at_the_host(
    analysed: Path, tmp_path: Path
) -> None:
    state = stage_c_state(analysed, tmp_path, renamed)
    case = CorrectnessCase(
        config_id="ragged_f32",
        dtype="float32",
        seed=0,
        shapes={"x": [37, 1000]},
        passed=False,
        atol=1e-5,
        rtol=1.3e-6,
        message="max abs error 0.4",
    )
    save_report(
        CorrectnessReport(
            run_id=state.run_id,
            attempt=1,
            verdict=CorrectnessVerdict.FAIL,
            ran_on_gpu=True,
            gpu="NVIDIA H200",
            cases=[case],
            summary="1 case failed",
        ),
        state.layout(),
    )
    report = diff(state)
    assert report.verdict is DiffVerdict.FAIL_FIXABLE and report.owner is FixOwner.HOST
    assert report.level() is SamenessLevel.EXACT
    assert any(f.category == "host_side_fault" for f in report.findings())


def test_missing_generated_ir_is_blocked(analysed: Path, tmp_path: Path) -> None:
    state = stage_c_state(analysed, tmp_path, renamed)
    state.layout().generated_ir("row").unlink()
    report = diff(state)
    assert report.verdict is DiffVerdict.BLOCKED
    assert "row:" in report.summary


def test_unparsable_generated_ir_is_blocked(analysed: Path, tmp_path: Path) -> None:
    report = diff(stage_c_state(analysed, tmp_path, lambda t: "this is not tile ir\n"))
    assert report.verdict is DiffVerdict.BLOCKED
    assert report.summary.startswith("cannot compare every variant: row:")


def test_reports_of_another_run_are_not_used(analysed: Path, tmp_path: Path) -> None:
    state = stage_c_state(analysed, tmp_path, renamed)
    layout = state.layout()
    stale = load_report(AnalysisReport, layout).model_copy(update={"run_id": "older-run"})
    save_report(stale, layout)
    report = diff(state)
    assert report.verdict is DiffVerdict.BLOCKED
    assert "analysis.json belongs to another run" in report.summary


def test_no_kernel_report_is_blocked(analysed: Path, tmp_path: Path) -> None:
    state = stage_c_state(analysed, tmp_path, renamed)
    (state.layout().reports_dir / "kernel_writer.json").unlink()
    report = diff(state)
    assert report.verdict is DiffVerdict.BLOCKED
    assert "kernel_writer.json: missing" in report.summary


def test_trigger_is_noted(analysed: Path, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    state = stage_c_state(analysed, tmp_path, renamed)
    now = datetime.now(UTC)
    record = StageRecord(
        stage=Stage.HOST_BUILDER,
        attempt=1,
        verdict="FAIL",
        verdict_class="kernel",
        started_at=now,
        finished_at=now,
    )
    report = diff(state.model_copy(update={"records": [record]}))
    assert report.notes[0] == "entered after host_builder said FAIL (kernel)"


def test_llm_prose_is_added_but_never_decides(
    analysed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai_fake import Reply, serve

    state = stage_c_state(
        analysed,
        tmp_path,
        lambda t: t.replace("padding_value = neg_inf", "padding_value = zero"),
        llm=True,
    )
    reply = Reply("The port pads with zero, so -inf rows become 0.\nPASS.", 300, 40)
    with serve([reply]) as endpoint:
        monkeypatch.setenv("TILEPORT_LLM_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("TILEPORT_LLM_MODEL", "explainer")
        monkeypatch.setenv("TILEPORT_LLM_PRICE_COMPLETION_PER_1K", "1.0")
        report, tokens, cost = analyse(state)
    assert report.verdict is DiffVerdict.FAIL_FIXABLE  # the prose says PASS; it has no say
    assert report.notes[-1].startswith("LLM commentary (explainer): The port pads with zero")
    assert tokens == 340 and cost == pytest.approx(0.04)
    assert "padding_value" in endpoint.requests[0]["messages"][1]["content"]


def test_llm_prose_needs_the_option(
    analysed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILEPORT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TILEPORT_LLM_MODEL", "explainer")
    report = diff(stage_c_state(analysed, tmp_path, renamed))
    assert not any(note.startswith("LLM") for note in report.notes)
