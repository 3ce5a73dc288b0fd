"""Row softmax: y[i, :] = softmax(x[i, :]) along the last axis.

One block per row. The row is loaded as a single (1, TILE_N) tile; columns past
the row's end read as -inf, so they add nothing to the max and exp(-inf) = 0
adds nothing to the sum. Arithmetic runs in float32 whatever the input dtype.
"""

import cuda.tile as ct


@ct.kernel
def softmax_kernel(x, y, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    tile = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
    tile = ct.astype(tile, ct.float32)
    row_max = ct.max(tile, axis=1, keepdims=True)
    numerator = ct.exp(tile - row_max)
    denominator = ct.sum(numerator, axis=1, keepdims=True)
    result = numerator / denominator
    ct.store(y, index=(row, 0), tile=ct.astype(result, y.dtype))
