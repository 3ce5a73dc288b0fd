"""Grouped GEMM for mixture-of-experts: out[rows of e] = x[rows of e] @ weights[e].

Tokens are sorted by expert; expert e owns rows expert_offsets[e] to
expert_offsets[e + 1] of x and out, and its weight is the e-th (K, N) array of
the `weights` list (experts' weights need not be contiguous). Block (t, n)
takes the t-th TILE_M-row tile counted over all experts in order: a while
loop walks the offsets until the expert whose tiles reach past t, then the
block multiplies that expert's rows, gathered by row id, with its weight tile
by tile over K. Blocks past the last tile (the grid is an upper bound) do
nothing.
"""

import cuda.tile as ct


@ct.kernel
def grouped_matmul_kernel(x, weights, expert_offsets, out, TILE_M: ct.Constant[int],
                          TILE_N: ct.Constant[int], TILE_K: ct.Constant[int]):
    tile_id = ct.bid(0)
    bn = ct.bid(1)
    num_experts = expert_offsets.shape[0] - 1
    expert = 0
    first_tile = 0
    start = ct.load(expert_offsets, index=(0,), shape=())
    end = ct.load(expert_offsets, index=(1,), shape=())
    end_tile = ct.cdiv(end - start, TILE_M)
    while (expert < num_experts) & (end_tile <= tile_id):
        expert += 1
        first_tile = end_tile
        start = end
        end = ct.load(expert_offsets, index=(ct.minimum(expert + 1, num_experts),), shape=())
        end_tile += ct.cdiv(end - start, TILE_M)
    if expert < num_experts:
        rows = start + (tile_id - first_tile) * TILE_M + ct.arange(TILE_M, dtype=ct.int32)
        rows_2d = ct.reshape(rows, (TILE_M, 1))
        row_mask = rows_2d < end
        weight = weights[expert]
        k_cols = ct.reshape(ct.arange(TILE_K, dtype=ct.int32), (1, TILE_K))
        acc = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        for k in range(ct.cdiv(x.shape[1], TILE_K)):
            a_tile = ct.gather(x, (rows_2d, k * TILE_K + k_cols), mask=row_mask)
            b_tile = ct.load(weight, index=(k, bn), shape=(TILE_K, TILE_N),
                             padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a_tile, b_tile, acc)
        cols = ct.reshape(bn * TILE_N + ct.arange(TILE_N, dtype=ct.int32), (1, TILE_N))
        ct.scatter(out, (rows_2d, cols), ct.astype(acc, out.dtype), mask=row_mask)
