"""Batched matrix multiply C[b] = A[b] @ B[b] with mma and a K loop.

The grid is (tiles of one C matrix, batch). Block 0's index is split into a
(row, column) tile position with the number of column tiles of C, as
`ct.num_tiles` reports it. Tiles are loaded as (1, TILE_M, TILE_K) slabs of
the 3-D operands and reshaped to 2-D for the mma.
"""

import cuda.tile as ct


@ct.kernel
def batched_matmul_kernel(a, b, c, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int],
                          TILE_K: ct.Constant[int]):
    tile_id = ct.bid(0)
    batch = ct.bid(1)
    tiles_n = ct.num_tiles(c, axis=2, shape=(1, TILE_M, TILE_N))
    bm = tile_id // tiles_n
    bn = tile_id % tiles_n
    num_k_tiles = ct.num_tiles(a, axis=2, shape=(1, TILE_M, TILE_K))
    acc = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
    for k in range(num_k_tiles):
        a_tile = ct.load(a, index=(batch, bm, k), shape=(1, TILE_M, TILE_K),
                         padding_mode=ct.PaddingMode.ZERO)
        b_tile = ct.load(b, index=(batch, k, bn), shape=(1, TILE_K, TILE_N),
                         padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.reshape(a_tile, (TILE_M, TILE_K)), ct.reshape(b_tile, (TILE_K, TILE_N)),
                     acc)
    result = ct.reshape(ct.astype(acc, c.dtype), (1, TILE_M, TILE_N))
    ct.store(c, index=(batch, bm, bn), tile=result)
