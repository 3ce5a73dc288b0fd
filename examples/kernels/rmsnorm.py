"""RMSNorm forward: y = x / sqrt(mean(x^2) + eps) * weight, one row per block.

The row is one (1, TILE_N) tile padded with zeros, so padding adds nothing to
the sum of squares; the mean divides by the true row length x.shape[1].
"""

import cuda.tile as ct


@ct.kernel
def rmsnorm_kernel(x, weight, y, eps: float, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    tile = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.ZERO)
    v = ct.astype(tile, ct.float32)
    n_cols = ct.astype(x.shape[1], ct.float32)
    mean_square = ct.sum(v * v, axis=1, keepdims=True) / n_cols
    inv_rms = ct.rsqrt(mean_square + eps)
    w = ct.load(weight, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO)
    w = ct.reshape(ct.astype(w, ct.float32), (1, TILE_N))
    ct.store(y, index=(row, 0), tile=ct.astype(v * inv_rms * w, y.dtype))
