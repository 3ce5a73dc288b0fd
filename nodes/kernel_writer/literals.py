"""Rust spellings of `constant` op values that cutile-rs encodes bit-exactly.

The parser normalises a constant to `type:value` with floats as bit patterns
(`f32:0x3fb8aa3b`). A float becomes the shortest decimal that rounds back to
the same bits in its type; zero of every type and the other associated
constants of f16 use their Rust names (`E::ZERO`, `f16::NEG_INFINITY`). A
constant of the dtype generic `E` or of bf16 goes through the module's declared
`constant_float_r<rank>`, whose f64 value cutile-rs rounds straight into the
element type, as cuTile did: one decimal that every configuration's value
rounds from (`-1e30` is -inf in f16 and 0xf14a in bf16), `f64::INFINITY` for
an infinity. Not `bf16::ONE` or `E::INFINITY`: cutile-rs writes a named 16-bit
constant as four hex digits and reads those back as f16 bits, so bf16's one
(0x3f80) became 1.875 and its infinities NaN (docs/UPSTREAM_GAPS.md, G18).
Where no decimal gives every configuration's bits, it is an f32 constant
converted to `E` (`convert_tile(constant(0.5f32, ..))`); verification decides
whether that is the same machine code.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from nodes.kernel_writer.errors import Blocked
from tileir.attrs import bf16_bits
from tileir.ir import Op

_FLOAT_WIDTH = {"f16": ("e", 2), "f32": ("f", 4), "f64": ("d", 8)}
_ASSOCIATED = {0.0: "ZERO", 1.0: "ONE", math.inf: "INFINITY", -math.inf: "NEG_INFINITY"}
_F64_INFINITIES = {math.inf: "f64::INFINITY", -math.inf: "f64::NEG_INFINITY"}


@dataclass(frozen=True)
class RustLiteral:
    """`scalar`: a Rust expression of the scalar type (None when cutile-rs
    accepts the value only inside `constant(...)`); `dense`: the value as the
    first argument of `constant(value, shape)`."""

    scalar: str | None
    dense: str
    via_f32: bool = False  # `dense` is an f32 literal to convert to the generic E
    generic_float: bool = False  # `dense` is an f64 value cutile-rs encodes as E


def _float_from_bits(bits: int, element: str) -> float:
    if element == "bf16":
        return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
    fmt, size = _FLOAT_WIDTH[element]
    return float(struct.unpack("<" + fmt, bits.to_bytes(size, "little"))[0])


def _round_trips(text: str, value: float, element: str) -> bool:
    return _bits_of(float(text), element) == _bits_of(value, element)


def shortest_float(value: float, element: str) -> str:
    """The shortest decimal that rounds to `value` in `element`, with a point."""
    for digits in range(1, 18):
        text = f"{value:.{digits}g}"
        if _round_trips(text, value, element):
            break
    if "e" in text or "inf" in text or "nan" in text:
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{exponent}" if exponent else mantissa
    return text if "." in text else text + ".0"


def _bits_of(value: float, element: str) -> int:
    """`value` rounded to nearest-even in `element`, as cutile-rs encodes an f64
    literal (`half::f16::from_f64`, `as f32`); past the largest finite, infinity."""
    if element == "bf16":
        return bf16_bits(value)
    fmt, _ = _FLOAT_WIDTH[element]
    try:
        packed = struct.pack("<" + fmt, value)
    except OverflowError:
        packed = struct.pack("<" + fmt, math.copysign(math.inf, value))
    return int.from_bytes(packed, "little")


def common_decimal(values: Sequence[tuple[str, int]]) -> str | None:
    """One decimal that rounds to every `(element, bits)` given (a constant as each
    configuration of a dtype-generic kernel has it), else None: the shortest
    spelling of one of the values that gives the others' bits too."""
    finite = [(e, b) for e, b in values if math.isfinite(_float_from_bits(b, e))]
    candidates = sorted(
        {shortest_float(_float_from_bits(bits, element), element) for element, bits in finite},
        key=len,
    )
    for text in candidates:
        if all(_bits_of(float(text), element) == bits for element, bits in values):
            return text
    return None


def _same_constant(
    value: float, element: str, bits: int, peers: Sequence[tuple[str, int]]
) -> list[tuple[str, int]]:
    """The peers that are this constant in another dtype: one of the two rounds to
    the other. A peer at the same ordinal with another value is another constant
    (a dtype's reference placed its constants otherwise); no one decimal serves
    both, and verification judges that configuration on its own."""
    return [
        (e, b)
        for e, b in peers
        if _bits_of(_float_from_bits(b, e), element) == bits or _bits_of(value, e) == b
    ]


def _float_literal(
    bits: int,
    ir_element: str,
    rust: str,
    where: str,
    op: Op,
    peers: Sequence[tuple[str, int]] = (),
) -> RustLiteral:
    value = _float_from_bits(bits, ir_element)
    if math.isnan(value):
        raise Blocked(op.name, where, "a NaN constant has no exact cutile-rs spelling")
    negative_zero = value == 0.0 and math.copysign(1.0, value) < 0
    if rust in ("E", "bf16"):
        peers = _same_constant(value, ir_element, bits, peers)
        same = all(_float_from_bits(b, e) == value for e, b in peers)
        if value == 0.0 and not negative_zero and same:
            return RustLiteral(None, f"{rust}::ZERO")
        if math.isinf(value) and same:
            return RustLiteral(None, _F64_INFINITIES[value], generic_float=True)
        decimal = common_decimal([(ir_element, bits), *peers])
        if decimal is not None:
            return RustLiteral(None, decimal, generic_float=True)
        return RustLiteral(None, f"{shortest_float(value, ir_element)}f32", via_f32=True)
    if rust == "f16":
        if value in _ASSOCIATED and not negative_zero:
            return RustLiteral(None, f"f16::{_ASSOCIATED[value]}")
        # `constant(2.0, ..)` is a tile of Rust's float, not of f16: the declared
        # `constant_float_r<rank>` rounds its f64 into the element type, as cuTile did.
        return RustLiteral(None, shortest_float(value, ir_element), generic_float=True)
    if math.isinf(value):
        return RustLiteral(None, f"{rust}::{'INFINITY' if value > 0 else 'NEG_INFINITY'}")
    text = shortest_float(value, ir_element)
    return RustLiteral(f"{text}{rust}", f"{text}{rust}")


def constant_literal(
    value: str, rust: str, where: str, op: Op, peers: Sequence[str] = ()
) -> RustLiteral:
    """`value` is the parser's `type:value`; `rust` the Rust element type; `peers`
    the same constant in the variant's other configurations (for `E`)."""
    ir_element, _, body = value.partition(":")
    body = body.strip()
    if body.startswith("["):
        raise Blocked(op.name, where, "a non-splat dense constant")
    if ir_element == "i1":
        text = "true" if body in ("1", "-1", "true") else "false"
        return RustLiteral(text, text)
    if ir_element in ("f16", "bf16", "f32", "f64"):
        bits = int(body, 16) if body.lower().startswith("0x") else None
        if bits is None:
            raise Blocked(op.name, where, f"unreadable float constant {value}")
        return _float_literal(bits, ir_element, rust, where, op, _float_peers(peers))
    if ir_element.startswith("i"):
        number = int(body)
        if rust.startswith("u") and number < 0:
            number += 1 << int(ir_element[1:])
        if rust == "E":
            if number == 0:
                return RustLiteral(None, "E::ZERO")
            raise Blocked(op.name, where, "a dtype-generic integer constant")
        return RustLiteral(f"{number}{rust}", f"{number}{rust}")
    raise Blocked(op.name, where, f"constant of type {ir_element}")


def integral_float(value: str) -> int | None:
    """The integer a float constant (the parser's `type:0xbits`) holds exactly, if it
    holds one: `x / N` writes N as a float constant."""
    ir_element, _, body = value.partition(":")
    body = body.strip()
    if ir_element not in ("f16", "bf16", "f32", "f64") or not body.lower().startswith("0x"):
        return None
    number = _float_from_bits(int(body, 16), ir_element)
    return int(number) if math.isfinite(number) and number == int(number) else None


def _float_peers(peers: Sequence[str]) -> list[tuple[str, int]]:
    out = []
    for peer in peers:
        element, _, body = peer.partition(":")
        body = body.strip()
        if (element in _FLOAT_WIDTH or element == "bf16") and body.lower().startswith("0x"):
            out.append((element, int(body, 16)))
    return out
