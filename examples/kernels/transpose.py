"""Transpose y = x^T, two ways to read the transposed tile.

VIA_ORDER=False loads a (TILE_M, TILE_N) tile of x and permutes it in
registers; VIA_ORDER=True asks the load itself for the transposed view
(`order=(1, 0)`, a dim map on the tensor view). Both store a (TILE_N, TILE_M)
tile of y at the mirrored tile index.
"""

import cuda.tile as ct


@ct.kernel
def transpose_kernel(x, y, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int],
                     VIA_ORDER: ct.Constant[bool]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    if VIA_ORDER:
        tile = ct.load(x, index=(bn, bm), shape=(TILE_N, TILE_M), order=(1, 0),
                       padding_mode=ct.PaddingMode.ZERO)
    else:
        tile = ct.permute(ct.load(x, index=(bm, bn), shape=(TILE_M, TILE_N),
                                  padding_mode=ct.PaddingMode.ZERO), (1, 0))
    ct.store(y, index=(bn, bm), tile=tile)
