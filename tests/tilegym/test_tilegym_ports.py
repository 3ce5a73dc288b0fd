"""TileGym's kernels ported from the unmodified tree, one or more per failure class
the kernel writer had on them (docs/KERNEL_WRITER.md, "TileGym"): specs from the
recorded launches (`tileport specs`), then stage B on each; every port COMPILED
at `exact` or `sass-identical` on sm_90 and sm_100, or BLOCKED at a named
upstream gap. `python -m nodes.kernel_writer.bench` ports all 49.

The data is the unmodified TileGym snapshot and its recorded launches beside the
checkout (`TILEPORT_TILEGYM`, `TILEPORT_TILEGYM_LAUNCHES` override them)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nodes.kernel_writer.stage import port_kernel
from nodes.spec_writer.writer import read_signature_hints, write_specs
from schemas.kernel_writer import COMPILED_LEVELS, REPORT_FILE, REQUIRED_TARGETS, PortReport
from schemas.launch_capture import read_launch_records
from schemas.verdicts import KernelWriterVerdict
from tileir.sass import compare_bytecodes
from toolchain import tool_cache
from toolchain.env import REPO_ROOT

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
LAUNCHES = Path(
    os.environ.get("TILEPORT_TILEGYM_LAUNCHES", REPO_ROOT.parent / "shared" / "tilegym-launches")
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        not ((TILEGYM / "src").is_dir() and (LAUNCHES / "launches.jsonl").is_file()),
        reason="the TileGym snapshot and its recorded launches are not beside the checkout",
    ),
]

# kernel -> the failure class its port exercises (the lifter issue's numbering).
COMPILED_KERNELS = {
    "fmha_bwd_preprocess_kernel": "1: floor division and modulo fix-up (a false constant); "
    "a number following two constants (H * SEQ_LEN)",
    "swiglu_forward_kernel": "2: IR only equivalent, SASS identical",
    "dropout_kernel": "3: float constants of the dtype generic",
    "ce_online_kernel": "4: per-op hints keyed by target; a generic loop bound (G16)",
    "softmax_kernel": "5: an infinity on the dtype generic",
    "rms_norm_kernel_gather": "8: the gather's padding tile",
    "moe_align_block_size_stage1_kernel": "9: an int64 pointer typed alike everywhere",
    "mhc_finalize_scale_bias_sigmoid_kernel": "10: extents of 1 are a variant of their own",
    "static_persistent_matmul_kernel": "12: a negative constant in an entry's name",
    "attention_decode_kernel_grouped": "7: an if with several results around a loop; "
    "sm_100 listings that vary from run to run",
    "group_gemm_kernel": "7: a while whose condition short-circuits, a for in its body",
    "fmha_bwd_dkdv_kernel": "6: power-of-two constants that once left no free probe value",
    "mla_decoding_split_kv_naive_absorb_mla_transpose_kernel": "11: a reference if/for "
    "once missing from the port",
    "prefill_mla_kernel": "12: equal canonical IRs, sm_100 SASS once reported different "
    "(tileiras's run-to-run variation)",
}
BLOCKED_KERNELS = {
    "chunk_inter_recurrence_kernel": "G15",  # 85 entry parameters
    "intra_chunk_prepare_kernel": "G15",  # 98 entry parameters
}


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tilegym-specs")
    records = read_launch_records(LAUNCHES / "launches.jsonl")
    hints = read_signature_hints(LAUNCHES / "signatures.jsonl")
    wanted = {*COMPILED_KERNELS, *BLOCKED_KERNELS}
    written, problems = write_specs(records, TILEGYM / "src", out, hints)
    assert problems == []
    assert wanted <= {w.path.name.removesuffix(".port.yaml") for w in written}
    return out


@pytest.fixture(scope="module")
def ports(specs: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The port directory of a kernel, ported once for the module."""
    done: dict[str, Path] = {}

    def port(kernel: str) -> Path:
        if kernel not in done:
            out = tmp_path_factory.mktemp(kernel)
            port_kernel(specs / f"{kernel}.port.yaml", out)
            done[kernel] = out
        return done[kernel]

    return port


def _report(out: Path) -> PortReport:
    return PortReport.model_validate_json((out / REPORT_FILE).read_text())


@pytest.mark.parametrize("kernel", sorted(COMPILED_KERNELS))
def test_kernel_ports_compiled(kernel: str, ports: Callable[[str], Path]) -> None:
    out = ports(kernel)
    report = _report(out)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    for check in report.checks:
        assert check.level in COMPILED_LEVELS, (check.config, check.findings[:3])
        assert {t.target for t in check.targets} == set(REQUIRED_TARGETS)
    text = (out / "kernel.rs").read_text()
    assert "constant(false" not in text  # G14: cutile-rs writes it as true


@pytest.mark.parametrize("kernel", sorted(BLOCKED_KERNELS))
def test_kernel_blocked_at_an_upstream_gap(kernel: str, specs: Path, tmp_path: Path) -> None:
    report = port_kernel(specs / f"{kernel}.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.BLOCKED
    [blocked] = report.blocked
    assert f"UPSTREAM_GAPS.md {BLOCKED_KERNELS[kernel]}" in blocked.missing
    assert blocked.location.startswith("chunk_gated_delta_rule.py:")


def test_a_reference_assembles_alike_every_time(
    ports: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tileiras's sm_100 listing of one bytecode varies with its heap addresses
    (this kernel's largest configuration: 7 listings in 7 runs, measured); a
    reference compared with itself is identical, every time: each side assembled
    by tileiras, not read back from the tool cache."""
    monkeypatch.setenv(tool_cache.SWITCH, "off")
    out = ports("attention_decode_kernel_grouped")
    report = _report(out)
    largest = max(report.checks, key=lambda c: c.targets[-1].instructions)
    reference = out / "reference" / f"{largest.config}.bytecode"
    for run in range(3):
        result = compare_bytecodes(reference, reference, "sm_100", tmp_path / f"run{run}")
        assert result.identical, result.first_differences
        assert result.assemblies == 1
