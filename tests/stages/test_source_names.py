"""A constant keeps the name its source gives it, case included, from the spec to the
launcher: `tileport convert --no-gpu` of a kernel written for the test whose constants
are lower case (`n_cols`, `block_n`) reaches the GPU boundary, and kernel.rs, the port
report, the generated FFI and the builds' logs all say `n_cols` and `block_n`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from app.cli_convert import convert
from nodes.kernel_writer.stage import KERNEL_FILE
from schemas.exit_codes import ExitCode
from schemas.kernel_writer import REPORT_FILE, PortReport
from schemas.pipeline import RunOptions
from toolchain.env import REPO_ROOT, rs_export_binary

SPEC = REPO_ROOT / "tests" / "kernel_writer" / "fixtures" / "kernels" / "row_sum_lower.port.yaml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
    ),
]


@pytest.mark.timeout(1800)  # the kernel writer, then the workspace's library build
def test_lower_case_constants_keep_their_names_to_the_gpu_boundary(tmp_path: Path) -> None:
    run = tmp_path / "run"
    stdout, stderr = io.StringIO(), io.StringIO()
    code = convert(
        SPEC, out=run, options=RunOptions(no_gpu=True), as_json=True, stdout=stdout, stderr=stderr
    )
    assert code == ExitCode.AWAITING_GPU, stderr.getvalue()[-4000:]
    assert json.loads(stdout.getvalue())["reached_gpu_boundary"]

    kernel = (run / "generated" / KERNEL_FILE).read_text()
    assert "const n_cols: i32, const block_n: i32" in kernel
    assert "generic_value::<block_n>()" in kernel and "shape![block_n]" in kernel
    assert "N_COLS" not in kernel and "BLOCK_N" not in kernel
    # rustc says nothing of the lower-case generics: the entry allows them.
    assert "non_upper_case_globals" in kernel
    report = PortReport.model_validate_json((run / "generated" / REPORT_FILE).read_text())
    assert report.rustc_check and report.rustc_log == ""
    constants = {g.name: g.source for g in report.generics if g.kind == "constant"}
    assert constants == {"n_cols": "n_cols", "block_n": "block_n"}

    host = json.loads((run / "reports" / "host_build.json").read_text())
    ffi = (run / host["ffi_rs"]).read_text()
    assert 'rt::to_i32(c_block_n, "block_n")' in ffi
    assert 'rt::to_i32(c_n_cols, "n_cols")' in ffi
    assert "BLOCK_N" not in ffi and "N_COLS" not in ffi
    # The library and its pipeline check built without a warning.
    for log in sorted((run / "logs").glob("host_builder.*.log")):
        assert "warning" not in log.read_text(), log.name
