"""Stage A on real kernels: the spec is validated against the source, the
reference IR is exported for real (cuTile's AOT compiler, no GPU) and
analysis.json is written and read back through its schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from stage_support import EXAMPLES, copy_example, fresh_state

from nodes.analyzer import run
from nodes.analyzer.baselines import time_baselines
from nodes.analyzer.stage import analyse
from schemas.pipeline import RunOptions, Stage
from schemas.port_spec import load_port_spec
from schemas.reports import (
    AnalysisReport,
    BaselineTiming,
    KernelAnalysis,
    KernelPattern,
    ReferenceBackend,
    load_report,
    save_report,
)
from schemas.run_layout import RunLayout
from schemas.verdicts import AnalyzerVerdict


def edit_spec(spec: Path, **changes: object) -> None:
    data = yaml.safe_load(spec.read_text())
    data.update(changes)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


def test_softmax_analysis_is_complete_and_round_trips(tmp_path: Path) -> None:
    state = fresh_state(EXAMPLES / "softmax.port.yaml", tmp_path / "run")
    report = run(state).report
    assert isinstance(report, AnalysisReport)
    assert report.verdict is AnalyzerVerdict.PASS, report.problems
    layout = RunLayout(tmp_path / "run")
    save_report(report, layout)
    loaded = load_report(AnalysisReport, layout)
    analysis = loaded.analysis
    assert analysis is not None and loaded == report

    spec = load_port_spec(EXAMPLES / "softmax.port.yaml")
    assert analysis.kernel_name == "softmax_kernel"
    assert analysis.pattern is KernelPattern.SINGLE
    assert analysis.reference_backend is ReferenceBackend.CUTILE_PYTHON
    # Tolerances are the spec's, untouched.
    assert {d: (t.atol, t.rtol, t.source) for d, t in analysis.tolerances.items()} == {
        d: (t.atol, t.rtol, t.source) for d, t in spec.tolerances.items()
    }
    assert [c.id for c in analysis.configs] == [c.name for c, _ in spec.all_configs()]
    assert set(analysis.config_variants.values()) == {"row"}
    ragged = next(c for c in analysis.configs if c.id == "ragged_f32")
    assert ragged.shapes == {"x": [37, 1000], "y": [37, 1000]}
    assert ragged.constants == {"TILE_N": 1024}

    (variant,) = analysis.variants
    assert variant.dispatch_condition == "always"
    ir = layout.resolve(variant.reference_ir)
    assert ir.is_file() and "load_view_tko" in ir.read_text()
    assert (layout.reference_dir / "row.bytecode").is_file()
    x = next(a for a in variant.arrays if a.name == "x")
    assert x.stride_constant == [None, 1] and x.base_addr_divisible_by == 16

    assert analysis.ops.padding_modes == ["neg_inf"]
    assert "ct.exp" in analysis.ops.ops and "cuda_tile.reduce" in analysis.ops.ops
    assert any(low.target == "float32" for low in analysis.ops.dtype_lowering)
    assert analysis.ops.check_bounds and not analysis.ops.uses_cdiv
    assert analysis.entry_symbols.c_symbol == "cutile_softmax"
    assert analysis.baselines == []

    notes = "\n".join(report.notes)
    assert "constant TILE_N takes 1024, 2048, 4096, 512" in notes
    assert "Triton-TileIR: not installed" in notes
    assert "baselines not timed" in notes
    log = layout.stage_log(Stage.ANALYZER, 1).read_text()
    assert "verdict: PASS" in log


def test_multi_variant_kernel_with_a_constant_branch(tmp_path: Path) -> None:
    report = run(fresh_state(EXAMPLES / "transpose.port.yaml", tmp_path / "run")).report
    assert isinstance(report, AnalysisReport)
    assert report.verdict is AnalyzerVerdict.PASS, report.problems
    analysis = report.analysis
    assert analysis is not None
    assert analysis.pattern is KernelPattern.MULTI_VARIANT
    conditions = {v.name: v.dispatch_condition for v in analysis.variants}
    assert conditions == {"by_order": "dtype != 'float32'", "by_permute": "otherwise"}
    assert analysis.config_variants["ragged_f32"] == "by_permute"
    assert analysis.config_variants["ragged_f16"] == "by_order"
    assert {v.name: v.constants["VIA_ORDER"] for v in analysis.variants} == {
        "by_order": True,
        "by_permute": False,
    }
    assert analysis.entry_symbols.rust_entries == {
        "by_order": "transpose_kernel_by_order",
        "by_permute": "transpose_kernel_by_permute",
    }
    assert analysis.ops.uses_cdiv  # the grid is cdiv(M, TILE_M) x cdiv(N, TILE_N)
    assert any(
        "`if VIA_ORDER` (transpose.py:17): by_order: taken; by_permute: not taken" in note
        for note in report.notes
    )
    layout = RunLayout(tmp_path / "run")
    assert (
        layout.reference_ir("by_order").read_text() != layout.reference_ir("by_permute").read_text()
    )


def test_a_variant_spanning_both_sides_of_a_constant_branch_is_fixable(tmp_path: Path) -> None:
    spec = copy_example("transpose", tmp_path)
    edit_spec(
        spec,
        variants=[{"name": "both", "constants": {"VIA_ORDER": "dtype != 'float32'"}}],
    )
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    (problem,) = report.problems
    assert problem.startswith("variants.both: its configurations take both sides of")
    assert "`if VIA_ORDER` (transpose.py:17)" in problem
    assert "ragged_f16: True" in problem and "ragged_f32: False" in problem
    assert not any(RunLayout(tmp_path / "run").reference_dir.iterdir())  # nothing exported


def test_invalid_spec_names_each_field(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    edit_spec(spec, grid=[], tolerances={})
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    fields = [problem.split(":")[0] for problem in report.problems]
    assert "grid" in fields and "tolerances" in fields
    assert report.summary.startswith("fix the port spec: ")


def test_missing_spec_file_is_fixable(tmp_path: Path) -> None:
    report = analyse(fresh_state(tmp_path / "absent.port.yaml", tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    assert report.problems[0].startswith("(file):")


def test_spec_and_kernel_parameters_must_agree(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["arrays"]["out"] = data["arrays"].pop("y")
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    assert any("kernel parameter 'y' (softmax.py:" in p for p in report.problems)
    assert any(p.startswith("arrays.out: softmax_kernel") for p in report.problems)


def test_unknown_kernel_name_is_fixable(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    edit_spec(spec, kernel="softmax_kernal")
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    assert report.problems[0].startswith("kernel: softmax.py defines no function 'softmax_kernal'")


def test_missing_source_is_fixable(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    edit_spec(spec, source="nowhere.py")
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.FAIL_FIXABLE
    assert report.problems[0].startswith("source: cannot read nowhere.py")


def test_kernel_that_does_not_compile_is_blocked_with_its_line(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    source = tmp_path / "softmax.py"
    text = source.read_text().replace(
        "numerator = ct.exp(tile - row_max)", "numerator = ct.exp(tile - undefined_max)"
    )
    source.write_text(text)
    line = text.splitlines().index("    numerator = ct.exp(tile - undefined_max)") + 1
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.BLOCKED
    assert report.summary.startswith(
        f"softmax.py:{line}: the kernel does not export (compile_error"
    )
    assert "undefined_max" in report.summary


def test_syntax_error_is_blocked_with_its_line(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    source = tmp_path / "softmax.py"
    lines = source.read_text().splitlines()
    lines[15] = "    row_max = ct.max(tile, axis=1 keepdims=True)"
    source.write_text("\n".join(lines) + "\n")
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.BLOCKED
    assert report.summary.startswith("softmax.py:16: the kernel does not export: syntax error")


def test_triton_reference_is_blocked_not_faked(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    edit_spec(spec, reference_backend="triton_tileir")
    report = analyse(fresh_state(spec, tmp_path / "run"))
    assert report.verdict is AnalyzerVerdict.BLOCKED
    assert "only cuTile Python references can be exported" in report.summary


def test_baselines_join_the_analysis_when_a_runner_times_them(tmp_path: Path) -> None:
    """The plumbing only: a scripted runner stands in for the GPU job."""

    def scripted_runner(
        spec: Path, analysis: KernelAnalysis, run_dir: Path
    ) -> list[BaselineTiming]:
        return [
            BaselineTiming(
                config_id="perf_4k_x_4k_f16",
                variant="row",
                backend=ReferenceBackend.CUTILE_PYTHON,
                median_us=12.5,
                gpu="scripted",
            )
        ]

    def timer(spec: Path, analysis: KernelAnalysis, run_dir: Path, no_gpu: bool):  # type: ignore[no-untyped-def]
        return time_baselines(
            spec,
            analysis,
            run_dir,
            no_gpu=no_gpu,
            gpu=lambda: "scripted",
            timer=lambda: scripted_runner,
        )

    state = fresh_state(
        EXAMPLES / "softmax.port.yaml", tmp_path / "run", options=RunOptions(no_gpu=False)
    )
    report = analyse(state, timer=timer)
    assert report.analysis is not None
    assert [b.median_us for b in report.analysis.baselines] == [12.5]
    assert "1 baseline timing(s) on scripted" in report.notes


@pytest.mark.parametrize(
    ("no_gpu", "gpu", "runner", "expected"),
    [
        (True, "H200", True, "--no-gpu was given"),
        (False, None, True, "no GPU on this machine"),
        (
            False,
            "H200",
            False,
            "no runner provides nodes.host_builder.bundle.time_reference_baselines",
        ),
    ],
)
def test_baselines_say_why_they_are_absent(
    tmp_path: Path, no_gpu: bool, gpu: str | None, runner: bool, expected: str
) -> None:
    called: list[str] = []

    def never(spec: Path, analysis: KernelAnalysis, run_dir: Path) -> list[BaselineTiming]:
        called.append("runner")
        return []

    outcome = time_baselines(
        tmp_path,
        None,  # type: ignore[arg-type]
        tmp_path,
        no_gpu=no_gpu,
        gpu=lambda: gpu,
        timer=lambda: never if runner else None,
    )
    assert outcome.timings == [] and expected in outcome.note
    assert called == []


def test_rerun_in_the_same_directory_starts_clean(tmp_path: Path) -> None:
    spec = copy_example("softmax", tmp_path)
    run_dir = tmp_path / "run"
    first = analyse(fresh_state(spec, run_dir))
    assert first.verdict is AnalyzerVerdict.PASS
    stale = RunLayout(run_dir).reference_dir / "stale.mlir"
    stale.write_text("old")
    second = analyse(fresh_state(spec, run_dir))
    assert second.verdict is AnalyzerVerdict.PASS
    assert not stale.exists()
