"""Cross-entropy loss per row: loss[i] = logsumexp(logits[i]) - logits[i, target[i]].

Rows of a large vocabulary are walked in TILE_V chunks with an online
log-sum-exp. Targets equal to ignore_index (-100) give a loss of 0; the target
column is read with a pointer gather at ct.maximum(target, 0), so an ignored row still
reads a valid address.
"""

import math

import cuda.tile as ct

IGNORE_INDEX = -100


@ct.kernel
def cross_entropy_kernel(logits, targets, loss, TILE_V: ct.Constant[int]):
    row = ct.bid(0)
    running_max = ct.full((1, 1), -math.inf, dtype=ct.float32)
    running_sum = ct.full((1, 1), 0.0, dtype=ct.float32)
    for chunk in range(ct.num_tiles(logits, axis=1, shape=(1, TILE_V))):
        tile = ct.astype(ct.load(logits, index=(row, chunk), shape=(1, TILE_V),
                                 padding_mode=ct.PaddingMode.NEG_INF), ct.float32)
        new_max = ct.maximum(running_max, ct.max(tile, axis=1, keepdims=True))
        running_sum = (running_sum * ct.exp(running_max - new_max)
                       + ct.sum(ct.exp(tile - new_max), axis=1, keepdims=True))
        running_max = new_max
    target = ct.load(targets, index=(row,), shape=())
    target_logit = ct.astype(ct.gather(logits, (row, ct.maximum(target, 0))), ct.float32)
    row_loss = ct.reshape(running_max + ct.log(running_sum), ()) - target_logit
    ct.store(loss, index=(row,), tile=ct.where(target == IGNORE_INDEX, 0.0, row_loss))
