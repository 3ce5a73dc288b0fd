"""`tileport port-kernel` end to end: real cuTile Python exports, the resident
Rust exporter, tileiras on both targets and rustc. A port is COMPILED only
when every configuration of every variant is exact and SASS-identical."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from app import cli_port
from nodes.kernel_writer import run
from nodes.kernel_writer.module import EntryCode
from nodes.kernel_writer.stage import KERNEL_FILE, _Lifted, _Porter, port_kernel
from schemas.exit_codes import ExitCode
from schemas.kernel_writer import REPORT_FILE, ConfigCheck, PortReport, TargetCheck
from schemas.reports import KernelWriterReport
from schemas.state import PipelineState
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import REPO_ROOT, rs_export_binary

FIXTURES = Path(__file__).parent / "fixtures" / "kernels"
CORPUS = REPO_ROOT / "examples" / "kernels"

pytestmark = pytest.mark.skipif(
    not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
)


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    cli_port.register(commands)
    args = parser.parse_args(["port-kernel", *argv])
    code: int = args.handler(args)
    return code


@pytest.fixture(scope="module")
def small_add(tmp_path_factory: pytest.TempPathFactory) -> tuple[PortReport, Path]:
    out = tmp_path_factory.mktemp("small_add")
    return port_kernel(FIXTURES / "small_add.port.yaml", out), out


@pytest.mark.slow
def test_small_add_is_compiled(small_add: tuple[PortReport, Path]) -> None:
    report, out = small_add
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical and report.rustc_check
    assert {c.config for c in report.checks} == {"tile512__ragged_f32", "tile512__exact_f16"}
    for check in report.checks:
        assert {t.target for t in check.targets} == {"sm_90", "sm_100"}
        assert check.generated_ir is not None and (out / check.generated_ir).exists()
    assert report.llm_tokens == 0
    assert json.loads((out / REPORT_FILE).read_text())["verdict"] == "COMPILED"


def test_small_add_generics_are_recovered(small_add: tuple[PortReport, Path]) -> None:
    report, out = small_add
    kinds = {g.name: g.kind for g in report.generics}
    assert kinds["E"] == "dtype" and kinds["TILE"] == "constant"
    assert "512 -> " in next(g.how for g in report.generics if g.name == "TILE")
    kernel = (out / KERNEL_FILE).read_text()
    assert "E: ElementType" in kernel and "const TILE: i32" in kernel
    assert "Tile<E, { [TILE] }>" in kernel
    assert "let (ta, _ta_token): (Tile<E, { [TILE] }>, Token)" in kernel  # source names
    assert "convert_tile(ta)" in kernel  # astype(float32) is free when E = f32
    assert report.entries[0].generics[0] == "E: ElementType"


@pytest.mark.slow
def test_a_constant_bounding_a_loop_stays_generic(tmp_path: Path) -> None:
    # `for off in range(0, N, TILE)`: a generic bound goes through `loop_bound`, so
    # cutile-rs assumes nothing of the loop variable (G16) and one entry serves every N.
    # `cols < N` and `/ N` are N as a splat tile and as a float: converted, not literal.
    report = port_kernel(FIXTURES / "row_mean_loop.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert all(c.sass_identical for c in report.checks)
    assert {g.name for g in report.generics if g.kind == "constant"} == {"N", "TILE"}
    assert not report.literal_entries
    kernel = (tmp_path / KERNEL_FILE).read_text()
    assert "loop_bound(" in kernel and "const N: i32" in kernel
    assert "itof(scalar_to_tile::<i32>(generic_value::<N>())" in kernel
    assert ".broadcast(shape![TILE])" in kernel


@pytest.mark.slow
def test_a_number_the_kernel_derives_from_constants_is_a_generic_of_its_own(
    tmp_path: Path,
) -> None:
    # `tiles = (N + TILE - 1) // TILE` bounds the loop (cuTile folds it to a number that
    # follows no single constant) and `partial = N % TILE != 0` picks the gathers' bounds
    # check (a structure, so the spec has a variant per side). Probes keep each variant
    # on its side and move `tiles`: one entry per side serves every width.
    report = port_kernel(FIXTURES / "row_absmax_tiles.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert all(c.sass_identical for c in report.checks)
    derived = {g.name: g.source for g in report.generics if g.kind == "derived"}
    assert derived == {"tiles": "(N + TILE - 1) // TILE"}  # the local's own name
    assert not report.literal_entries
    kernel = (tmp_path / KERNEL_FILE).read_text()
    assert "const tiles: i32" in kernel and "generic_value::<tiles>()" in kernel
    # No variable of the body takes the generic's name (a `let` may not shadow it).
    assert "let tiles:" not in kernel
    args = {c.config: c.generic_args for c in report.checks}
    # The width 200 takes four tiles of 64; 70 takes two.
    assert "4" in args["partial__partial_f32"] and "2" in args["partial__partial_f16"]


def test_an_unproven_generic_variant_is_made_literal() -> None:
    def check(config: str, variant: str, identical: bool) -> ConfigCheck:
        targets = [TargetCheck(target=t, sass_identical=identical) for t in ("sm_90", "sm_100")]
        return ConfigCheck(
            config=config,
            variant=variant,
            entry="k",
            generic_args=[],
            exact=False,
            ir_level="different",
            targets=targets,
        )

    checks = [check("a__t0", "a", True), check("a__t1", "a", False), check("b__t0", "b", False)]
    generic = _Lifted(cast(EntryCode, None), "a", generic_constants=("N",))
    literal = _Lifted(cast(EntryCode, None), "b")
    # Only a generic entry falls back; a literal one that fails is the port's failure.
    unproven = _Porter.unproven_generic_variants([generic, literal], checks)
    assert {variant: c.config for variant, c in unproven.items()} == {"a": "a__t1"}
    assert not _Porter.unproven_generic_variants([generic], checks[:1])


@pytest.mark.slow
def test_floor_division_fix_up_keeps_its_false_constant(tmp_path: Path) -> None:
    # cuTile's `//` and `%` fix-up XORs with a `false` constant; cutile-rs's own
    # `constant(false, ..)` emits `true` (UPSTREAM_GAPS.md G14).
    report = port_kernel(FIXTURES / "head_split.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert all(c.level == "exact" for c in report.checks)
    assert "constant(false" not in (tmp_path / KERNEL_FILE).read_text()


def test_unlifted_reduce_is_blocked_with_its_source_location(tmp_path: Path) -> None:
    # UPSTREAM_GAPS.md G4: a reduce is lifted to reduce_sum/max/min/prod only.
    report = port_kernel(FIXTURES / "bit_union.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.BLOCKED
    [blocked] = report.blocked
    assert blocked.op == "reduce"
    assert blocked.location == "bit_union.py:14:12"
    assert "reduces only with reduce_sum/max/min/prod" in blocked.missing
    assert not (tmp_path / KERNEL_FILE).exists()


@pytest.mark.parametrize(
    ("fixture", "op", "location", "missing"),
    [
        # docs/UPSTREAM_GAPS.md G5: cutile-rs 0.5.0 scans along dim 0 only.
        ("row_scan_axis1", "scan", "row_scan_axis1.py:18:18", "only along dim 0"),
        # G8: cutile-rs threads every carried value through an `if` that breaks.
        ("expert_search_break", "if", "expert_search_break.py:27:8", "a break or continue"),
    ],
)
def test_unsupported_construct_is_blocked_where_it_is(
    fixture: str, op: str, location: str, missing: str, tmp_path: Path
) -> None:
    report = port_kernel(FIXTURES / f"{fixture}.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.BLOCKED
    [blocked] = report.blocked
    assert (blocked.op, blocked.location) == (op, location)
    assert missing in blocked.missing
    assert not (tmp_path / KERNEL_FILE).exists()


def test_cli_reports_json_and_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(str(FIXTURES / "bit_union.port.yaml"), "--out", str(tmp_path), "--json")
    assert code == ExitCode.STAGE_FAILED  # as in tileport convert
    assert json.loads(capsys.readouterr().out)["verdict"] == "BLOCKED"


def test_cli_rejects_a_bad_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.port.yaml"
    spec.write_text("spec_version: 1\nname: bad\n")
    assert run_cli(str(spec), "--out", str(tmp_path / "out")) == ExitCode.BAD_INPUT
    assert "invalid port spec" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec", sorted(CORPUS.glob("*.port.yaml")), ids=lambda p: p.name.removesuffix(".port.yaml")
)
def test_corpus_kernel_ports(spec: Path, tmp_path: Path) -> None:
    report = port_kernel(spec, tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert all(c.exact and c.sass_identical for c in report.checks)


def _state(spec: Path, run_dir: Path) -> PipelineState:
    return PipelineState(
        run_id="run-kw",
        operator=spec.name.removesuffix(".port.yaml"),
        spec_path=str(spec),
        run_dir=str(run_dir),
        started_at=datetime.now(UTC),
    )


@pytest.mark.slow
def test_stage_node_reports_for_the_pipeline(tmp_path: Path) -> None:
    state = _state(FIXTURES / "small_add.port.yaml", tmp_path)
    result = run(state)
    report = result.report
    assert isinstance(report, KernelWriterReport)
    assert report.verdict is KernelWriterVerdict.COMPILED
    assert report.kernel_rs == "generated/kernel.rs"
    assert report.generated_ir == {"tile512": "generated/tile512.mlir"}
    assert report.pipeline_check_passed and report.ir_self_check_passed
    layout = state.layout()
    for path in [report.kernel_rs, *report.generated_ir.values(), report.build_log]:
        assert path is not None and layout.resolve(path).is_file()
    assert (layout.generated_dir / REPORT_FILE).is_file()  # read by the IR-diff analyst


def test_stage_node_reports_blocked_constructs(tmp_path: Path) -> None:
    report = run(_state(FIXTURES / "bit_union.port.yaml", tmp_path)).report
    assert isinstance(report, KernelWriterReport)
    assert report.verdict is KernelWriterVerdict.BLOCKED
    assert report.unsupported_constructs == [
        "reduce at bit_union.py:14:12: cutile-rs reduces only with reduce_sum/max/min/prod "
        "(add/max/min/mul, no flags, their own identity): its closure `reduce` ignores the dim "
        "and identity"
    ]
    assert report.kernel_rs is None and not report.generated_ir
