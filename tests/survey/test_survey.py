"""`tileport survey`: the rows, totals and markdown on rows written here; the command
on a tiny library written here (a kernel that ports COMPILED, one BLOCKED at a reduce,
one whose file is gone), each kernel's row where it stopped."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from app.cli import build_parser
from nodes.survey import bundle_outcomes, survey_markdown
from schemas.exit_codes import ExitCode
from schemas.launch_capture import LaunchRecord
from schemas.survey import KernelRow, SurveyLayout, SurveyReport, SurveyStage, SurveyTotals
from toolchain.env import rs_export_binary

OPS = """\
import cuda.tile as ct


@ct.kernel
def scale_kernel(x, y, TILE: ct.Constant[int]):
    block = ct.bid(0)
    tile = ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(block,), tile=tile * 2.0)


@ct.kernel
def bit_union_kernel(x, out, TILE: ct.Constant[int]):
    block = ct.bid(0)
    tx = ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    union = ct.reduce(tx, 0, lambda a, b: a | b, 0, keepdims=True)
    ct.store(out, index=(block,), tile=union)
"""


def row(kernel: str, stage: SurveyStage, verdict: str, detail: str = "") -> KernelRow:
    return KernelRow(
        kernel=kernel, file="lib/ops.py", spec=kernel, stage=stage, verdict=verdict, detail=detail
    )


ROWS = [
    row("a", SurveyStage.SPECS, "NO_SPEC", "no module 'lib.gone' under the source root"),
    row("b", SurveyStage.PORT, "BLOCKED", "reduce at ops.py:15:12: cutile-rs reduces only"),
    row("c", SurveyStage.PORT, "COMPILED", "IR exact, SASS-identical sm_90/sm_100"),
    row("d", SurveyStage.CONVERT, "FAIL", "stopped after host_builder FAIL (host) | x"),
    row("e", SurveyStage.CONVERT, "AWAITING_GPU", "awaiting a GPU"),
    row("f", SurveyStage.BUNDLE, "SKIPPED", "its library does not hold f"),
    row("g", SurveyStage.BUNDLE, "BUNDLED", "bundle out/bundles/g"),
]


def test_a_kernel_passes_each_stage_before_the_one_it_reached() -> None:
    blocked, compiled, bundled = ROWS[1], ROWS[2], ROWS[6]
    assert blocked.passed(SurveyStage.SPECS) and not blocked.passed(SurveyStage.PORT)
    assert compiled.passed(SurveyStage.PORT) and not compiled.passed(SurveyStage.CONVERT)
    assert all(bundled.passed(stage) for stage in SurveyStage)
    assert not ROWS[0].passed(SurveyStage.SPECS)
    assert SurveyTotals.of(ROWS) == SurveyTotals(
        kernels=7, specs_written=6, compiled=5, at_gpu_boundary=3, bundled=1
    )


def test_a_report_is_through_only_when_every_kernel_is() -> None:
    report = SurveyReport.of("tileport survey l.jsonl", SurveyStage.PORT, ROWS[2:])
    assert report.every_kernel_through
    assert not SurveyReport.of("c", SurveyStage.PORT, ROWS).every_kernel_through
    assert not SurveyReport.of("c", SurveyStage.PORT, []).every_kernel_through
    wrong = SurveyTotals(kernels=1, specs_written=0, compiled=0, at_gpu_boundary=0, bundled=0)
    with pytest.raises(ValueError, match="the totals must count the rows"):
        SurveyReport(command="c", through=SurveyStage.PORT, rows=[], totals=wrong)
    assert SurveyReport.model_validate_json(report.model_dump_json()) == report


def test_the_markdown_has_a_row_per_kernel_and_the_totals() -> None:
    report = SurveyReport.of("tileport survey l.jsonl", SurveyStage.BUNDLE, ROWS, "out/b.tar.xz")
    text = survey_markdown(report)
    assert "    tileport survey l.jsonl" in text
    assert (
        "| b | lib/ops.py | port | BLOCKED | reduce at ops.py:15:12: cutile-rs reduces only |"
        in (text)
    )
    assert "stopped after host_builder FAIL (host) \\| x" in text  # one cell, not two
    assert text.count("\n| ") == 1 + len(ROWS)  # the header and the rows
    assert (
        "Totals: 7 kernel(s): 6 spec(s) written, 5 COMPILED, 3 at the GPU boundary, "
        "1 bundled." in text
    )
    assert "GPU job archive: out/b.tar.xz." in text


def test_runs_short_of_the_gpu_boundary_are_skipped_by_the_bundle_step(tmp_path: Path) -> None:
    runs = {"a": tmp_path / "runs" / "a", "b": tmp_path / "runs" / "b"}
    for run_dir in runs.values():
        run_dir.mkdir(parents=True)
    outcomes = bundle_outcomes(runs, SurveyLayout(tmp_path), time_all_configs=False)
    assert {name: outcome.verdict for name, outcome in outcomes.items()} == {
        "a": "SKIPPED",
        "b": "SKIPPED",
    }
    assert outcomes["a"].detail.startswith("not a finished run")
    assert not (tmp_path / "bundles.tar.xz").exists()


def write_library(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "ops.py").write_text(textwrap.dedent(OPS))
    return root


def tensor(n: int, dtype: str = "float32") -> dict[str, object]:
    return {
        "kind": "tensor",
        "dtype": dtype,
        "shape": [n],
        "stride": [1],
        "align16": True,
        "contig": True,
    }


def record(
    kernel: str,
    file: str,
    arrays: list[str],
    line: int,
    tensors: list[dict[str, object]] | None = None,
) -> LaunchRecord:
    return LaunchRecord.model_validate(
        {
            "test": "tests/test_ops.py::test",
            "kernel": kernel,
            "file": file,
            "line": line,
            "grid": [4, 1, 1],
            "params": [*arrays, "TILE"],
            "args": [
                *(tensors or [tensor(1000) for _ in arrays]),
                {"kind": "int", "value": 256},
            ],
        }
    )


RECORDS = [
    record("scale_kernel", "lib/ops.py", ["x", "y"], 4),
    # Each block's 256 words OR to one.
    record(
        "bit_union_kernel",
        "lib/ops.py",
        ["x", "out"],
        11,
        [tensor(1024, "int32"), tensor(4, "int32")],
    ),
    record("gone_kernel", "lib/gone.py", ["x", "y"], 4),
]


def run_survey(launches: Path, source_root: Path, out: Path, *options: str) -> int:
    argv = ["survey", str(launches), "--source-root", str(source_root), "--out", str(out)]
    args = build_parser().parse_args([*argv, *options])
    code: int = args.handler(args)
    return code


def survey(tmp_path: Path, records: list[LaunchRecord], *options: str) -> int:
    """The survey of `records` of the library under tmp_path/src into tmp_path/survey."""
    launches = tmp_path / "launches.jsonl"
    launches.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return run_survey(launches, tmp_path / "src", tmp_path / "survey", *options)


def surveyed(tmp_path: Path) -> SurveyReport:
    return SurveyReport.model_validate_json((tmp_path / "survey" / "survey.json").read_text())


def test_kernels_without_a_spec_have_their_row_and_the_command_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_library(tmp_path)
    outside = record("helper_kernel", str(tmp_path / "helper.py"), ["x", "y"], 4)
    assert survey(tmp_path, [RECORDS[2], outside]) == ExitCode.FAILED
    out = capsys.readouterr().out
    assert "[1/2] gone_kernel (lib/gone.py): specs NO_SPEC" in out
    assert "[2/2] helper_kernel" in out and "exit 1: some kernel did not" in out
    report = surveyed(tmp_path)
    assert report.through is SurveyStage.BUNDLE and report.archive is None
    assert [(r.kernel, r.stage, r.verdict) for r in report.rows] == [
        ("gone_kernel", "specs", "NO_SPEC"),
        ("helper_kernel", "specs", "NO_SPEC"),
    ]
    assert report.rows[0].detail.startswith("no module 'lib.gone' under the source root")
    root = (tmp_path / "src").resolve()
    assert report.rows[1].detail == f"its file is outside the source root {root}"
    assert report.command.startswith("tileport survey ") and "--through bundle" in report.command
    assert (
        "| gone_kernel | lib/gone.py | specs | NO_SPEC |"
        in (tmp_path / "survey" / "survey.md").read_text()
    )


def test_bad_input_surveys_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_library(tmp_path)
    assert survey(tmp_path, RECORDS, "--kernel", "nope") == ExitCode.BAD_INPUT
    assert "tileport survey: no record of kernel nope" in capsys.readouterr().err
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text("{not json\n")
    code = run_survey(malformed, tmp_path / "src", tmp_path / "survey")
    assert code == ExitCode.BAD_INPUT
    assert f"{malformed}:1: not JSON" in capsys.readouterr().err
    bare = tmp_path / "bare"
    bare.mkdir()
    assert survey(bare, RECORDS) == ExitCode.BAD_INPUT
    assert f"the source root {bare / 'src'} is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "survey").exists() and not (bare / "survey").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
)
def test_each_kernel_stops_where_its_stage_says(tmp_path: Path) -> None:
    write_library(tmp_path)
    assert survey(tmp_path, RECORDS, "--through", "port") == ExitCode.FAILED
    report = surveyed(tmp_path)
    rows = {r.kernel: r for r in report.rows}
    assert [(r.kernel, r.stage, r.verdict) for r in report.rows] == [
        ("scale_kernel", "port", "COMPILED"),
        ("bit_union_kernel", "port", "BLOCKED"),
        ("gone_kernel", "specs", "NO_SPEC"),
    ]
    assert "SASS-identical" in rows["scale_kernel"].detail
    assert rows["bit_union_kernel"].detail.startswith("reduce at ops.py:15:12: ")
    assert rows["scale_kernel"].spec == "scale_kernel" and rows["gone_kernel"].spec is None
    assert report.totals == SurveyTotals(
        kernels=3, specs_written=2, compiled=1, at_gpu_boundary=0, bundled=0
    )
    assert (tmp_path / "survey" / "ports" / "scale_kernel" / "kernel.rs").is_file()
    assert not (tmp_path / "survey" / "runs").exists()
    print((tmp_path / "survey" / "survey.md").read_text())
