"""Persistent matmul: a fixed grid of blocks strides over all C tiles, visiting
them in grouped (swizzled) order for L2 reuse.

Tile ids are walked GROUP_M rows of tiles at a time: consecutive ids run down a
group of GROUP_M tile rows before moving to the next tile column, so blocks
running together share A rows and B columns in L2. The last group may be
shorter (min). The grid is min(number of SMs, number of tiles).
"""

import cuda.tile as ct


@ct.kernel
def persistent_matmul_kernel(a, b, c, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int],
                             TILE_K: ct.Constant[int], GROUP_M: ct.Constant[int]):
    tiles_m = ct.cdiv(c.shape[0], TILE_M)
    tiles_n = ct.cdiv(c.shape[1], TILE_N)
    num_k_tiles = ct.cdiv(a.shape[1], TILE_K)
    tiles_per_group = GROUP_M * tiles_n
    for tile_id in range(ct.bid(0), tiles_m * tiles_n, ct.num_blocks(0)):
        group = tile_id // tiles_per_group
        first_m = group * GROUP_M
        group_rows = min(tiles_m - first_m, GROUP_M)
        within = tile_id % tiles_per_group
        bm = first_m + within % group_rows
        bn = within // group_rows
        acc = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        for k in range(num_k_tiles):
            a_tile = ct.load(a, index=(bm, k), shape=(TILE_M, TILE_K),
                             padding_mode=ct.PaddingMode.ZERO)
            b_tile = ct.load(b, index=(k, bn), shape=(TILE_K, TILE_N),
                             padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a_tile, b_tile, acc)
        ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))
