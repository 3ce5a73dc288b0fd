"""Just enough of PNG to read a browser screenshot: 8-bit RGB or RGBA,
non-interlaced, all five scanline filters."""

from __future__ import annotations

import struct
import zlib
from collections import Counter

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def unfilter(data: bytes, width: int, height: int, channels: int) -> list[bytearray]:
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    offset = 0
    for _ in range(height):
        kind = data[offset]
        line = bytearray(data[offset + 1 : offset + 1 + stride])
        offset += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(left, up, corner)) & 0xFF
        rows.append(line)
        previous = line
    return rows


def read_png(data: bytes) -> tuple[int, int, Counter[tuple[int, int, int]]]:
    """(width, height, count of each RGB colour)."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file")
    position = len(SIGNATURE)
    chunks: list[bytes] = []
    width = height = channels = 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
    rows = unfilter(zlib.decompress(b"".join(chunks)), width, height, channels)
    colours: Counter[tuple[int, int, int]] = Counter()
    for row in rows:
        for x in range(0, len(row), channels):
            colours[(row[x], row[x + 1], row[x + 2])] += 1
    return width, height, colours
