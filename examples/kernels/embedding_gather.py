"""Embedding lookup: out[i, :] = table[ids[i], :], or zeros where ids[i] < 0.

Each block gathers TILE_R rows of TILE_D columns. Row ids, table rows and
output rows are addressed through pointer gathers and scatters; masks clip the
ragged last block of ids, the ragged last column block, and padding ids (-1)
read zeros.
"""

import cuda.tile as ct


@ct.kernel
def embedding_gather_kernel(table, ids, out, TILE_R: ct.Constant[int],
                            TILE_D: ct.Constant[int]):
    rows = ct.bid(0) * TILE_R + ct.arange(TILE_R, dtype=ct.int32)
    cols = ct.bid(1) * TILE_D + ct.arange(TILE_D, dtype=ct.int32)
    row_ids = ct.gather(ids, (rows,), padding_value=-1)
    valid = ct.reshape(row_ids >= 0, (TILE_R, 1))
    row_ids_2d = ct.reshape(row_ids, (TILE_R, 1))
    cols_2d = ct.reshape(cols, (1, TILE_D))
    values = ct.gather(table, (row_ids_2d, cols_2d), mask=valid, padding_value=0)
    ct.scatter(out, (ct.reshape(rows, (TILE_R, 1)), cols_2d), values)
