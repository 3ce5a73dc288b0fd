"""One kernel-text policy: every output (the library's `src/ffi/kernels/<op>.rs`,
TileGym's `<op>_kernel/kernel.rs`) ships the kernel writer's proven text laid out
by rustfmt. Layout reaches only the Tile IR's debug locations, never the IR the
proof compared: the same kernel in two layouts (rustfmt's, and one of lines up to
200 columns) exports the same IR, exactly, for each entry's generics."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from schemas.export import RustExportRequest
from tileir.diff import diff_files, read_ir
from toolchain.env import KERNELS_RS
from toolchain.rust_export import export_once
from toolchain.rustfmt import format_rust

KERNEL = KERNELS_RS / "ported" / "src" / "ffi" / "kernels" / "softmax.rs"
# softmax_kernel<E, TILE_N, X_SHAPE_0_DIV, X_SHAPE_1_DIV, X_STRIDE_0_DIV, Y_SHAPE_0_DIV,
# Y_SHAPE_1_DIV, Y_STRIDE_0_DIV>: an aligned and a ragged launch.
GENERICS = [
    ["f32", "1024", "16", "16", "16", "16", "16", "16"],
    ["bf16", "64", "1", "1", "1", "1", "1", "1"],
]


def _wide(text: str) -> str:
    done = subprocess.run(
        ["rustfmt", "--edition", "2021", "--emit", "stdout", "--config", "max_width=200"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _export(source: Path, generics: list[str], out: Path) -> Path:
    response = export_once(
        RustExportRequest(
            source=str(source), kernel="softmax_kernel", generics=generics, bytecode_out=str(out)
        )
    )
    assert response.ok, response.error
    return out


def test_the_installed_kernel_is_laid_out_by_rustfmt() -> None:
    text = KERNEL.read_text(encoding="utf-8")
    assert format_rust(text, "2021") == text


@pytest.mark.parametrize("generics", GENERICS, ids=["aligned", "ragged"])
def test_layout_reaches_only_the_debug_locations(generics: list[str], tmp_path: Path) -> None:
    laid_out = KERNEL.read_text(encoding="utf-8")
    wide = tmp_path / "wide.rs"
    wide.write_text(_wide(laid_out), encoding="utf-8")
    assert wide.read_text(encoding="utf-8") != laid_out  # another layout: lines moved

    ours = _export(KERNEL, generics, tmp_path / "laid_out.bytecode")
    theirs = _export(wide, generics, tmp_path / "wide.bytecode")
    assert read_ir(ours) == read_ir(theirs)
    report = diff_files(ours, theirs)
    assert report.exact, [f.model_dump() for f in report.findings]
