"""The engine proven end to end: the hand-written cutile-rs softmax port is
`exact` against its cuTile Python reference and SASS-identical on sm_90 and
sm_100. Both sides are real exports: cuTile Python AOT and cutile's compiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.export import RustExportRequest
from schemas.reference_export import ArrayArg, ConstantArg, ExportRecord
from tileir.diff import diff_files
from tileir.sass import compare_bytecodes
from toolchain.env import KERNELS_RS, REPO_ROOT
from toolchain.reference_export import export_from_spec
from toolchain.rust_export import export_once

SPEC = REPO_ROOT / "examples" / "kernels" / "softmax.port.yaml"
PORT = KERNELS_RS / "ported" / "src" / "softmax.rs"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(reference bytecode, port bytecode) for the spec's ragged f32 config."""
    work = tmp_path_factory.mktemp("softmax")
    record: ExportRecord = export_from_spec(SPEC, work / "reference")
    variant = record.variants[0]
    x, tile_n = variant.specialisation.params["x"], variant.specialisation.params["TILE_N"]
    assert isinstance(x, ArrayArg) and isinstance(tile_n, ConstantArg)
    cols_div = x.facts.shape_divisible_by[1]
    response = export_once(
        RustExportRequest(
            source=str(PORT),
            kernel="softmax_kernel",
            generics=[str(tile_n.value), str(cols_div)],
            bytecode_out=str(work / "port.bytecode"),
        )
    )
    assert response.ok, response.error
    return work / "reference" / variant.bytecode, work / "port.bytecode"


def test_port_ir_is_exact(exported: tuple[Path, Path]) -> None:
    reference, port = exported
    report = diff_files(reference, port)
    assert report.exact, [f.model_dump() for f in report.findings]


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_port_is_sass_identical(exported: tuple[Path, Path], tmp_path: Path, target: str) -> None:
    reference, port = exported
    result = compare_bytecodes(reference, port, target, tmp_path)
    assert result.identical, result.first_differences
