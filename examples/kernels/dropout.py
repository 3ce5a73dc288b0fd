"""Dropout with a counter-based hash RNG: y = x / (1 - p) where kept, else 0.

Each element's random number is the 32-bit MurmurHash3 of its flat index,
seeded with the 32-bit seed (its bits read as unsigned), so the mask is reproducible
from (seed, index) alone and the backward pass can regenerate it. The top 24
bits of the hash become a uniform float in [0, 1); an element is kept when it
is >= p.
"""

import cuda.tile as ct

C1 = 0xCC9E2D51
C2 = 0x1B873593
INV_2_POW_24 = 1.0 / 16777216.0


@ct.function
def rotl32(x, r: ct.Constant[int]):
    return (x << r) | (x >> (32 - r))


@ct.function
def murmur3_32(key, seed):
    k = rotl32(key * C1, 15) * C2
    h = rotl32(seed ^ k, 13) * 5 + 0xE6546B64
    h = h ^ 4
    h = (h ^ (h >> 16)) * 0x85EBCA6B
    h = (h ^ (h >> 13)) * 0xC2B2AE35
    return h ^ (h >> 16)


@ct.kernel
def dropout_kernel(x, y, seed, p, TILE: ct.Constant[int]):
    block = ct.bid(0)
    index = ct.astype(block * TILE + ct.arange(TILE, dtype=ct.int32), ct.uint32)
    bits = murmur3_32(index, ct.astype(seed, ct.uint32))
    uniform = ct.astype(bits >> 8, ct.float32) * INV_2_POW_24
    tile = ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    kept = ct.astype(tile, ct.float32) / (1.0 - p)
    ct.store(y, index=(block,), tile=ct.astype(ct.where(uniform >= p, kept, 0.0), y.dtype))
