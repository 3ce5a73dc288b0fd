"""Attention decode (one new token per sequence) with an online softmax.

Multi-query layout: q is (B, H, D), the KV cache k/v is (B, S_max, D) with one
KV head shared by all query heads, and seq_lens[b] says how many cache
positions of sequence b are valid. One block per (sequence, TILE_H query
heads) walks the cache in TILE_S chunks:

    s = (q @ k^T) * scale * log2(e)        masked to -inf past seq_lens[b]
    m' = max(m, rowmax(s));  p = exp2(s - m')
    l = l * exp2(m - m') + rowsum(p);  acc = acc * exp2(m - m') + p @ v

and writes out = acc / l and the base-2 log-sum-exp m + log2(l) per head (for
combining split-KV partial results).
"""

import math

import cuda.tile as ct

LOG2E = 1.0 / math.log(2.0)


@ct.kernel
def attention_decode_kernel(q, k, v, seq_lens, out, lse, scale: float,
                            TILE_H: ct.Constant[int], TILE_S: ct.Constant[int],
                            HEAD_D: ct.Constant[int]):
    seq = ct.bid(0)
    head_block = ct.bid(1)
    seq_len = ct.load(seq_lens, index=(seq,), shape=())
    q_tile = ct.reshape(ct.load(q, index=(seq, head_block, 0), shape=(1, TILE_H, HEAD_D)),
                        (TILE_H, HEAD_D))
    qk_scale = scale * LOG2E
    row_max = ct.full((TILE_H, 1), -math.inf, dtype=ct.float32)
    row_sum = ct.full((TILE_H, 1), 0.0, dtype=ct.float32)
    acc = ct.full((TILE_H, HEAD_D), 0.0, dtype=ct.float32)
    positions = ct.reshape(ct.arange(TILE_S, dtype=ct.int32), (1, TILE_S))
    for chunk in range(ct.cdiv(seq_len, TILE_S)):
        k_tile = ct.reshape(ct.load(k, index=(seq, chunk, 0), shape=(1, TILE_S, HEAD_D),
                                    padding_mode=ct.PaddingMode.ZERO), (TILE_S, HEAD_D))
        v_tile = ct.reshape(ct.load(v, index=(seq, chunk, 0), shape=(1, TILE_S, HEAD_D),
                                    padding_mode=ct.PaddingMode.ZERO), (TILE_S, HEAD_D))
        scores = ct.mma(q_tile, ct.transpose(k_tile),
                        ct.full((TILE_H, TILE_S), 0.0, dtype=ct.float32)) * qk_scale
        in_range = chunk * TILE_S + positions < seq_len
        scores = ct.where(in_range, scores, -math.inf)
        new_max = ct.maximum(row_max, ct.max(scores, axis=1, keepdims=True))
        p = ct.exp2(scores - new_max)
        alpha = ct.exp2(row_max - new_max)
        row_sum = row_sum * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, v.dtype), v_tile, acc * alpha)
        row_max = new_max
    result = ct.reshape(ct.astype(acc / row_sum, out.dtype), (1, TILE_H, HEAD_D))
    ct.store(out, index=(seq, head_block, 0), tile=result)
    ct.store(lse, index=(seq, head_block), tile=ct.reshape(row_max + ct.log2(row_sum), (1, TILE_H)))
