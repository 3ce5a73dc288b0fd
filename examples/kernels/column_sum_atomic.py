"""Column sums by split reduction with atomic adds: out[j] += sum_i x[i, j].

Each block reduces a (TILE_M, TILE_N) tile of x over its rows in float32 and
adds the partial sums into out (float32, zero-initialised by the host) with
one atomic add per column, so any number of row blocks may contribute to the
same columns. This is how split-K reductions and weight-gradient sums
(dW = sum over tokens) are accumulated.
"""

import cuda.tile as ct


@ct.kernel
def column_sum_kernel(x, out, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    tile = ct.load(x, index=(bm, bn), shape=(TILE_M, TILE_N), padding_mode=ct.PaddingMode.ZERO)
    partial = ct.sum(ct.astype(tile, ct.float32), axis=0)
    cols = bn * TILE_N + ct.arange(TILE_N, dtype=ct.int32)
    ct.atomic_add(out, (cols,), partial)
