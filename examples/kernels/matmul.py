"""Matrix multiply C = A @ B with tensor-core mma and a loop over K.

One block per (TILE_M, TILE_N) tile of C. Each K step loads a (TILE_M, TILE_K)
tile of A and a (TILE_K, TILE_N) tile of B (zero-padded past the edges, so a
ragged K adds nothing) and accumulates in float32; the result is converted to
C's dtype once at the end.
"""

import cuda.tile as ct


@ct.kernel
def matmul_kernel(a, b, c, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int],
                  TILE_K: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    num_k_tiles = ct.cdiv(a.shape[1], TILE_K)
    acc = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
    for k in range(num_k_tiles):
        a_tile = ct.load(a, index=(bm, k), shape=(TILE_M, TILE_K),
                         padding_mode=ct.PaddingMode.ZERO)
        b_tile = ct.load(b, index=(k, bn), shape=(TILE_K, TILE_N),
                         padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a_tile, b_tile, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))
