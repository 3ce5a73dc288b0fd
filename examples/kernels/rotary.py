"""Rotary position embedding (NeoX style, rotating halves), in place.

x is (T, H, D) viewed by the host as (T, H, 2, D / 2): [.., 0, :] is the first
half, [.., 1, :] the second. Each block takes one token and TILE_H heads,
looks up cos/sin for the token's position in the (max_positions, D / 2) cache
and writes

    x1' = x1 * cos - x2 * sin,    x2' = x2 * cos + x1 * sin.
"""

import cuda.tile as ct


@ct.kernel
def rotary_kernel(x, positions, cos_cache, sin_cache, TILE_H: ct.Constant[int],
                  HALF_D: ct.Constant[int]):
    token = ct.bid(0)
    head_block = ct.bid(1)
    pos = ct.load(positions, index=(token,), shape=())
    cos = ct.astype(ct.load(cos_cache, index=(pos, 0), shape=(1, HALF_D)), ct.float32)
    sin = ct.astype(ct.load(sin_cache, index=(pos, 0), shape=(1, HALF_D)), ct.float32)
    first = ct.load(x, index=(token, head_block, 0, 0), shape=(1, TILE_H, 1, HALF_D),
                    padding_mode=ct.PaddingMode.ZERO)
    second = ct.load(x, index=(token, head_block, 1, 0), shape=(1, TILE_H, 1, HALF_D),
                     padding_mode=ct.PaddingMode.ZERO)
    x1 = ct.astype(ct.reshape(first, (TILE_H, HALF_D)), ct.float32)
    x2 = ct.astype(ct.reshape(second, (TILE_H, HALF_D)), ct.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    shape = (1, TILE_H, 1, HALF_D)
    ct.store(x, index=(token, head_block, 0, 0), tile=ct.reshape(ct.astype(out1, x.dtype), shape))
    ct.store(x, index=(token, head_block, 1, 0), tile=ct.reshape(ct.astype(out2, x.dtype), shape))
