"""Every routing row and every cap of docs/PIPELINE.md, driven through the compiled graph
with scripted stage outcomes (and, for the rows the caps make unreachable by
running, from a seeded state), plus the pure routing functions row by row."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pipeline_script import Step, path_of, route_from_seed, run_script

from graph.routing import (
    CAPS,
    after_analyzer,
    after_host_builder,
    after_ir_diff_analyst,
    after_kernel_writer,
    after_perf_investigator,
    after_perf_validator,
    after_preflight,
)
from schemas.pipeline import Outcome, Stage
from schemas.verdicts import (
    AnalyzerVerdict,
    DiffVerdict,
    FailureClass,
    FixOwner,
    HostBuildVerdict,
    InvestigationVerdict,
    KernelWriterVerdict,
    PerfVerdict,
    PreflightVerdict,
)

P, A, B, D, E, C, F, G = (
    "preflight",
    "analyzer",
    "kernel_writer",
    "host_builder",
    "perf_validator",
    "ir_diff_analyst",
    "perf_investigator",
    "final_gate",
)
HAPPY_PATH = [P, A, B, D, E, G]
NON_FIXABLE_DIFF = ["PASS", "PASS_WITH_NOTES", "FAIL_COMPILER_BUG", "BLOCKED"]


def _run(tmp_path: Path, script: dict[Stage, list[Step]]) -> tuple[list[str], Outcome]:
    summary, stages = run_script(tmp_path, script)
    assert stages.calls.count(Stage.FINAL_GATE) == 1
    assert path_of(summary) == [s.value for s in stages.calls]
    return path_of(summary), summary.outcome


# --- happy path and the stop rows ------------------------------------------------


def test_happy_path_completes_and_passes_the_gate(tmp_path: Path) -> None:
    summary, _ = run_script(tmp_path)
    assert path_of(summary) == HAPPY_PATH
    assert summary.outcome is Outcome.COMPLETE
    assert summary.gate_verdict == "PASS"


def test_preflight_blocked_stops(tmp_path: Path) -> None:
    path, outcome = _run(tmp_path, {Stage.PREFLIGHT: [Step("BLOCKED")]})
    assert (path, outcome) == ([P, G], Outcome.STOP)


@pytest.mark.parametrize("verdict", ["FAIL_FIXABLE", "BLOCKED"])
def test_analyzer_not_pass_stops(tmp_path: Path, verdict: str) -> None:
    path, outcome = _run(tmp_path, {Stage.ANALYZER: [Step(verdict)]})
    assert (path, outcome) == ([P, A, G], Outcome.STOP)


@pytest.mark.parametrize("verdict", ["FAIL_COMPILE", "FAIL_FIXABLE", "BLOCKED"])
def test_kernel_writer_not_compiled_stops(tmp_path: Path, verdict: str) -> None:
    path, outcome = _run(tmp_path, {Stage.KERNEL_WRITER: [Step(verdict)]})
    assert (path, outcome) == ([P, A, B, G], Outcome.STOP)


# --- D host/FFI builder ------------------------------------------------------------


@pytest.mark.parametrize("verdict", ["FAIL", "BLOCKED"])
def test_host_class_failure_runs_d_again(tmp_path: Path, verdict: str) -> None:
    script = {Stage.HOST_BUILDER: [Step(verdict, "host"), Step("ALL_PASS")]}
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, D, E, G], Outcome.COMPLETE)


@pytest.mark.parametrize("verdict", ["FAIL", "BLOCKED"])
def test_host_class_failure_twice_completes_at_d_cap(tmp_path: Path, verdict: str) -> None:
    script = {Stage.HOST_BUILDER: [Step(verdict, "host"), Step(verdict, "host")]}
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, D, G], Outcome.COMPLETE)


@pytest.mark.parametrize(
    "step", [Step("FAIL", "kernel"), Step("BLOCKED", "kernel"), Step("FAIL"), Step("BLOCKED")]
)
def test_kernel_class_or_missing_class_goes_to_c(tmp_path: Path, step: Step) -> None:
    path, outcome = _run(tmp_path, {Stage.HOST_BUILDER: [step]})
    assert (path, outcome) == ([P, A, B, D, C, G], Outcome.COMPLETE)


def test_blocked_env_stops_and_says_so(tmp_path: Path) -> None:
    summary, _ = run_script(tmp_path, {Stage.HOST_BUILDER: [Step("BLOCKED", "env")]})
    assert (path_of(summary), summary.outcome) == ([P, A, B, D, G], Outcome.STOP)
    assert summary.gate_verdict == "AWAITING_GPU"
    assert summary.headline["gpu"] == "Nothing was run on a GPU: correctness is unproven."


# --- E perf validator ----------------------------------------------------------------


def test_perf_investigate_goes_to_c_then_f(tmp_path: Path) -> None:
    path, outcome = _run(tmp_path, {Stage.PERF_VALIDATOR: [Step("INVESTIGATE")]})
    assert (path, outcome) == ([P, A, B, D, E, C, F, G], Outcome.COMPLETE)


def test_perf_blocked_goes_to_c_which_finds_no_gap(tmp_path: Path) -> None:
    path, outcome = _run(tmp_path, {Stage.PERF_VALIDATOR: [Step("BLOCKED")]})
    assert (path, outcome) == ([P, A, B, D, E, C, G], Outcome.COMPLETE)


def test_perf_investigate_with_c_used_goes_to_f(tmp_path: Path) -> None:
    script = {
        Stage.HOST_BUILDER: [Step("FAIL", "kernel"), Step("ALL_PASS")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "kernel")],
        Stage.PERF_VALIDATOR: [Step("INVESTIGATE")],
    }
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, C, B, D, E, F, G], Outcome.COMPLETE)


@pytest.mark.parametrize("verdict", ["INVESTIGATE", "BLOCKED"])
def test_perf_with_c_and_f_used_completes(tmp_path: Path, verdict: str) -> None:
    # F always ends the run, so E cannot run after it: seeded state.
    attempts = {Stage.PERF_VALIDATOR: 1, Stage.IR_DIFF_ANALYST: 1, Stage.PERF_INVESTIGATOR: 1}
    calls, outcome = route_from_seed(tmp_path, Stage.PERF_VALIDATOR, Step(verdict), attempts)
    assert (calls, outcome) == ([Stage.FINAL_GATE], Outcome.COMPLETE)


def test_perf_done_is_terminal_even_after_diagnosis(tmp_path: Path) -> None:
    script = {
        Stage.PERF_VALIDATOR: [Step("INVESTIGATE"), Step("DONE")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "host")],
    }
    summary, _ = run_script(tmp_path, script)
    assert path_of(summary) == [P, A, B, D, E, C, D, E, G]
    assert summary.outcome is Outcome.COMPLETE
    assert summary.gate_verdict == "PASS"


# --- C IR-diff analyst ----------------------------------------------------------------


def test_c_fixable_kernel_runs_b_again(tmp_path: Path) -> None:
    script = {
        Stage.HOST_BUILDER: [Step("FAIL", "kernel"), Step("ALL_PASS")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "kernel")],
    }
    summary, _ = run_script(tmp_path, script)
    assert path_of(summary) == [P, A, B, D, C, B, D, E, G]
    assert summary.gate_verdict == "PASS"


def test_c_fixable_kernel_with_b_cap_used_completes(tmp_path: Path) -> None:
    # B runs from A and from C only, and C once: seeded state.
    attempts = {Stage.KERNEL_WRITER: 2, Stage.HOST_BUILDER: 1, Stage.IR_DIFF_ANALYST: 1}
    step = Step("FAIL_FIXABLE", "kernel")
    calls, outcome = route_from_seed(tmp_path, Stage.IR_DIFF_ANALYST, step, attempts)
    assert (calls, outcome) == ([Stage.FINAL_GATE], Outcome.COMPLETE)


def test_c_fixable_host_runs_d_again(tmp_path: Path) -> None:
    script = {
        Stage.HOST_BUILDER: [Step("FAIL", "kernel"), Step("ALL_PASS")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "host")],
    }
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, C, D, E, G], Outcome.COMPLETE)


def test_c_fixable_host_with_d_cap_used_completes(tmp_path: Path) -> None:
    script = {
        Stage.HOST_BUILDER: [Step("FAIL", "host"), Step("FAIL", "kernel")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "host")],
    }
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, D, C, G], Outcome.COMPLETE)


@pytest.mark.parametrize("verdict", NON_FIXABLE_DIFF)
def test_c_after_a_perf_gap_goes_to_f(tmp_path: Path, verdict: str) -> None:
    script = {Stage.PERF_VALIDATOR: [Step("INVESTIGATE")], Stage.IR_DIFF_ANALYST: [Step(verdict)]}
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, E, C, F, G], Outcome.COMPLETE)


@pytest.mark.parametrize("verdict", NON_FIXABLE_DIFF)
def test_c_without_a_perf_gap_completes(tmp_path: Path, verdict: str) -> None:
    script = {Stage.HOST_BUILDER: [Step("FAIL", "kernel")], Stage.IR_DIFF_ANALYST: [Step(verdict)]}
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, C, G], Outcome.COMPLETE)


@pytest.mark.parametrize("verdict", NON_FIXABLE_DIFF)
def test_c_after_a_perf_gap_with_f_used_completes(tmp_path: Path, verdict: str) -> None:
    attempts = {
        Stage.HOST_BUILDER: 1,
        Stage.PERF_VALIDATOR: 1,
        Stage.IR_DIFF_ANALYST: 1,
        Stage.PERF_INVESTIGATOR: 1,
    }
    calls, outcome = route_from_seed(
        tmp_path,
        Stage.IR_DIFF_ANALYST,
        Step(verdict),
        attempts,
        verdicts={Stage.PERF_VALIDATOR: "INVESTIGATE"},
    )
    assert (calls, outcome) == ([Stage.FINAL_GATE], Outcome.COMPLETE)


# --- F and the caps ----------------------------------------------------------------------


@pytest.mark.parametrize("verdict", ["FIXABLE", "ALIGNED", "BLOCKED"])
def test_f_any_verdict_completes(tmp_path: Path, verdict: str) -> None:
    script = {
        Stage.PERF_VALIDATOR: [Step("INVESTIGATE")],
        Stage.PERF_INVESTIGATOR: [Step(verdict)],
    }
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, E, C, F, G], Outcome.COMPLETE)


def test_c_cap_second_kernel_failure_completes(tmp_path: Path) -> None:
    script = {
        Stage.HOST_BUILDER: [Step("FAIL", "kernel"), Step("FAIL", "kernel")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "kernel")],
    }
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, C, B, D, G], Outcome.COMPLETE)


def test_d_cap_stops_b_retry_from_reaching_d(tmp_path: Path) -> None:
    script = {
        Stage.HOST_BUILDER: [Step("FAIL", "host"), Step("FAIL", "kernel")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "kernel")],
    }
    summary, _ = run_script(tmp_path, script)
    assert path_of(summary) == [P, A, B, D, D, C, B, G]
    assert summary.outcome is Outcome.COMPLETE
    assert summary.gate_verdict == "FAIL"


def test_e_twice_then_f(tmp_path: Path) -> None:
    script = {
        Stage.PERF_VALIDATOR: [Step("INVESTIGATE"), Step("INVESTIGATE")],
        Stage.IR_DIFF_ANALYST: [Step("FAIL_FIXABLE", "kernel")],
    }
    path, outcome = _run(tmp_path, script)
    assert (path, outcome) == ([P, A, B, D, E, C, B, D, E, F, G], Outcome.COMPLETE)


@pytest.mark.parametrize(
    ("after", "step", "attempts"),
    [
        pytest.param(
            Stage.PREFLIGHT, Step("PASS"), {Stage.PREFLIGHT: 1, Stage.ANALYZER: 1}, id="A1"
        ),
        pytest.param(
            Stage.ANALYZER, Step("PASS"), {Stage.ANALYZER: 1, Stage.KERNEL_WRITER: 2}, id="B2"
        ),
        pytest.param(
            Stage.KERNEL_WRITER,
            Step("COMPILED"),
            {Stage.KERNEL_WRITER: 2, Stage.HOST_BUILDER: 2},
            id="D2",
        ),
        pytest.param(
            Stage.HOST_BUILDER,
            Step("ALL_PASS"),
            {Stage.HOST_BUILDER: 2, Stage.PERF_VALIDATOR: 2},
            id="E2",
        ),
        pytest.param(
            Stage.HOST_BUILDER,
            Step("FAIL", "kernel"),
            {Stage.HOST_BUILDER: 1, Stage.IR_DIFF_ANALYST: 1},
            id="C1",
        ),
        pytest.param(
            Stage.PERF_VALIDATOR,
            Step("INVESTIGATE"),
            {Stage.PERF_VALIDATOR: 1, Stage.IR_DIFF_ANALYST: 1, Stage.PERF_INVESTIGATOR: 1},
            id="F1",
        ),
    ],
)
def test_every_cap_turns_its_edge_into_complete(
    tmp_path: Path, after: Stage, step: Step, attempts: dict[Stage, int]
) -> None:
    calls, outcome = route_from_seed(tmp_path, after, step, attempts)
    assert (calls, outcome) == ([Stage.FINAL_GATE], Outcome.COMPLETE)


def test_caps_are_the_documented_ones() -> None:
    routed = {stage: cap for stage, cap in CAPS.items() if stage is not Stage.PREFLIGHT}
    assert routed == {
        Stage.ANALYZER: 1,
        Stage.KERNEL_WRITER: 2,
        Stage.IR_DIFF_ANALYST: 1,
        Stage.HOST_BUILDER: 2,
        Stage.PERF_VALIDATOR: 2,
        Stage.PERF_INVESTIGATOR: 1,
    }


VERDICT_CHOICES: dict[Stage, list[Step]] = {
    Stage.PREFLIGHT: [Step("PASS")] * 4 + [Step("BLOCKED")],
    Stage.ANALYZER: [Step("PASS")] * 4 + [Step("FAIL_FIXABLE"), Step("BLOCKED")],
    Stage.KERNEL_WRITER: [Step("COMPILED")] * 4 + [Step("FAIL_COMPILE"), Step("BLOCKED")],
    Stage.HOST_BUILDER: [
        Step("ALL_PASS"),
        Step("FAIL", "host"),
        Step("BLOCKED", "host"),
        Step("FAIL", "kernel"),
        Step("FAIL"),
        Step("BLOCKED", "env"),
    ],
    Stage.PERF_VALIDATOR: [Step("DONE"), Step("INVESTIGATE"), Step("BLOCKED")],
    Stage.IR_DIFF_ANALYST: [
        *(Step(v) for v in NON_FIXABLE_DIFF),
        Step("FAIL_FIXABLE", "kernel"),
        Step("FAIL_FIXABLE", "host"),
    ],
    Stage.PERF_INVESTIGATOR: [Step("FIXABLE"), Step("ALIGNED"), Step("BLOCKED")],
}


@pytest.mark.parametrize("seed", range(40))
def test_random_scripts_always_end_within_caps(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    script = {stage: rng.choices(steps, k=3) for stage, steps in VERDICT_CHOICES.items()}
    summary, stages = run_script(tmp_path, script)
    assert stages.calls[-1] is Stage.FINAL_GATE
    assert stages.calls.count(Stage.FINAL_GATE) == 1
    for stage, cap in CAPS.items():
        assert stages.calls.count(stage) <= cap, (stage, stages.calls)
    assert summary.outcome in (Outcome.COMPLETE, Outcome.STOP)
    if summary.gate_verdict == "PASS":
        assert summary.stages[-2].stage is Stage.PERF_VALIDATOR
        assert summary.stages[-2].verdict == "DONE"


# --- the routing table as pure functions ------------------------------------------------


def test_pure_rows_preflight_analyzer_kernel_writer() -> None:
    none: dict[Stage, int] = {}
    assert after_preflight(PreflightVerdict.PASS, none) is Stage.ANALYZER
    assert after_preflight(PreflightVerdict.BLOCKED, none) is Outcome.STOP
    assert after_analyzer(AnalyzerVerdict.PASS, none) is Stage.KERNEL_WRITER
    assert after_analyzer(AnalyzerVerdict.FAIL_FIXABLE, none) is Outcome.STOP
    assert after_analyzer(AnalyzerVerdict.BLOCKED, none) is Outcome.STOP
    assert after_kernel_writer(KernelWriterVerdict.COMPILED, none) is Stage.HOST_BUILDER
    for verdict in ("FAIL_COMPILE", "FAIL_FIXABLE", "BLOCKED"):
        assert after_kernel_writer(KernelWriterVerdict(verdict), none) is Outcome.STOP


@pytest.mark.parametrize(
    ("verdict", "failure_class", "used", "expected"),
    [
        ("ALL_PASS", None, 1, Stage.PERF_VALIDATOR),
        ("FAIL", "host", 1, Stage.HOST_BUILDER),
        ("BLOCKED", "host", 1, Stage.HOST_BUILDER),
        ("FAIL", "host", 2, Outcome.COMPLETE),
        ("BLOCKED", "host", 2, Outcome.COMPLETE),
        ("FAIL", "kernel", 1, Stage.IR_DIFF_ANALYST),
        ("BLOCKED", "kernel", 1, Stage.IR_DIFF_ANALYST),
        ("FAIL", None, 1, Stage.IR_DIFF_ANALYST),
        ("BLOCKED", None, 2, Stage.IR_DIFF_ANALYST),
        ("BLOCKED", "env", 1, Outcome.STOP),
        ("FAIL", "env", 1, Outcome.STOP),
    ],
)
def test_pure_rows_host_builder(
    verdict: str, failure_class: str | None, used: int, expected: Stage | Outcome
) -> None:
    cls = FailureClass(failure_class) if failure_class else None
    attempts = {Stage.HOST_BUILDER: used}
    assert after_host_builder(HostBuildVerdict(verdict), cls, attempts) is expected


@pytest.mark.parametrize(
    ("verdict", "c_used", "f_used", "expected"),
    [
        ("DONE", 0, 0, Outcome.COMPLETE),
        ("INVESTIGATE", 0, 0, Stage.IR_DIFF_ANALYST),
        ("BLOCKED", 0, 0, Stage.IR_DIFF_ANALYST),
        ("INVESTIGATE", 1, 0, Stage.PERF_INVESTIGATOR),
        ("BLOCKED", 1, 0, Stage.PERF_INVESTIGATOR),
        ("INVESTIGATE", 1, 1, Outcome.COMPLETE),
        ("BLOCKED", 1, 1, Outcome.COMPLETE),
    ],
)
def test_pure_rows_perf_validator(
    verdict: str, c_used: int, f_used: int, expected: Stage | Outcome
) -> None:
    attempts = {Stage.IR_DIFF_ANALYST: c_used, Stage.PERF_INVESTIGATOR: f_used}
    assert after_perf_validator(PerfVerdict(verdict), attempts) is expected


@pytest.mark.parametrize(
    ("verdict", "owner", "gap", "attempts", "expected"),
    [
        ("FAIL_FIXABLE", "kernel", False, {}, Stage.KERNEL_WRITER),
        ("FAIL_FIXABLE", "kernel", True, {Stage.KERNEL_WRITER: 2}, Outcome.COMPLETE),
        ("FAIL_FIXABLE", "host", False, {Stage.HOST_BUILDER: 1}, Stage.HOST_BUILDER),
        ("FAIL_FIXABLE", "host", True, {Stage.HOST_BUILDER: 2}, Outcome.COMPLETE),
        *((verdict, None, True, {}, Stage.PERF_INVESTIGATOR) for verdict in NON_FIXABLE_DIFF),
        *(
            (verdict, None, True, {Stage.PERF_INVESTIGATOR: 1}, Outcome.COMPLETE)
            for verdict in NON_FIXABLE_DIFF
        ),
        *((verdict, None, False, {}, Outcome.COMPLETE) for verdict in NON_FIXABLE_DIFF),
    ],
)
def test_pure_rows_ir_diff_analyst(
    verdict: str,
    owner: str | None,
    gap: bool,
    attempts: dict[Stage, int],
    expected: Stage | Outcome,
) -> None:
    fix_owner = FixOwner(owner) if owner else None
    assert after_ir_diff_analyst(DiffVerdict(verdict), fix_owner, gap, attempts) is expected


@pytest.mark.parametrize("verdict", list(InvestigationVerdict))
def test_pure_row_investigator(verdict: InvestigationVerdict) -> None:
    assert after_perf_investigator(verdict) is Outcome.COMPLETE
