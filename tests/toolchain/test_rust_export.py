"""The Rust exporter: real cutile compile, no GPU; its error paths come back
as structured responses, never as a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.export import RustExportRequest
from toolchain.env import KERNELS_RS
from toolchain.rust_export import RustExporter, export_once

SOFTMAX_PORT = KERNELS_RS / "ported" / "src" / "softmax.rs"


def softmax_request(tmp_path: Path, **overrides: object) -> RustExportRequest:
    fields: dict[str, object] = {
        "source": str(SOFTMAX_PORT),
        "kernel": "softmax_kernel",
        "generics": ["1024", "1"],
        "bytecode_out": str(tmp_path / "softmax.bytecode"),
    }
    fields.update(overrides)
    return RustExportRequest.model_validate(fields)


def test_exports_ir_text_and_bytecode(tmp_path: Path) -> None:
    response = export_once(softmax_request(tmp_path))
    assert response.ok, response.error
    assert response.ir_text is not None
    assert "padding_value = neg_inf" in response.ir_text
    assert "tile<1x1024xf32>" in response.ir_text
    bytecode = (tmp_path / "softmax.bytecode").read_bytes()
    assert bytecode.startswith(b"\x7fTileIR\x00")


def test_generic_value_reaches_the_tile_shape(tmp_path: Path) -> None:
    response = export_once(softmax_request(tmp_path, generics=["256", "1"]))
    assert response.ok, response.error
    assert response.ir_text is not None
    assert "tile<1x256xf32>" in response.ir_text
    assert "1x1024" not in response.ir_text


def test_resident_exporter_serves_many_requests(tmp_path: Path) -> None:
    with RustExporter() as exporter:
        shapes = [
            exporter.export(softmax_request(tmp_path, generics=[str(n), "1"])) for n in (64, 128)
        ]
    assert [r.ok for r in shapes] == [True, True]


@pytest.mark.parametrize(
    ("overrides", "kind", "fragment"),
    [
        ({"source": "/nonexistent/kernel.rs"}, "source", "cannot read"),
        ({"kernel": "no_such_kernel"}, "compile", "no_such_kernel"),
        ({"module": "other_module"}, "source", "other_module"),
        ({"bytecode_version": "9.9"}, "request", "9.9"),
    ],
)
def test_bad_requests_are_reported(
    tmp_path: Path, overrides: dict[str, object], kind: str, fragment: str
) -> None:
    response = export_once(softmax_request(tmp_path, **overrides))
    assert not response.ok
    assert response.error_kind == kind
    assert fragment in (response.error or "")


def test_rust_syntax_error_names_the_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.rs"
    broken.write_text("#[cutile::module]\nmod broken {\n    fn oops( {\n}\n")
    response = export_once(softmax_request(tmp_path, source=str(broken)))
    assert not response.ok
    assert response.error_kind == "source"
    assert f"{broken}:3:" in (response.error or "")


def test_type_error_in_kernel_is_a_compile_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.rs"
    text = SOFTMAX_PORT.read_text().replace("reduce_max(row, 1i32)", "reduce_max(row, 5i32)")
    bad.write_text(text)
    response = export_once(softmax_request(tmp_path, source=str(bad)))
    assert not response.ok
    assert response.error_kind == "compile"
