"""The Tile IR engine: parse `cuda_tile` MLIR text, canonicalise, diff, compare SASS."""
