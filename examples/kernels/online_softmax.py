"""Softmax over rows too long for one tile: an online (chunked) softmax.

Pass 1 walks the row in TILE_N chunks keeping a running maximum and a running
sum of exponentials, rescaling the sum whenever the maximum grows. Pass 2
walks it again and writes exp(x - max) / sum. Exponentials use exp2 with the
log2(e) factor folded in, as fused attention kernels do. Columns past the row's
end read as -inf and contribute nothing.
"""

import math

import cuda.tile as ct

LOG2E = 1.0 / math.log(2.0)


@ct.kernel
def online_softmax_kernel(x, y, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    num_chunks = ct.num_tiles(x, axis=1, shape=(1, TILE_N))
    running_max = ct.full((1, 1), -math.inf, dtype=ct.float32)
    running_sum = ct.full((1, 1), 0.0, dtype=ct.float32)
    for chunk in range(num_chunks):
        tile = ct.load(x, index=(row, chunk), shape=(1, TILE_N),
                       padding_mode=ct.PaddingMode.NEG_INF)
        scaled = ct.astype(tile, ct.float32) * LOG2E
        new_max = ct.maximum(running_max, ct.max(scaled, axis=1, keepdims=True))
        chunk_sum = ct.sum(ct.exp2(scaled - new_max), axis=1, keepdims=True)
        running_sum = running_sum * ct.exp2(running_max - new_max) + chunk_sum
        running_max = new_max
    for chunk in range(num_chunks):
        tile = ct.load(x, index=(row, chunk), shape=(1, TILE_N),
                       padding_mode=ct.PaddingMode.NEG_INF)
        scaled = ct.astype(tile, ct.float32) * LOG2E
        result = ct.exp2(scaled - running_max) / running_sum
        ct.store(y, index=(row, chunk), tile=ct.astype(result, y.dtype))
