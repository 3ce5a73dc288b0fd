"""A spec written again without some of its variants (`writer.without_variants`):
the configurations that dispatched to them go too, the rest is the spec's own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from nodes.spec_writer.writer import WrittenSpec, without_variants
from schemas.port_spec import PortSpecError, load_port_spec
from toolchain.env import REPO_ROOT

TRANSPOSE = REPO_ROOT / "examples" / "kernels" / "transpose.port.yaml"


def _written(folder: Path) -> WrittenSpec:
    folder.mkdir()
    for name in ("transpose.port.yaml", "transpose.py"):
        shutil.copy(TRANSPOSE.with_name(name), folder / name)
    return WrittenSpec(
        kernel="transpose_kernel",
        file="transpose.py",
        module="transpose",
        path=folder / TRANSPOSE.name,
        records=0,
        test_configs=4,
        variants=2,
        grid_literal=False,
        unit_variants=("by_order",),
    )


def test_a_variant_left_out_takes_its_configurations_along(tmp_path: Path) -> None:
    spec = _written(tmp_path / "spec")
    kept = without_variants(spec, {"by_order"}, tmp_path / "out")
    assert kept.path == tmp_path / "out" / TRANSPOSE.name
    data = yaml.safe_load(kept.path.read_text())
    assert [v["name"] for v in data["variants"]] == ["by_permute"]
    # Half-precision configurations dispatched to by_order: only float32 ones stay.
    assert [c["name"] for c in data["test_configs"]] == ["ragged_f32", "square_f32"]
    assert (kept.variants, kept.test_configs, kept.unit_variants) == (1, 2, ())
    assert kept.path.read_text().startswith("# y = x^T;")
    load_port_spec(kept.path)  # still a spec
    assert spec.path.read_text() == TRANSPOSE.read_text()  # the original untouched


def test_leaving_out_every_variant_is_refused(tmp_path: Path) -> None:
    spec = _written(tmp_path / "spec")
    with pytest.raises(PortSpecError):
        without_variants(spec, {"by_order", "by_permute"}, tmp_path / "out")
    assert not (tmp_path / "out" / TRANSPOSE.name).exists()
