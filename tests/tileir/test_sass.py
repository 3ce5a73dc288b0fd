"""SASS identity through the real tileiras and cuobjdump."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.export import RustExportRequest
from tileir.sass import (
    NEAR_FRACTION,
    compare_bytecodes,
    instructions,
    register_skeleton,
    render_human,
)
from toolchain.env import KERNELS_RS
from toolchain.rust_export import RustExporter
from toolchain.tools import ToolError

SOFTMAX_PORT = KERNELS_RS / "ported" / "src" / "softmax.rs"


def export_softmax(exporter: RustExporter, tile_n: int, out: Path) -> Path:
    request = RustExportRequest(
        source=str(SOFTMAX_PORT),
        kernel="softmax_kernel",
        generics=[str(tile_n), "1"],
        bytecode_out=str(out),
    )
    response = exporter.export(request)
    assert response.ok, response.error
    return out


@pytest.fixture(scope="module")
def bytecodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("bytecode")
    with RustExporter() as exporter:
        return {
            "a": export_softmax(exporter, 1024, work / "a.bytecode"),
            "a_again": export_softmax(exporter, 1024, work / "a_again.bytecode"),
            "b": export_softmax(exporter, 512, work / "b.bytecode"),
        }


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_same_kernel_is_sass_identical(
    bytecodes: dict[str, Path], tmp_path: Path, target: str
) -> None:
    result = compare_bytecodes(bytecodes["a"], bytecodes["a_again"], target, tmp_path)
    assert result.identical
    assert result.reference_instructions > 100
    assert "identical" in render_human(result)


def test_different_tile_shape_is_reported(bytecodes: dict[str, Path], tmp_path: Path) -> None:
    result = compare_bytecodes(bytecodes["a"], bytecodes["b"], "sm_90", tmp_path)
    assert not result.identical
    assert result.differing_lines > 0
    assert result.first_differences
    assert "differs" in render_human(result)


def test_listings_far_apart_are_not_assembled_again(
    bytecodes: dict[str, Path], tmp_path: Path
) -> None:
    result = compare_bytecodes(bytecodes["a"], bytecodes["b"], "sm_100", tmp_path, samples=2)
    assert not result.identical
    assert result.differing_lines > NEAR_FRACTION * result.reference_instructions
    assert result.assemblies == 1


def test_a_register_swap_keeps_the_skeleton_and_an_opcode_does_not() -> None:
    # Two of tileiras's own sm_100 runs of one TileGym bytecode differ like this.
    run_a = ("UIADD3 UR30, UP3, UPT, UR9, 0x10002, URZ", "UIADD3.64 UR20, UPT, UPT, UR30, 0x2, URZ")
    run_b = ("UIADD3 UR28, UP3, UPT, UR9, 0x10002, URZ", "UIADD3.64 UR20, UPT, UPT, UR28, 0x2, URZ")
    other = ("UIADD3 UR28, UP3, UPT, UR9, 0x10003, URZ", "UIADD3.64 UR20, UPT, UPT, UR28, 0x2, URZ")
    assert register_skeleton(run_a) == register_skeleton(run_b)
    assert register_skeleton(run_a) != register_skeleton(other)


def test_entry_symbols_are_masked() -> None:
    listing_a = "        /*0010*/                   CALL.REL `(softmax_kernel_entry) ;\n"
    listing_b = "        /*0010*/                   CALL.REL `(softmax_kernel_Kt1_A2f32_I1024) ;\n"
    assert instructions(listing_a) == instructions(listing_b)


def test_garbage_bytecode_is_a_tool_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.bytecode"
    garbage.write_bytes(b"not tile ir")
    with pytest.raises(ToolError, match="tileiras"):
        compare_bytecodes(garbage, garbage, "sm_90", tmp_path / "work")
