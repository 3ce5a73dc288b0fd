"""`tileport capture` over real cuTile launches; runs only where a GPU is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from schemas.launch_capture import TensorArg, read_launch_records
from toolchain.launch_capture import run_capture

SCRIPT = Path(__file__).parent / "scripts" / "gpu_launches.py"


def _gpu() -> str | None:
    """Why the GPU test cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


@pytest.mark.gpu
@pytest.mark.skipif(_gpu() is not None, reason=f"needs a CUDA GPU with torch: {_gpu()}")
def test_real_launches(tmp_path: Path) -> None:
    from cuda.tile.compilation import demangle_kernel_name

    out = tmp_path / "launches.jsonl"
    summary = run_capture([sys.executable, str(SCRIPT)], out)
    assert summary.exit_code == 0, summary.render()
    assert summary.failures == 0 and summary.symbol_mismatches == 0
    records = read_launch_records(out)
    assert [r.hints for r in records] == [
        "<default = {occupancy = 2}>",
        "<default = {num_cta_in_cga = 1, occupancy = 4}>",
        "<default = {occupancy = 2}>",
    ]
    first, _, in_graph = records
    index = first.args[2]
    assert isinstance(index, TensorArg) and (index.min, index.max) == (7, 899)
    graph_index = in_graph.args[2]
    assert isinstance(graph_index, TensorArg) and graph_index.min is None
    assert first.symbol is not None
    name, signature = demangle_kernel_name(first.symbol)
    assert name == "gather_kernel" and len(signature.parameters) == 4
    assert first.file == "gpu_launches.py" and first.params[-1] == "TILE"
