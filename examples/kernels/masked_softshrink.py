"""Masked elementwise: soft shrinkage where a byte mask is set, identity elsewhere.

    y = sign(x) * max(|x| - lambd, 0)   where mask != 0
    y = x                               where mask == 0

The mask is an int8 tensor of the same shape (attention-style byte masks).
"""

import cuda.tile as ct


@ct.kernel
def masked_softshrink_kernel(x, mask, y, lambd: float, TILE: ct.Constant[int]):
    block = ct.bid(0)
    v = ct.astype(ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO),
                  ct.float32)
    m = ct.load(mask, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    shrunk = ct.maximum(ct.abs(v) - lambd, 0.0)
    signed = ct.where(v < 0.0, -shrunk, shrunk)
    result = ct.where(m != 0, signed, v)
    ct.store(y, index=(block,), tile=ct.astype(result, y.dtype))
