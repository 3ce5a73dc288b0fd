"""Index arrays through the fake cuda.tile: a small one (its values are recorded), a
bool mask, and one above the recorder's bound (its range only)."""

from __future__ import annotations

import cuda.tile as ct
from fake_tensor import FakeTensor

LARGE = 5000  # above MAX_RECORDED_VALUES (4096)


@ct.kernel
def scatter_rows(x: FakeTensor, index: FakeTensor, keep: FakeTensor, out: FakeTensor) -> None:
    for i, target in enumerate(index.data[: len(x.data)]):
        if keep.data[i % len(keep.data)]:
            out.data[int(target)] = x.data[i]


x = FakeTensor([1.0, 2.0, 3.0, 4.0], "float32")
out = FakeTensor([0.0] * 8, "float32")
mask = FakeTensor([True, False, True, True], "bool")
ct.launch(None, (1,), scatter_rows, (x, FakeTensor([6, 0, 3, 5], "int32"), mask, out))
large = FakeTensor([LARGE - 1 - i for i in range(LARGE)], "int64")
ct.launch(None, (1,), scatter_rows, (x, large, mask, FakeTensor([0.0] * LARGE, "float32")))
print("out", out.data)
