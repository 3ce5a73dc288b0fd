"""Elementwise vector add: c = a + b over 1-D arrays of any length.

Each block handles TILE consecutive elements; the last block's tile runs past
the end of the arrays, its loads pad with zeros and its store is clipped.
"""

import cuda.tile as ct


@ct.kernel
def vector_add_kernel(a, b, c, TILE: ct.Constant[int]):
    block = ct.bid(0)
    a_tile = ct.load(a, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    b_tile = ct.load(b, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(block,), tile=a_tile + b_tile)
