"""Grouped GEMM for mixture-of-experts: out[rows of e] = x[rows of e] @ weights[e].

Tokens are sorted by expert; expert e owns rows expert_offsets[e] to
expert_offsets[e + 1] of x and out, and its weight is the e-th (K, N) array of
the `weights` list. Block (t, n) takes the t-th TILE_M-row tile counted over all
experts in order: it finds its expert by walking the offsets (a while loop that
breaks at the expert holding tile t), then multiplies its rows, gathered by
row id, with the expert's weight tile by tile over K. Blocks past the last
tile (the grid is an upper bound) do nothing.
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
    while expert < num_experts:
        start = ct.load(expert_offsets, index=(expert,), shape=())
        end = ct.load(expert_offsets, index=(expert + 1,), shape=())
        expert_tiles = ct.cdiv(end - start, TILE_M)
        if tile_id < first_tile + expert_tiles:
            break
        first_tile += expert_tiles
        expert += 1
    if expert < num_experts:
        start = ct.load(expert_offsets, index=(expert,), shape=())
        end = ct.load(expert_offsets, index=(expert + 1,), shape=())
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
