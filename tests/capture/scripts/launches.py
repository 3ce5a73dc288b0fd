"""Launches through the fake cuda.tile the ways TileGym's host code does."""

from __future__ import annotations

import os
import subprocess
import sys

import cuda.tile as ct
from cuda.tile import _cext
from fake_tensor import FakeTensor

_saved = ct.launch  # saved at import and replaced, like tilegym/experimental.py


def _patched(stream: object, grid: object, kernel: object, args: tuple[object, ...], /) -> None:
    _saved(stream, grid, kernel, args)


ct.launch = _patched


@ct.kernel(occupancy=2)
def scale(x: FakeTensor, factor: float) -> None:
    for i in range(len(x.data)):
        x.data[i] *= factor


@ct.kernel
def gather(out: FakeTensor, index: FakeTensor, n: int) -> None:
    for i in range(n):
        out.data[i] = float(index.data[i])


@ct.kernel
def odd_kernel(x: FakeTensor) -> None:
    pass


GRANDCHILD = """
import cuda.tile as ct
from fake_tensor import FakeTensor

@ct.kernel(num_ctas=2)
def grandchild(x):
    pass

ct.launch(None, (4, 2), grandchild, (FakeTensor([1.0, 2.0], "bfloat16"),))
"""

x = FakeTensor([1.0, 2.0, 3.0], "float32")
for _ in range(3):
    ct.launch(None, (2,), scale, (x, 2.0))  # the same launch three times: one record
ct.launch(None, (2,), scale.replace_hints(occupancy=4), (x, 2.0))  # other hints
out = FakeTensor([0.0, 0.0, 0.0], "float32")
_cext.launch(None, (1, 1, 1), gather, (out, FakeTensor([3, 1, 2], "int32"), 3))
ct.launch(None, (1,), gather, (FakeTensor([0.0], "float32"), FakeTensor([5], "int64"), 1))
for _ in range(2):
    ct.launch(None, (1,), odd_kernel, (x,))  # compiled once, then a cache hit
bad = FakeTensor([1.0], "float32")
bad.broken = True
ct.launch(None, (1,), scale, (bad, 3.0))  # the recorder fails; the launch still runs
pid = os.fork()
if pid == 0:
    ct.launch(None, (3,), scale, (FakeTensor([1.0], "float32", address=4100), 1.5))
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run([sys.executable, "-c", GRANDCHILD], check=True)
print("x", x.data, "out", out.data, "bad", bad.data)
