"""What stage B gives its LLM fallback: the partial port of a kernel the lifter
cannot port, the configurations any port is checked on with the value of every
generic, and the verdict rule a port of either writer is judged by."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodes.kernel_writer.partial import MARK
from nodes.kernel_writer.rust_check import RustCheck
from nodes.kernel_writer.stage import (
    KERNEL_FILE,
    PARTIAL_FILE,
    port_kernel,
    port_targets,
    port_verdict,
)
from schemas.kernel_writer import ConfigCheck, TargetCheck
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import rs_export_binary

FIXTURES = Path(__file__).parent / "fixtures" / "kernels"


@pytest.mark.skipif(not rs_export_binary().exists(), reason="tileport-rs-export is not built")
def test_a_blocked_kernel_has_a_partial_port_with_the_construct_marked(tmp_path: Path) -> None:
    report = port_kernel(FIXTURES / "row_scan_axis1.port.yaml", tmp_path)
    assert report.verdict is KernelWriterVerdict.BLOCKED
    assert not (tmp_path / KERNEL_FILE).exists()
    assert f"{PARTIAL_FILE}: what was lifted, each construct left marked" in report.notes
    partial = (tmp_path / PARTIAL_FILE).read_text()
    marker = next(line.strip() for line in partial.splitlines() if f"// {MARK}:" in line)
    assert marker.startswith(f"// {MARK}: `scan` at row_scan_axis1.py:18:18: cutile-rs 0.5.0")
    assert "//     %3 = scan %2 dim=1 reverse=false identities=[0]" in partial
    assert 'let scanned: Tile<i64, { [1, 1024] }> = todo!("scan");' in partial
    # What follows the scan is lifted on the placeholder: the add of the carry, the store.
    after = partial[partial.index('todo!("scan")') :]
    assert "scanned + bcast" in after and "store_view_raw(" in after
    assert "unsafe fn cumsum_kernel<const X_SHAPE_0_DIV: i32" in partial
    assert str(FIXTURES) not in partial  # locations relative to the kernel's folder


def test_every_checked_configuration_with_its_generic_values() -> None:
    targets = port_targets(FIXTURES / "small_add.port.yaml")
    assert [(t.label, t.entry, t.dispatch) for t in targets] == [
        ("tile512__ragged_f32", "small_add_kernel", "True"),
        ("tile512__exact_f16", "small_add_kernel", "True"),
    ]
    ragged, exact = (t.generic_values for t in targets)
    assert ragged["E"] == "f32" and exact["E"] == "f16"
    assert (ragged["E_BYTES"], exact["E_BYTES"]) == ("4", "2")
    assert ragged["TILE"] == exact["TILE"] == "512"
    assert (ragged["C_SHAPE_0_DIV"], exact["C_SHAPE_0_DIV"]) == ("1", "16")


def _check(config: str, exact: bool, sass: bool, error: str | None = None) -> ConfigCheck:
    return ConfigCheck(
        config=config,
        variant="v",
        entry="k",
        generic_args=[],
        exact=exact,
        ir_level="exact" if exact else "different",
        targets=[TargetCheck(target=t, sass_identical=sass) for t in ("sm_90", "sm_100")],
        error=error,
    )


def test_the_verdict_rule() -> None:
    built, broken = RustCheck(True, ""), RustCheck(False, "error[E0308]: mismatched types")
    exact, same_sass = _check("a", True, True), _check("b", False, True)
    assert port_verdict([exact], built) == (
        KernelWriterVerdict.COMPILED,
        "1 configuration(s) exact and SASS-identical",
    )
    verdict, summary = port_verdict([exact, same_sass], built)
    assert verdict is KernelWriterVerdict.COMPILED and "1 exact, 1 sass-identical" in summary
    verdict, summary = port_verdict([exact], broken)
    assert verdict is KernelWriterVerdict.FAIL_COMPILE and "mismatched types" in summary
    verdict, summary = port_verdict([exact, _check("c", True, False)], built)
    assert verdict is KernelWriterVerdict.FAIL_FIXABLE
    assert summary == "c: IR exact, SASS sm_90 differs, sm_100 differs"
    equivalent = _check("e", False, False).model_copy(update={"ir_level": "equivalent"})
    equivalent = ConfigCheck.model_validate(equivalent.model_dump(exclude={"level"}))
    verdict, summary = port_verdict([exact, equivalent], built)
    assert verdict is KernelWriterVerdict.COMPILED and "1 equivalent" in summary
    assert "the GPU run decides" in summary
    verdict, summary = port_verdict([_check("d", False, False, error="compile: no")], built)
    assert (verdict, summary) == (KernelWriterVerdict.FAIL_COMPILE, "d: compile: no")
