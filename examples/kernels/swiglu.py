"""SwiGLU forward through pointer gathers and scatters: c = silu(a) * b.

Each block handles one row segment of TILE_N columns; the column indices come
from an arange, so the loads and stores are pointer gathers/scatters whose
bounds masks clip the ragged last segment.
"""

import cuda.tile as ct


@ct.kernel
def swiglu_forward_kernel(a, b, c, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    cols = ct.bid(1) * TILE_N + ct.arange(TILE_N, dtype=ct.int32)
    a_row = ct.astype(ct.gather(a, (row, cols)), ct.float32)
    b_row = ct.astype(ct.gather(b, (row, cols)), ct.float32)
    silu = a_row / (1.0 + ct.exp(-a_row))
    ct.scatter(c, (row, cols), ct.astype(silu * b_row, c.dtype))
