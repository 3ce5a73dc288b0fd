"""The launch grid as an expression of a kernel's shapes and constants.

Each recorded launch gives one grid; the host computed it from the arguments
(`cdiv(M, TILE_M)`, `B * H`, `min(num_sms, tiles)`, ...). The simplest
expression from a small grammar that reproduces every record is taken: a
literal, a symbol, `cdiv(symbol, constant)`, a product of two of those, or
`num_sms` and `min(num_sms, ...)` of one (persistent kernels). Where nothing
fits, the expression picks the recorded value per configuration
(`a if DIMS == ... else b`), which is still exact for every record.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations_with_replacement
from math import prod

Scope = Mapping[str, int | float | bool]


@dataclass(frozen=True)
class Term:
    text: str
    values: tuple[int, ...]  # one per record


def _atoms(scopes: Sequence[Scope], symbols: Sequence[str], divisors: Sequence[str]) -> list[Term]:
    atoms = []
    for name in symbols:
        values = [scope[name] for scope in scopes]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            atoms.append(Term(name, tuple(int(v) for v in values)))
    for name in symbols:
        for divisor in divisors:
            if divisor == name:
                continue
            pairs = [(scope[name], scope[divisor]) for scope in scopes]
            if all(
                isinstance(n, int) and isinstance(d, int) and not isinstance(d, bool) and d > 0
                for n, d in pairs
            ):
                quotients = tuple(-(-int(n) // int(d)) for n, d in pairs)
                atoms.append(Term(f"cdiv({name}, {divisor})", quotients))
    return atoms


def _products(factors: list[Term], count: int) -> Iterator[Term]:
    for chosen in combinations_with_replacement(factors, count):
        values = tuple(prod(column) for column in zip(*(t.values for t in chosen), strict=True))
        yield Term(" * ".join(t.text for t in chosen), values)


def _candidates(
    shape_atoms: list[Term], other_atoms: list[Term], num_sms: tuple[int, ...]
) -> Iterator[Term]:
    """Simplest first, shapes before other scalars (a scalar may equal a grid by chance)."""
    yield from shape_atoms
    yield from _products(shape_atoms, 2)
    yield Term("num_sms", num_sms)
    for a in [*shape_atoms, *_products(shape_atoms, 2)]:
        yield Term(
            f"min(num_sms, {a.text})",
            tuple(min(s, x) for s, x in zip(num_sms, a.values, strict=True)),
        )
    yield from _products(shape_atoms, 3)
    yield from other_atoms
    for a in other_atoms:
        for b in shape_atoms:
            yield Term(
                f"{b.text} * {a.text}",
                tuple(x * y for x, y in zip(b.values, a.values, strict=True)),
            )


def grid_expression(
    grids: Sequence[int],
    scopes: Sequence[Scope],
    shapes: Sequence[str],
    others: Sequence[str],
    divisors: Sequence[str],
    config_keys: Sequence[str],
) -> int | str:
    """An expression over dimension symbols (`shapes`) and scalars and constants
    (`others`; `divisors` may divide) that gives `grids[i]` under `scopes[i]` for every
    record; `config_keys[i]` (a condition that holds only for record i's configuration)
    is used when nothing simpler fits."""
    if len(set(grids)) == 1:
        return grids[0]
    wanted = tuple(grids)
    num_sms = tuple(int(scope.get("num_sms", 132)) for scope in scopes)
    shape_atoms = _atoms(scopes, shapes, divisors)
    other_atoms = _atoms(scopes, others, divisors)
    for term in _candidates(shape_atoms, other_atoms, num_sms):
        if term.values == wanted:
            return term.text
    text = str(grids[-1])
    for grid, key in zip(reversed(grids[:-1]), reversed(config_keys[:-1]), strict=True):
        text = f"{grid} if {key} else ({text})"
    return text
