"""Normalised attribute text: one spelling per meaning, whichever printer wrote it.

tileirdisasm writes `<f32: 0.000000e+00>` and `identities=[0xFF800000 : f32]`;
cutile-rs writes `<f32: 0.0>` and `identities=[-inf]`. Both become the value's
bit pattern in the element type (`f32:0xff800000`), so equal values compare
equal and different values (zero vs -0.0, -inf vs -3.4e38) do not.
"""

from __future__ import annotations

import math
import re
import struct
from fractions import Fraction

KEYWORD_CATEGORIES: dict[str, frozenset[str]] = {
    "memory_ordering": frozenset({"weak", "relaxed", "acquire", "release", "acq_rel"}),
    "memory_scope": frozenset({"tl_blk", "device", "sys"}),
    "signedness": frozenset({"signed", "unsigned"}),
    "comparison_predicate": frozenset(
        {
            "equal",
            "not_equal",
            "less_than",
            "less_than_or_equal",
            "greater_than",
            "greater_than_or_equal",
        }
    ),
    "comparison_ordering": frozenset({"ordered", "unordered"}),
    "flush_to_zero": frozenset({"flush_to_zero"}),
    "propagate_nan": frozenset({"propagate_nan"}),
}
# Keywords that name an attribute whose value is the next word (`overflow nsw`,
# cutile-rs's `rounding positive_inf` on divi).
VALUE_KEYWORDS = frozenset({"overflow", "rounding"})
CUDA_TILE_PREFIX = "#cuda_tile."

_FLOAT_FORMATS = {"f16": "e", "bf16": "bf16", "f32": "f", "tf32": "f", "f64": "d"}
_INT_WIDTH = re.compile(r"^i(\d+)$")
_SPACES = re.compile(r"\s+")
_ANGLE_NAME = re.compile(r"^(#?[A-Za-z_][A-Za-z0-9_.$]*)<(.*)>$", re.S)


# The rounding-mode enum as the bytecode numbers it (cutile-rs prints the
# number inside attribute dicts: `{rounding_mode = 0}`).
ROUNDING_MODES = (
    "nearest_even",
    "zero",
    "negative_inf",
    "positive_inf",
    "approx",
    "full",
    "nearest_int_to_zero",
    "nearest_away",
)


def rounding_name(text: str) -> str:
    text = text.strip()
    if text.isdigit() and int(text) < len(ROUNDING_MODES):
        return ROUNDING_MODES[int(text)]
    return text


def keyword_category(word: str) -> str | None:
    for category, words in KEYWORD_CATEGORIES.items():
        if word in words:
            return category
    return None


def squash(text: str) -> str:
    """Whitespace-insensitive text: single spaces, none inside brackets' edges."""
    text = _SPACES.sub(" ", text.strip())
    for opener in "([{<":
        text = text.replace(opener + " ", opener)
    for closer in ")]}>,":
        text = text.replace(" " + closer, closer)
    text = text.replace(" =", "=").replace("= ", "=").replace(", ", ",")
    return text.replace(",", ", ")


def split_angle(text: str) -> tuple[str, str]:
    """`div_by<16>` -> ("div_by", "16"); `<i32: 1>` -> ("", "i32: 1")."""
    text = text.strip()
    if text.startswith(CUDA_TILE_PREFIX):
        text = text[len(CUDA_TILE_PREFIX) :]
    found = _ANGLE_NAME.match(text)
    if found:
        return found.group(1), found.group(2).strip()
    if text.startswith("<") and text.endswith(">"):
        return "", text[1:-1].strip()
    return "", text


def float_bits(value: str, type_name: str) -> str | None:
    """The hex bit pattern of a float literal in `type_name`, or None when the
    literal or the type is not a float we know."""
    fmt = _FLOAT_FORMATS.get(type_name)
    if fmt is None:
        return None
    number = _float_value(value, fmt)
    if number is None:
        return None
    if fmt == "bf16":
        return f"0x{bf16_bits(number):04x}"
    try:
        packed = struct.pack("<" + fmt, number)
    except OverflowError:  # a literal beyond the type's range rounds to infinity
        packed = struct.pack("<" + fmt, math.copysign(math.inf, number))
    width = len(packed) * 2
    return f"0x{int.from_bytes(packed, 'little'):0{width}x}"


def bf16_bits(value: float) -> int:
    """`value` rounded to the nearest bfloat16 (ties to even), past the largest
    finite to infinity. Not the top half of its float32 bits: a printed bf16
    constant (`4.467770e-02`) lies a little below or above its value, and
    truncating it would give the neighbour below."""
    if math.isinf(value) or math.isnan(value):
        return int(struct.unpack("<I", struct.pack("<f", value))[0]) >> 16
    try:
        near = int(struct.unpack("<I", struct.pack("<f", value))[0]) >> 16
    except OverflowError:
        return 0xFF80 if value < 0 else 0x7F80
    exact = Fraction(value)

    def distance(candidate: int) -> tuple[Fraction, int]:
        neighbour = _float_from_hex_bits(candidate, "bf16")
        if math.isinf(neighbour) or math.isnan(neighbour):
            return (Fraction(10**400), 1)
        return (abs(Fraction(neighbour) - exact), candidate & 1)

    candidates = [c for c in (near - 1, near, near + 1) if 0 <= c <= 0xFFFF]
    return min(candidates, key=distance)


def _float_value(value: str, fmt: str) -> float | None:
    text = value.strip().lower()
    if text.startswith("0x"):
        return _float_from_hex_bits(int(text, 16), fmt)
    try:
        return float(text)
    except ValueError:
        return None


def _float_from_hex_bits(bits: int, fmt: str) -> float:
    if fmt == "bf16":
        return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
    size = struct.calcsize("<" + fmt)
    return float(struct.unpack("<" + fmt, bits.to_bytes(size, "little"))[0])


def scalar_literal(value: str, type_name: str) -> str:
    """`type:value` with floats as bit patterns and integers in decimal."""
    value = value.strip()
    bits = float_bits(value, type_name)
    if bits is not None:
        return f"{type_name}:{bits}"
    width = _INT_WIDTH.match(type_name)
    if width:
        return f"{type_name}:{_int_literal(value, int(width.group(1)))}"
    return f"{type_name}:{value}"


def _int_literal(value: str, width: int) -> str:
    if value in ("true", "false"):
        return "1" if value == "true" else "0"
    try:
        number = int(value, 0)
    except ValueError:
        return value
    if number >= 1 << (width - 1) and width > 1:
        number -= 1 << width
    return str(number)


def constant_value(angle_text: str) -> str:
    """`<f32: 0.000000e+00>` -> `f32:0x00000000`; dense lists are kept in
    normalised text with each element converted."""
    _, inner = split_angle(angle_text)
    if ":" not in inner:
        return squash(inner)
    type_name, _, body = inner.partition(":")
    type_name = type_name.strip()
    body = body.strip()
    if body.startswith("["):
        elements = re.split(r"[\[\],\s]+", body)
        converted = [scalar_literal(e, type_name).split(":", 1)[1] for e in elements if e]
        return f"{type_name}:[{', '.join(converted)}]"
    return scalar_literal(body, type_name)


def identities_value(text: str, element_types: list[str]) -> str:
    """`[0xFF800000 : f32]` or cutile-rs's `[-inf]` -> `[0xff800000 : f32]`.
    Untyped literals take the element type of the reduced operands, in order."""
    inner = text.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    parts = [p.strip() for p in inner.split(",") if p.strip()]
    out = []
    for index, part in enumerate(parts):
        value, _, type_name = part.partition(":")
        type_name = type_name.strip()
        if not type_name and index < len(element_types):
            type_name = element_types[index]
        if type_name:
            literal = scalar_literal(value, type_name).split(":", 1)[1]
            out.append(f"{literal} : {type_name}")
        else:
            out.append(value.strip())
    return "[" + ", ".join(out) + "]"


def optimization_hints_value(text: str) -> str:
    """`<default = {occupancy = 2}>` or `#cuda_tile.optimization_hints<sm_90 =
    {occupancy = 2}>` -> `sm_90={occupancy=2}`; empty architectures dropped,
    architectures and keys sorted."""
    _, inner = split_angle(text)
    hints = parse_hints(inner)
    parts = []
    for arch in sorted(hints):
        if hints[arch]:
            body = ", ".join(f"{k}={v}" for k, v in sorted(hints[arch].items()))
            parts.append(f"{arch}={{{body}}}")
    return ", ".join(parts)


def parse_hints(inner: str) -> dict[str, dict[str, str]]:
    """`default = {a = 1, b = 2}, sm_90 = {}` -> {"default": {"a": "1", "b": "2"}, "sm_90": {}}."""
    hints: dict[str, dict[str, str]] = {}
    for arch, body in re.findall(r"([A-Za-z0-9_]+)\s*=\s*\{([^}]*)\}", inner):
        entries: dict[str, str] = {}
        for item in body.split(","):
            key, sep, value = item.partition("=")
            if sep:
                entries[key.strip()] = value.strip()
        hints[arch] = entries
    return hints


def hint_entries(text: str) -> dict[str, str]:
    """All hints of an optimization_hints attribute, keyed `arch.key`."""
    _, inner = split_angle(text)
    return {
        f"{arch}.{key}": value
        for arch, entries in parse_hints(inner).items()
        for key, value in entries.items()
    }
