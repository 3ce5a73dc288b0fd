"""The reference export reproduces, byte for byte, the Tile IR that real launches
compiled.

data/h200_launch_tileir/<kernel>.<config>.tileir are the MLIR texts cuTile
dumped (CUDA_TILE_DUMP_TILEIR) while tests/corpus/correctness.py launched every
corpus kernel on every test configuration on an H200. Here each configuration
is specialised from its port spec alone, on this GPU-less machine, exported at
bytecode version 13.3 and disassembled: the text must be identical, entry
symbol included."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from schemas.port_spec import load_port_spec, spec_relative
from toolchain.env import REPO_ROOT
from toolchain.reference_export import export_reference, specialise

DUMPS = Path(__file__).parent / "data" / "h200_launch_tileir"
CORPUS = REPO_ROOT / "examples" / "kernels"


def _dumps_by_kernel() -> dict[str, list[Path]]:
    grouped: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(DUMPS.glob("*.tileir")):
        grouped[path.name.split(".")[0]].append(path)
    return dict(grouped)


BY_KERNEL = _dumps_by_kernel()


def test_every_corpus_kernel_was_recorded() -> None:
    assert set(BY_KERNEL) == {p.name.removesuffix(".port.yaml") for p in CORPUS.glob("*.port.yaml")}
    assert sum(len(v) for v in BY_KERNEL.values()) >= 60


@pytest.mark.parametrize("kernel", sorted(BY_KERNEL))
def test_export_matches_the_launch(kernel: str, tmp_path: Path) -> None:
    spec_path = CORPUS / f"{kernel}.port.yaml"
    spec = load_port_spec(spec_path)
    configs = {c.name: c for c in spec.test_configs}
    dumps = {path.name.split(".")[1]: path for path in BY_KERNEL[kernel]}
    specs = [
        specialise(spec.resolve(configs[name], "test")).model_copy(update={"variant": name})
        for name in dumps
    ]
    record = export_reference(
        spec_relative(spec_path, spec.source),
        spec.kernel,
        specs,
        tmp_path,
        cubin_targets=[],
        entry_symbol=spec.entry_symbol,
    )
    for variant in record.variants:
        exported = (tmp_path / variant.mlir).read_text()
        launched = dumps[variant.variant].read_text()
        assert exported == launched, f"{kernel} {variant.variant} differs from the launch"
