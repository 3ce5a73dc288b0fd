"""`tileport capture` against a fake cuda.tile, in real child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.launch_capture import (
    LaunchRecord,
    LaunchRecordError,
    TensorArg,
    read_launch_records,
)
from toolchain.launch_capture import CaptureError, command_python, run_capture
from toolchain.launch_hook import MAX_RECORDED_VALUES

HERE = Path(__file__).parent
REPO = HERE.parents[1]
FAKE_SITE = HERE / "fake_site"
BROKEN_SITE = HERE / "broken_site"
SCRIPT = HERE / "scripts" / "launches.py"
INDEX_SCRIPT = HERE / "scripts" / "index_values.py"
# TileGym's launches as recorded before `tileport capture` existed, kept beside the
# checkout (TILEPORT_TILEGYM_LAUNCHES names their folder, as for tests/tilegym/).
SHARED_LAUNCHES = (
    Path(os.environ.get("TILEPORT_TILEGYM_LAUNCHES", REPO.parent / "shared" / "tilegym-launches"))
    / "launches.jsonl"
)


@pytest.fixture
def fake_cuda_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children import the fake cuda.tile (the parent never does)."""
    inherited = os.environ.get("PYTHONPATH")
    path = str(FAKE_SITE) + (os.pathsep + inherited if inherited else "")
    monkeypatch.setenv("PYTHONPATH", path)


def _by_kernel(records: list[LaunchRecord], kernel: str) -> list[LaunchRecord]:
    return [r for r in records if r.kernel == kernel]


def test_records_every_path_and_process(fake_cuda_tile: None, tmp_path: Path) -> None:
    out = tmp_path / "launches.jsonl"
    summary = run_capture([sys.executable, str(SCRIPT)], out)
    assert summary.exit_code == 0
    records = read_launch_records(out)
    assert len(records) == summary.new_records == summary.distinct_launches == 7
    assert summary.kernels == ["gather", "grandchild", "odd_kernel", "scale"]
    assert summary.processes == 3  # the script, its fork, its subprocess
    assert summary.launches_made == 9  # the fork leaves through os._exit: not counted
    assert summary.compiles_seen == 7
    # Three identical launches, one record; new hints, a new record.
    scale = _by_kernel(records, "scale")
    assert [r.hints for r in scale] == [
        "<default = {occupancy = 2}>",
        "<default = {occupancy = 4}>",
        "<default = {occupancy = 2}>",
    ]
    assert scale[0].hints_by_target == {"default": {"occupancy": 2}}
    assert scale[0].file == "launches.py" and scale[0].line == 23
    assert scale[0].grid == (2, 1, 1)
    assert scale[0].params == ["x", "factor"]
    assert scale[0].symbol == "scale_Kt1_A1float32_Sfloat"
    # The forked child's launch: its own pointer (not 16-byte aligned).
    tensor = scale[2].args[0]
    assert isinstance(tensor, TensorArg) and not tensor.align16
    # Integer tensors carry their value range; float tensors none.
    gather = _by_kernel(records, "gather")
    index = gather[0].args[1]
    assert isinstance(index, TensorArg) and (index.min, index.max) == (1, 3)
    first = gather[0].args[0]
    assert isinstance(first, TensorArg) and first.min is None
    # An extent of 1 makes it a calling-convention-v2 specialisation.
    assert gather[1].symbol == "gather_Kt2_A1float32s1_A1int64s1_Sint"
    # The symbol cuTile compiled wins over the prediction, for cache hits too.
    assert _by_kernel(records, "odd_kernel")[0].symbol == "odd_kernel_Kt1_A1float32_odd"
    assert summary.symbol_mismatches == 1
    child = _by_kernel(records, "grandchild")[0]
    assert child.grid == (4, 2, 1) and child.hints == "<default = {num_cta_in_cga = 2}>"
    # The pytest id the launches ran under, without its phase.
    expected = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    assert {r.test for r in records} == {expected}


def test_small_index_arrays_carry_their_values(fake_cuda_tile: None, tmp_path: Path) -> None:
    out = tmp_path / "launches.jsonl"
    summary = run_capture([sys.executable, str(INDEX_SCRIPT)], out)
    assert summary.exit_code == 0 and summary.failures == 0
    small, large = read_launch_records(out)
    x, index, keep, _ = small.args
    # A small integer tensor: its values, row-major, beside its range.
    assert isinstance(index, TensorArg) and index.values == [6, 0, 3, 5]
    assert (index.min, index.max) == (0, 6)
    # A bool tensor: its values as booleans, no range; a float tensor: neither.
    assert isinstance(keep, TensorArg) and keep.values == [True, False, True, True]
    assert keep.min is None
    assert isinstance(x, TensorArg) and x.values is None and x.min is None
    # Above the bound, an integer tensor keeps its range only.
    big = large.args[1]
    assert isinstance(big, TensorArg) and big.shape[0] > MAX_RECORDED_VALUES
    assert big.values is None and (big.min, big.max) == (0, big.shape[0] - 1)


def test_recorded_values_are_validated() -> None:
    base = {"kind": "tensor", "dtype": "int32", "shape": [2, 2], "stride": [2, 1]}
    base |= {"align16": True, "contig": True}
    assert TensorArg.model_validate({**base, "values": [3, 0, 1, 2]}).values == [3, 0, 1, 2]
    assert TensorArg.model_validate(base).values is None  # records before it: still valid
    for change, reason in [
        ({"values": [0, 1, 2]}, "3 values for shape"),
        ({"dtype": "float32", "values": [0, 1, 2, 3]}, "not float32"),
        ({"values": [0, 1, True, 3]}, "are integers"),
        ({"dtype": "bool", "values": [0, 1, 1, 0]}, "are booleans"),
        ({"values": [0, 1, 2, 3], "min": 0, "max": 4}, "disagree with the values"),
    ]:
        with pytest.raises(ValueError, match=reason):
            TensorArg.model_validate({**base, **change})


def test_recorder_failure_is_reported_once_and_the_call_still_runs(
    fake_cuda_tile: None, tmp_path: Path
) -> None:
    out = tmp_path / "launches.jsonl"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "app.cli_capture", "--out", str(out), "--json", "--"),
            *(sys.executable, str(SCRIPT)),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ['PYTHONPATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Every launch was forwarded: the kernels' bodies ran, the broken one too.
    assert "x [16.0, 32.0, 48.0] out [3.0, 1.0, 2.0] bad [3.0]" in done.stdout
    assert done.stderr.count("could not describe a launch of scale") == 2  # once, then summary
    assert "7 distinct launches of 4 kernels" in done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["failures"] == 1 and summary["records_in_file"] == 7


def test_append_skips_launches_already_recorded(fake_cuda_tile: None, tmp_path: Path) -> None:
    out = tmp_path / "launches.jsonl"
    run_capture([sys.executable, str(SCRIPT)], out)
    before = out.read_text()
    again = run_capture([sys.executable, str(SCRIPT)], out, append=True)
    assert again.distinct_launches == 7 and again.new_records == 0
    assert again.records_in_file == 7
    assert out.read_text() == before
    # Without --append the file is replaced, not added to.
    replaced = run_capture([sys.executable, str(SCRIPT)], out)
    assert replaced.records_in_file == 7 and len(read_launch_records(out)) == 7


def test_files_are_recorded_relative_to_the_source_root(
    fake_cuda_tile: None, tmp_path: Path
) -> None:
    # The script runs from its subfolder, which Python puts first on sys.path: without
    # a source root its kernels are recorded relative to that folder ("launches.py").
    command = [sys.executable, str(SCRIPT)]
    inside = run_capture(command, tmp_path / "inside.jsonl", source_root=REPO)
    [scale, *_] = _by_kernel(read_launch_records(tmp_path / "inside.jsonl"), "scale")
    assert inside.exit_code == 0 and scale.file == "tests/capture/scripts/launches.py"
    # A kernel outside the source root is recorded by its absolute path.
    run_capture(command, tmp_path / "outside.jsonl", source_root=tmp_path)
    [scale, *_] = _by_kernel(read_launch_records(tmp_path / "outside.jsonl"), "scale")
    assert scale.file == str(SCRIPT.resolve())
    with pytest.raises(CaptureError, match="is not a directory"):
        run_capture(command, tmp_path / "l.jsonl", source_root=tmp_path / "missing")


def test_the_full_cli_registers_capture(fake_cuda_tile: None, tmp_path: Path) -> None:
    pytest.importorskip("langgraph", reason="the full CLI needs the pipeline's dependencies")
    from app.cli import build_parser

    out = tmp_path / "launches.jsonl"
    args = build_parser().parse_args(
        ["capture", "--out", str(out), "--", sys.executable, "-c", "raise SystemExit(5)"]
    )
    assert args.handler(args) == 5
    assert out.read_text() == ""


@pytest.mark.parametrize("code", [0, 3, 141])
def test_exit_code_is_the_commands(fake_cuda_tile: None, tmp_path: Path, code: int) -> None:
    summary = run_capture(
        [sys.executable, "-c", f"import sys; sys.exit({code})"], tmp_path / "l.jsonl"
    )
    assert summary.exit_code == code
    assert summary.processes == 0 and "no process launched" in summary.render()


def test_a_command_killed_by_a_signal(fake_cuda_tile: None, tmp_path: Path) -> None:
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    summary = run_capture([sys.executable, "-c", kill], tmp_path / "l.jsonl")
    assert summary.exit_code == 128 + 15


def test_no_command(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="no command given"):
        run_capture(["--"], tmp_path / "l.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli_capture", "--out", str(tmp_path / "l.jsonl")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "no command given" in done.stderr


def test_bad_outputs(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "pass"]
    with pytest.raises(CaptureError, match="does not exist"):
        run_capture(command, tmp_path / "missing" / "l.jsonl")
    with pytest.raises(CaptureError, match="is a directory"):
        run_capture(command, tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    with pytest.raises(CaptureError, match=r"bad.jsonl:1:"):
        run_capture(command, bad, append=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_unwritable_output_dir(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(CaptureError, match="not writable"):
        run_capture([sys.executable, "-c", "pass"], locked / "l.jsonl")


def test_unknown_command(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="command not found"):
        run_capture(["no-such-program-anywhere"], tmp_path / "l.jsonl")


def test_cuda_tile_not_importable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(BROKEN_SITE))
    with pytest.raises(CaptureError, match=r"cuda\.tile is not importable.*libcuda\.so\.1"):
        run_capture(["timeout", "60", sys.executable, "-c", "pass"], tmp_path / "l.jsonl")
    # Unchecked, the command runs and the import failure is in the summary.
    summary = run_capture(
        [sys.executable, "-c", "import cuda.tile"], tmp_path / "l.jsonl", check_import=False
    )
    assert summary.exit_code == 1
    assert "libcuda.so.1" in summary.import_failures[0]


def test_command_python(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env -S python3 -u\nprint()\n")
    script.chmod(0o755)
    assert command_python([str(script)]) is not None
    assert command_python(["timeout", "-s", "KILL", "30", "python3", "-m", "pytest"])
    assert command_python(["env", "A=1", "python3", "x.py"])
    assert command_python(["bash", "-c", "true"]) is None


# -- the record file ---------------------------------------------------------------


def test_malformed_lines_name_their_line(tmp_path: Path) -> None:
    good = SCRIPT.parent / "one_record.jsonl"
    line = good.read_text().strip()
    cases = {
        "not JSON": f"{line}\n\n{{oops\n",
        "kernel: Field required": f'{line}\n\n{{"test": null}}\n',
        "params but": line.replace('"params": ["x"]', '"params": ["x", "y"]') + "\n",
        "kind": line.replace('"kind": "tensor"', '"kind": "pointer"') + "\n",
    }
    for reason, text in cases.items():
        path = tmp_path / "l.jsonl"
        path.write_text(text)
        with pytest.raises(LaunchRecordError) as caught:
            read_launch_records(path)
        assert reason in caught.value.reason
        assert caught.value.line == (1 if text.count("\n") == 1 else 3)
        assert str(caught.value).startswith(f"{path}:{caught.value.line}: ")


def test_records_keep_strict_kinds(tmp_path: Path) -> None:
    record = json.loads((SCRIPT.parent / "one_record.jsonl").read_text())
    record["args"][0]["shape"] = ["4"]
    with pytest.raises(ValueError, match="shape"):
        LaunchRecord.model_validate(record)


@pytest.mark.skipif(not SHARED_LAUNCHES.exists(), reason="the shared TileGym records are absent")
def test_the_shared_tilegym_records_parse() -> None:
    records = read_launch_records(SHARED_LAUNCHES)
    assert len(records) == 481
    assert len({(r.file, r.kernel) for r in records}) == 49
    assert all(r.symbol is None and len(r.grid) == 3 for r in records)
    lists = [a for r in records for a in r.args if a.kind == "list"]
    assert len(lists) == 6
