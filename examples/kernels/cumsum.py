"""Row-wise inclusive prefix sum of int32 counts into int64 offsets.

As MoE routing turns per-expert token counts into offsets: y[i, j] =
sum_{k <= j} x[i, k], widened to int64 like torch.cumsum of an int32 tensor.
Each block scans one row in TILE_N chunks. A chunk is scanned as a flat
(TILE_N,) tile, its only axis; the carry between chunks is the last element
of the previous chunk's scan.
"""

import cuda.tile as ct


@ct.kernel
def cumsum_kernel(x, y, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    carry = ct.full((1,), 0, dtype=ct.int64)
    for chunk in range(ct.num_tiles(x, axis=1, shape=(1, TILE_N))):
        counts = ct.load(x, index=(row, chunk), shape=(1, TILE_N), padding_mode=ct.PaddingMode.ZERO)
        flat = ct.reshape(ct.astype(counts, ct.int64), (TILE_N,))
        scanned = ct.cumsum(flat, axis=0) + carry
        ct.store(y, index=(row, chunk), tile=ct.reshape(scanned, (1, TILE_N)))
        carry = ct.extract(scanned, index=(TILE_N - 1,), shape=(1,))
