"""Recover const generics by differential specialisation.

The reference is exported twice for one variant: at the variant's constant
values and at probe values chosen so that no two constants coincide (and no
probe equals any base value). Both exports are lifted to Rust by the same
deterministic lifter, so the two texts differ only where a constant moved the
IR. Each number that moved from a constant's base value to its probe value is
that constant's generic, and one that moved as a local the kernel derives from
its constants (`num_tiles`, passed in with them) is that local's; anything else
that moved (`2 * TILE` with no local naming it, a structural change) cannot be a
generic on stable Rust, and the variant falls back to literal-specialised entries.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.kernel_writer.naming import RESERVED, RUST_KEYWORDS

_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(i32|i64|u32|u64|f32|f64|usize)?"
    r"(?![A-Za-z0-9_])"
)
_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")
_POW2_CAP = 1 << 16
_FAR_CAP = 1 << 30  # a far probe value stays an i32
# How many candidates per constant, and combinations in all, a constrained probe tries.
_CANDIDATES_EACH = 8
_COMBINATIONS = 20_000
# What precedes a number that is a constant op's value in a lifted line.
_CONSTANT_VALUE = re.compile(r"(?:constant(?:_float_r\d+)?\(|generic_value::<)$")


@dataclass
class Recovery:
    """The lines with generics substituted, or why substitution is impossible."""

    lines: list[str] | None
    used: list[str] = field(default_factory=list)
    reason: str = ""
    # Lines where a constant's value (not its shape) moved: constants to lift again as
    # the generic's value.
    moved_lines: set[int] = field(default_factory=set)


def _split(line: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Non-number skeleton pieces and the (number, suffix) in between."""
    pieces: list[str] = []
    numbers: list[tuple[str, str]] = []
    last = 0
    for found in _NUMBER.finditer(line):
        pieces.append(line[last : found.start()])
        numbers.append((found.group(1), found.group(2) or ""))
        last = found.end()
    pieces.append(line[last:])
    return pieces, numbers


def generic_name(name: str) -> str:
    """The const generic standing for a constant of the source, or for a local the
    kernel derives from its constants: the source's own name, case kept (`block_n`
    stays `block_n`, `TILE` stays `TILE`), so that kernel.rs, the binding, the
    launchers and the reports all say what the source says. A character no Rust
    identifier takes becomes `_`; a Rust keyword, or a name the generated module
    already uses (a cutile function its body calls, the element type `E`), takes a
    trailing `_` (`type_`, `E_`), as a variable of the body would. The binding finds
    a generic's constant by this same rule (`binding.constant_of_generic`)."""
    ident = _NON_IDENT.sub("_", name) or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    if ident == "_" or ident in RUST_KEYWORDS or ident in RESERVED:
        ident += "_"
    return ident


def fact_stem(array: str) -> str:
    """The stem of an array's launch-fact generics (`X` of `X_ALIGN`,
    `X_SHAPE_1_DIV`): names the kernel writer makes, not the source's, so in upper
    case as Rust names its constants."""
    return _NON_IDENT.sub("_", array).upper()


def recover(
    base: list[str],
    probe: list[str],
    base_values: dict[str, int],
    probe_values: dict[str, int],
) -> Recovery:
    """Substitute each constant's generic name where the base and probe texts
    show its base and probe values at the same place."""
    if len(base) != len(probe):
        return Recovery(None, reason="the probe changed the kernel's structure (line count)")
    by_pair = {(str(base_values[c]), str(probe_values[c])): c for c in base_values}
    used: set[str] = set()
    moved: set[int] = set()
    out: list[str] = []
    for index, (left, right) in enumerate(zip(base, probe, strict=True)):
        left_pieces, left_numbers = _split(left)
        right_pieces, right_numbers = _split(right)
        if left_pieces != right_pieces:
            return Recovery(
                None, reason=f"the probe changed the kernel's structure (line {index + 1})"
            )
        rebuilt = [left_pieces[0]]
        for position, ((value, suffix), (other, _)) in enumerate(
            zip(left_numbers, right_numbers, strict=True)
        ):
            if value == other:
                rebuilt.append(value + suffix)
            else:
                constant = by_pair.get((value, other))
                if constant is None or suffix not in ("", "i32", "u32"):
                    constant = _float_of_constant(value, other, suffix, base_values, probe_values)
                if constant is None:
                    return Recovery(
                        None,
                        reason=f"a number moved with no constant's values ({value} -> {other}): "
                        "constant arithmetic, which stable Rust rejects in types",
                    )
                used.add(constant)
                if _CONSTANT_VALUE.search(left_pieces[position]):
                    moved.add(index)
                rebuilt.append(generic_name(constant))
            rebuilt.append(left_pieces[position + 1])
        out.append("".join(rebuilt))
    ordered = [c for c in base_values if c in used]
    return Recovery(out, used=ordered, moved_lines=moved)


def confirms(
    first: list[str],
    check: list[str],
    base_values: dict[str, int],
    check_values: dict[str, int],
) -> bool:
    """Whether a second probe's recovery (`check`, from the values `check_values`)
    confirms the first's: the same lines, except where constants with one base value
    share the check's value too (geglu's two strides, both 0, both 11), which the
    check cannot tell apart, so it may name either where the first named one."""
    groups: dict[tuple[int, int], list[str]] = {}
    for name, value in base_values.items():
        groups.setdefault((value, check_values[name]), []).append(name)
    alias: dict[str, str] = {}
    for names in groups.values():
        for name in names[1:]:
            alias[generic_name(name)] = generic_name(names[0])
    if not alias:
        return first == check
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, alias)) + r")\b")

    def canonical(lines: list[str]) -> list[str]:
        return [pattern.sub(lambda found: alias[found[1]], line) for line in lines]

    return canonical(first) == canonical(check)


def _float_of_constant(
    value: str,
    other: str,
    suffix: str,
    base_values: dict[str, int],
    probe_values: dict[str, int],
) -> str | None:
    """The integer constant a float number is the value of in both texts (`x / N`
    makes `N` a float constant): its line is lifted again from the generic, as a
    conversion (`generic_value` through `itof`), which tileiras folds back."""
    if suffix not in ("", "f16", "f32", "f64") or "." not in value + other:
        return None
    for name, base in base_values.items():
        if float(value) == base and float(other) == probe_values[name]:
            return name
    return None


def probe_values(
    constants: dict[str, int], avoid: set[int], *, upward: bool = False
) -> dict[str, int]:
    """A distinct new value per constant: powers of two move to another power
    of two (tile shapes must stay powers of two), others by a small odd step;
    no probe equals another probe, a base value or anything in `avoid`. A constant
    with no free value (every power of two up to the cap taken) gets none.
    `upward` moves every constant up, so no product of constants stays put."""
    taken = set(constants.values()) | set(avoid)
    out: dict[str, int] = {}
    for name, value in constants.items():
        candidates = [c for c in _candidates(value) if c > value or not upward]
        for candidate in candidates:
            if candidate not in taken and candidate > 0:
                out[name] = candidate
                taken.add(candidate)
                break
    return out


def constrained_probe(
    constants: dict[str, int],
    avoid: set[int],
    accept: Callable[[dict[str, int]], bool],
    *,
    upward: bool = False,
) -> dict[str, int] | None:
    """`probe_values`, or where `accept` refuses them (the probe would take another
    side of a constant branch, or leave a derived number put), the first accepted
    combination of each constant's candidates; constants with one base value may
    then share a probe value (`TILE_SIZE == N` stays true). None where none is."""
    first = probe_values(constants, avoid, upward=upward)
    if set(first) == set(constants) and accept(first):
        return first
    taken = set(constants.values()) | set(avoid)
    pools = [
        [c for c in _candidates(value) if c > 0 and c not in taken and (c > value or not upward)][
            :_CANDIDATES_EACH
        ]
        for value in constants.values()
    ]
    bases = list(constants.values())
    # Distinct probes first: a shared one cannot tell its constants apart.
    for shared_allowed in (False, True):
        for combination in itertools.islice(itertools.product(*pools), _COMBINATIONS):
            shared = {
                (bases[i], bases[j])
                for i, j in itertools.combinations(range(len(bases)), 2)
                if combination[i] == combination[j]
            }
            if shared and (not shared_allowed or any(a != b for a, b in shared)):
                continue
            values = dict(zip(constants, combination, strict=True))
            if accept(values):
                return values
    return None


def _candidates(value: int) -> list[int]:
    if value > 0 and value & (value - 1) == 0:
        ups = [value << k for k in range(1, 17) if value << k <= _POW2_CAP]
        downs = [value >> k for k in range(1, 17) if value >> k >= 1]
        width = max(len(ups), len(downs))
        ups, downs = ups + [0] * (width - len(ups)), downs + [0] * (width - len(downs))
        return [c for pair in zip(ups, downs, strict=True) for c in pair if c]
    near = [value + step for step in (3, 5, 7, 11, 13, -3, -5, -7)]
    # Far values last: an upward probe of an extent-like constant (N beside a tile
    # size) may have to pass the tile for a quotient of both (cdiv(N, TILE)) to move.
    far = [value * factor + 3 for factor in (2, 4, 8) if value * factor + 3 < _FAR_CAP]
    return near + far
