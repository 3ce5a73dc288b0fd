"""The port spec of the small `scale_kernel` (y = x * SCALE over one axis) that the
export and sandbox tests write beside a kernel source of their own."""

from __future__ import annotations

from typing import Any

SCALE_SPEC: dict[str, Any] = {
    "spec_version": 1,
    "name": "scale",
    "source": "kernel.py",
    "kernel": "scale_kernel",
    "reference_backend": "cutile_python",
    "launch_path": "direct",
    "arrays": {
        "x": {"rank": 1, "shape": ["N"], "dtypes": ["float32"], "role": "in"},
        "y": {"rank": 1, "shape": ["N"], "dtypes": ["float32"], "role": "out"},
    },
    "constants": {"TILE": {"type": "int", "default": 256}},
    "grid": ["cdiv(N, TILE)"],
    "variants": [{"name": "tile256"}],
    "test_configs": [{"name": "ragged", "dims": {"N": 1000}, "dtype": "float32"}],
    "reference": {"function": "references:scale", "origin": "2 * x"},
    "tolerances": {"float32": {"atol": 0.0, "rtol": 0.0, "source": "exact"}},
}
