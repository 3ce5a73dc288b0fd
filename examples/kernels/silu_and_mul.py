"""SiLU-and-mul (the gated MLP activation): out = silu(gate) * up.

The input holds [gate | up] along its last axis, shape (M, 2 * H); the host
passes it viewed as (M, 2, H), so gate is [:, 0, :] and up is [:, 1, :] and
both halves are addressed by tile index whatever H is.
silu(g) = g / (1 + exp(-g)), in float32.
"""

import cuda.tile as ct


@ct.kernel
def silu_and_mul_kernel(x, out, TILE_H: ct.Constant[int]):
    row = ct.bid(0)
    block = ct.bid(1)
    gate = ct.load(x, index=(row, 0, block), shape=(1, 1, TILE_H),
                   padding_mode=ct.PaddingMode.ZERO)
    up = ct.load(x, index=(row, 1, block), shape=(1, 1, TILE_H),
                 padding_mode=ct.PaddingMode.ZERO)
    g = ct.astype(ct.reshape(gate, (1, TILE_H)), ct.float32)
    u = ct.astype(ct.reshape(up, (1, TILE_H)), ct.float32)
    silu = g / (1.0 + ct.exp(-g))
    ct.store(out, index=(row, block), tile=ct.astype(silu * u, out.dtype))
