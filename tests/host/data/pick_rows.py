# mypy: ignore-errors
"""The first row of every array of a list, gathered: out[i, :] = tables[i][0, :].
The smallest kernel with a list-of-arrays parameter, for the host builder's tests."""

import cuda.tile as ct


@ct.kernel
def pick_rows_kernel(tables, out, TILE_N: ct.Constant[int]):
    i = ct.bid(0)
    row = ct.load(
        tables[i], index=(0, ct.bid(1)), shape=(1, TILE_N), padding_mode=ct.PaddingMode.ZERO
    )
    ct.store(out, index=(i, ct.bid(1)), tile=row)
