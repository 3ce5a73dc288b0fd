"""Scaled activation: y = scale * gelu(x), GELU in its tanh approximation.

gelu(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), computed in
float32 over 2-D tiles; `scale` is a runtime scalar (a residual or output
scale folded into the activation).
"""

import math

import cuda.tile as ct

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


@ct.kernel
def scaled_gelu_kernel(x, y, scale: float, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    tile = ct.load(x, index=(bm, bn), shape=(TILE_M, TILE_N), padding_mode=ct.PaddingMode.ZERO)
    v = ct.astype(tile, ct.float32)
    inner = SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)
    gelu = 0.5 * v * (1.0 + ct.tanh(inner))
    ct.store(y, index=(bm, bn), tile=ct.astype(gelu * scale, y.dtype))
