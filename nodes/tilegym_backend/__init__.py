"""Delivering ports as TileGym's own cutile-rs backend: `stage.add_op` writes an op's
files into a TileGym checkout; `test_run` runs TileGym's test files against them."""
