"""`tileport tilegym sweep`: calls drawn from what an op's cutile implementation
accepts, read from TileGym's unmodified source (--plan needs no GPU): extents of 1,
ragged and unaligned ones, every dtype, every mode the source compares; a seed
repeats its draws and a new one changes them; an op whose parameter no rule draws
is refused by name; without a GPU the sweep says so and runs nothing; served,
mismatched and refused calls are counted apart, the oracle's refusals not at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.tilegym_backend.call_cost import render_markdown
from nodes.tilegym_backend.sweep import (
    SweepError,
    compared_strings,
    draw_calls,
    markdown,
    merge_reports,
    read_signature,
    summarise,
)
from schemas.tilegym_backend import (
    CallCost,
    CallCostReport,
    SweepCall,
    SweepCallResult,
    SweepOutcome,
    SweepReport,
)
from toolchain.env import REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
OPS = ("relu", "softmax", "rms_norm", "gelu", "layer_norm_legacy")
needs_tilegym = pytest.mark.skipif(
    not (TILEGYM / "src/tilegym/ops/cutile").is_dir(), reason=f"no TileGym checkout at {TILEGYM}"
)


def sweep(*args: str, tilegym: Path | None = TILEGYM) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "app.cli", "tilegym", "sweep", *args]
    return subprocess.run(
        [*command, *(["--tilegym", str(tilegym)] if tilegym else [])],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )


def planned(*args: str) -> list[dict[str, object]]:
    done = sweep(*OPS, "--plan", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@needs_tilegym
def test_the_draws_cover_what_the_ops_accept() -> None:
    calls = planned("--calls", "60", "--seed", "11")
    assert [c["op"] for c in calls] == [op for op in OPS for _ in range(60)]
    extents = [extent for c in calls for extent in c["shape"]]  # type: ignore[attr-defined]
    assert 1 in extents
    assert any(e % 16 and e > 16 for e in extents)  # ragged, unaligned
    assert max(extents) > 1024
    assert {c["dtype"] for c in calls} == {"float32", "float16", "bfloat16"}
    modes = {c["arguments"]["mode"] for c in calls if c["op"] == "rms_norm"}  # type: ignore[index]
    assert modes == {None, "static_persistent", "multi_wave_reload", "multi_wave_cached"}
    approximations = {c["arguments"]["approximate"] for c in calls if c["op"] == "gelu"}  # type: ignore[index]
    assert approximations == {"none", "tanh"}
    norm = next(c for c in calls if c["op"] == "layer_norm_legacy")
    assert norm["arguments"] == {  # type: ignore[comparison-overlap]
        "normalized_shape": norm["shape"][-1],  # type: ignore[index]
        "weight": "tensor",
        "bias": "tensor",
        "eps": 1e-5,
    }


@needs_tilegym
def test_a_seed_repeats_its_draws_and_a_new_one_changes_them() -> None:
    signature = read_signature(TILEGYM / "src", "rms_norm")
    assert draw_calls(signature, 3, 5) == draw_calls(signature, 3, 5)
    assert draw_calls(signature, 3, 5) != draw_calls(signature, 4, 5)


def test_a_parameter_no_rule_draws_refuses_the_op(tmp_path: Path) -> None:
    module = tmp_path / "src/tilegym/ops/cutile/odd.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        'from tilegym.backend import register_impl\n\n\n@register_impl("odd", backend="cutile")\n'
        "def odd(x, table, flag=False):\n    return x\n"
    )
    done = sweep("odd", "--plan", tilegym=tmp_path)
    assert done.returncode == 2
    assert "odd: no rule draws its parameter 'table'" in done.stderr
    missing = sweep("absent", "--plan", tilegym=tmp_path)
    assert missing.returncode == 2 and "absent" in missing.stderr


@needs_tilegym
def test_without_a_gpu_nothing_runs(tmp_path: Path) -> None:
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU")
    done = sweep("relu", "--calls", "1", "--out", str(tmp_path))
    assert done.returncode == 4
    assert "skipped: no GPU" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_call_cost_needs_a_gpu_and_tables_what_it_measured(tmp_path: Path) -> None:
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU")
    command = [sys.executable, "-m", "app.cli", "tilegym", "call-cost", "relu"]
    done = subprocess.run(
        [*command, "--tilegym", str(tmp_path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 4 and "skipped: no GPU" in done.stderr
    assert not (tmp_path / "out").exists()
    cost = CallCost(
        op="relu",
        shape=[1024, 1024],
        symbol="cutile_relu",
        calls=2000,
        cutile_op_us=34.1,
        port_op_us=70.9,
        cutile_stream_us=35.0,
        port_stream_us=71.2,
        launch_us=50.2,
        symbol_us=41.0,
        ct_launch_us=3.5,
        empty_launch_us=9.1,
        cutile_host_code_us=30.6,
        port_host_code_us=30.9,
    )
    report = CallCostReport(date="2026-12-06", gpu="H", driver="580", command="c", ops=[cost])
    table = render_markdown(report)
    row = "| relu | 1024x1024 | 34.1 | 35.0 | 70.9 | 71.2 | 50.2 | 41.0 | 3.5 | 9.1 | 30.6 | 30.9 |"
    assert row in table


def test_modes_are_the_strings_the_source_compares() -> None:
    import ast

    tree = ast.parse('if mode == "a":\n    pass\nelif "b" != mode or other == "c":\n    pass\n')
    assert compared_strings(tree, "mode") == ["a", "b"]
    assert compared_strings(tree, "absent") == []


def test_outcomes_are_counted_apart_and_the_oracles_refusals_not_at_all() -> None:
    call = SweepCall(op="relu", shape=[3, 5], dtype="bfloat16", seed=1)
    view = SweepCall(op="relu", shape=[1, 32], dtype="float32", seed=2, offset=1)
    results = [
        SweepCallResult(call=call, outcome=SweepOutcome.SERVED, port_us=10.0, cutile_us=20.0),
        SweepCallResult(call=call, outcome=SweepOutcome.SERVED, port_us=30.0, cutile_us=40.0),
        SweepCallResult(call=call, outcome=SweepOutcome.MISMATCH, port_us=50.0, cutile_us=60.0),
        SweepCallResult(call=view, outcome=SweepOutcome.REFUSED, detail="RuntimeError: rc=-6"),
        SweepCallResult(call=call, outcome=SweepOutcome.ORACLE_REFUSED, detail="ValueError"),
    ]
    summary = summarise("relu", results)
    assert (summary.calls, summary.served, summary.mismatches, summary.refused) == (4, 2, 1, 1)
    # Times are the medians of the calls that ran, the mismatched one included.
    assert (summary.port_us_median, summary.cutile_us_median) == (30.0, 40.0)
    report = SweepReport(
        date="2026-12-05",
        seed=7,
        gpu="NVIDIA H200",
        driver="580",
        command="tileport tilegym sweep relu",
        calls=4,
        served=2,
        refused=1,
        mismatches=1,
        ops=[summary],
        results=results,
    )
    table = markdown(report)
    assert "| relu | 4 | 2 | 1 | 1 | 30.0 | 40.0 |" in table
    assert "| relu: RuntimeError: rc=-N | 1 |" in table
    assert (
        "Drawn: 1 with an input not 16-byte aligned, 1 with an extent of 1, 3 with a ragged "
        "extent (not a multiple of 16); float32 1, float16 0, bfloat16 3." in table
    )


def _part(op: str, seed: int, outcomes: list[SweepOutcome]) -> SweepReport:
    call = SweepCall(op=op, shape=[3, 5], dtype="float16", seed=1)
    results = [SweepCallResult(call=call, outcome=o, port_us=1.0, cutile_us=2.0) for o in outcomes]
    summary = summarise(op, results)
    return SweepReport(
        date="2026-12-06",
        seed=seed,
        gpu="NVIDIA H200",
        driver="580",
        command=f"tileport tilegym sweep {op} --seed {seed}",
        calls=summary.calls,
        served=summary.served,
        refused=summary.refused,
        mismatches=summary.mismatches,
        ops=[summary],
        results=results,
    )


def test_parts_of_one_sweep_merge_into_one_report(tmp_path: Path) -> None:
    served, refused = SweepOutcome.SERVED, SweepOutcome.REFUSED
    relu, gelu = _part("relu", 9, [served, served]), _part("gelu", 9, [served, refused])
    merged = merge_reports([relu, gelu])
    assert (merged.calls, merged.served, merged.refused) == (4, 3, 1)
    assert [s.op for s in merged.ops] == ["relu", "gelu"] and len(merged.results) == 4
    with pytest.raises(SweepError, match="seed"):
        merge_reports([relu, _part("gelu", 10, [served])])
    # An op run again with more time: the longer run of the same draws is kept.
    longer = _part("gelu", 9, [served, refused, served])
    again = merge_reports([relu, gelu, longer])
    assert [(s.op, s.calls) for s in again.ops] == [("relu", 2), ("gelu", 3)]
    assert len(again.results) == 5 and merge_reports([relu, longer, gelu]) == again
    other = longer.model_copy(
        update={
            "results": [
                r.model_copy(update={"call": r.call.model_copy(update={"seed": 2})})
                for r in longer.results
            ]
        }
    )
    with pytest.raises(SweepError, match="gelu: in several parts with other calls"):
        merge_reports([gelu, other])
    # From the command line, into --out, no GPU needed.
    paths = []
    for part in (relu, gelu):
        paths.append(tmp_path / f"{part.ops[0].op}.json")
        paths[-1].write_text(part.model_dump_json())
    done = sweep("--merge", *map(str, paths), "--out", str(tmp_path / "out"), tilegym=None)
    assert done.returncode == 1, done.stderr  # a refusal stays a failure
    written = SweepReport.model_validate_json(
        (tmp_path / "out" / "tilegym-sweep-2026-12-06.json").read_text()
    )
    assert written.calls == 4


def test_the_gpu_hosts_modules_import_no_stage() -> None:
    """The GPU host runs the sweep, TileGym's tests and the call cost from the
    repository with the toolchain's packages only (no openai, no LangGraph): its
    modules must not reach the porting stages."""
    probe = (
        "import sys\n"
        "import nodes.tilegym_backend.sweep, nodes.tilegym_backend.test_run\n"
        "import nodes.tilegym_backend.call_cost, nodes.tilegym_backend.book\n"
        "heavy = [m for m in ('nodes.kernel_writer', 'nodes.host_builder', 'toolchain.llm',"
        " 'openai', 'langgraph') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert found.stdout.strip() == "[]"
