"""LayerNorm forward with saved statistics, one row per block.

    mean = sum(x) / N,  var = sum((x - mean)^2) / N,  rstd = 1 / sqrt(var + eps)
    y = (x - mean) * rstd * weight + bias

Mean and rstd are written per row for the backward pass. Columns past N are
masked out of the variance (the centred padding would otherwise be -mean).
"""

import cuda.tile as ct


@ct.kernel
def layernorm_fwd_kernel(x, weight, bias, y, mean_out, rstd_out, eps: float,
                         TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    n_cols = x.shape[1]
    v = ct.astype(ct.load(x, index=(row, 0), shape=(1, TILE_N),
                          padding_mode=ct.PaddingMode.ZERO), ct.float32)
    mean = ct.sum(v, axis=1, keepdims=True) / n_cols
    cols = ct.reshape(ct.arange(TILE_N, dtype=ct.int32), (1, TILE_N))
    centred = ct.where(cols < n_cols, v - mean, 0.0)
    var = ct.sum(centred * centred, axis=1, keepdims=True) / n_cols
    rstd = ct.rsqrt(var + eps)
    w = ct.reshape(ct.astype(ct.load(weight, index=(0,), shape=(TILE_N,),
                                     padding_mode=ct.PaddingMode.ZERO), ct.float32), (1, TILE_N))
    b = ct.reshape(ct.astype(ct.load(bias, index=(0,), shape=(TILE_N,),
                                     padding_mode=ct.PaddingMode.ZERO), ct.float32), (1, TILE_N))
    ct.store(y, index=(row, 0), tile=ct.astype(centred * rstd * w + b, y.dtype))
    ct.store(mean_out, index=(row,), tile=ct.reshape(mean, (1,)))
    ct.store(rstd_out, index=(row,), tile=ct.reshape(rstd, (1,)))
