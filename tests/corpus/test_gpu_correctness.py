"""Every corpus kernel on every test configuration, launched on a GPU and checked
against its reference with its spec's tolerances (correctness.py); skipped
where there is no torch or no CUDA device."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
SPECS = sorted((HERE.parents[1] / "examples" / "kernels").glob("*.port.yaml"))


def _gpu_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (GPU hosts only)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


@pytest.mark.parametrize("spec", SPECS, ids=[p.stem for p in SPECS])
def test_kernel_matches_its_reference(spec: Path) -> None:
    reason = _gpu_reason()
    if reason:
        pytest.skip(reason)
    sys.path.insert(0, str(HERE))
    import correctness

    results = correctness.check_spec(spec)
    failed = [r for r in results if not r.ok]
    assert not failed, [
        (r.config, r.notes, r.error, r.expected_symbol, r.launch_symbol) for r in failed
    ]
