"""Patterns real kernels outside TileGym use, each in a kernel written for the test:
the kernel writer ports it (COMPILED: every configuration IR exact and SASS
identical on sm_90 and sm_100)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodes.kernel_writer.stage import port_kernel
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import rs_export_binary

FIXTURES = Path(__file__).parent / "fixtures" / "kernels"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
    ),
]


def test_the_power_operator_ports(tmp_path: Path) -> None:
    """`x ** 2` and `x ** y` (fpowf) on float32, float16 and bfloat16 tiles."""
    report = port_kernel(FIXTURES / "power_mix.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    assert "fpowf(" in (tmp_path / "kernel.rs").read_text()


def test_a_concatenation_ports(tmp_path: Path) -> None:
    """`ct.cat((a, b), 0)` of two loaded tiles (cat), per tile size."""
    report = port_kernel(FIXTURES / "pair_cat.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    assert "cat(" in (tmp_path / "kernel.rs").read_text()


def test_a_compare_and_swap_ports(tmp_path: Path) -> None:
    """`ct.atomic_cas` (atomic_cas_tko) with its bounds mask, ordering and scope."""
    report = port_kernel(FIXTURES / "claim_flags.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    assert "atomic_cas_tko(" in (tmp_path / "kernel.rs").read_text()


def test_block_scales_port_for_the_gpu_that_compiles_them(tmp_path: Path) -> None:
    """float8_e8m0fnu scales widened to float32: cuTile compiles them for sm_100
    only, which the spec names (`targets`); the port is proven there."""
    report = port_kernel(FIXTURES / "scaled_rows.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    assert {t.target for check in report.checks for t in check.targets} == {"sm_100"}
    assert "f8e8m0fnu" in (tmp_path / "kernel.rs").read_text()


def test_mixed_precision_ports_with_an_element_type_per_array(tmp_path: Path) -> None:
    """float8 (or float16) inputs, a float32 accumulator and output: the inputs'
    element type is the generic, the output keeps float32."""
    report = port_kernel(FIXTURES / "mixed_mma.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    kernel = (tmp_path / "kernel.rs").read_text()
    assert "c: *mut f32" in kernel and "mmaf(" in kernel


def test_the_math_functions_port(tmp_path: Path) -> None:
    """sin, cos, tan, sinh, cosh, floor, ceil, a float `%` (remf) and an integer
    abs (absi), on float32 and float16."""
    report = port_kernel(FIXTURES / "math_mix.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.exact and report.sass_identical
    kernel = (tmp_path / "kernel.rs").read_text()
    assert all(f"{op}(" in kernel for op in ("sinh", "remf", "absi"))
