"""Specialisation classes the records do not show.

cuTile Python compiles one kernel per specialisation of a launch: the arrays'
dtypes, the constants, and the launch facts (base alignment, divisibility of
extents and strides by 16, extents of 1). Recorded launches are a few points of
that space; a port proven only on them refuses the next bf16 or unaligned call.
For each variant of a spec this adds test configurations of the classes its
recorded ones lack:

- every floating element type of `FLOAT_CLASSES` in place of the recorded one
  (the arrays that follow the configuration's dtype take it; arrays recorded
  with another dtype keep theirs);
- a ragged configuration: every extent symbol made odd, so every shape fact (and
  every row-major stride fact) takes its weakest value. The constants a rule
  derives from the extents follow them (`Rederive`: gelu's N_ELEMENTS is x's
  length), the others keep the source configuration's values; not where the
  configuration fixes strides, producers or input values, which follow the
  recorded shapes.
  Where a variant's condition holds only for aligned values of some extent (the
  rows of an RMS norm fill their tiles), one configuration per extent made odd
  alone stands in for it (`ragged_extent`), each kept if it stays in the variant,
  and so does one with every aligned extent made 8 (`half_aligned`: a tile-filling
  row of a power-of-two length, 2 to 8, takes no odd value but weakens its fact);
- an unaligned configuration: every array starting one element past a 16-byte
  boundary (a view such as `x[1:]`), so every address fact takes its weakest value;
- extents of 1 (`unit_configs`, when asked for): a launch makes an extent of 1 a shape constant
  (and the stride beside it a stride constant), so its kernel's entry differs. Per
  variant and extent symbol, a variant of its own (`UnitVariant`: the variant's
  condition and that extent being 1, dispatched first) with each configuration the
  variant kept, that extent made 1, so the one-row or one-column launch runs a
  proven entry, not the dynamic one compiled for other extents. Not from a
  configuration that fixes input values (`_reshapable`).

The kernel writer proves the port on them as on any configuration; what varies
becomes a generic (the element type `E`, fact generics like `X_SHAPE_0_DIV`).
`keep_serving` drops an added configuration that another variant dispatches or
that the reference itself does not compile (a class the reference does not
serve is not one the port must serve).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from schemas.port_spec import Config, PortSpec

FLOAT_CLASSES: Final = ("float32", "float16", "bfloat16")
FACT_DIVISOR: Final = 16  # what launch facts count divisibility up to


@dataclass(frozen=True)
class ClassConfig:
    """An added configuration and the recorded one it was made from."""

    config: dict[str, Any]
    source: str
    # "dtype", "ragged", "ragged_extent" (one extent made odd alone) and
    # "half_aligned" (every aligned extent made 8), each kept only where the
    # variant's ragged class is not, "unaligned", or "unit" (an extent made 1).
    kind: str = "dtype"
    # The variant it must dispatch to where not its source's (a unit variant).
    variant: str | None = None


def ragged(dims: dict[str, int]) -> bool:
    """Whether every extent has a weak shape fact (an extent of 1 is a static shape,
    not a fact), so each fact generic sees its weakest value: one ragged extent
    beside aligned ones leaves the others' facts literal."""
    extents = [value for value in dims.values() if value > 1]
    return bool(extents) and all(value % FACT_DIVISOR for value in extents)


def _odd(value: int) -> int:
    """The nearest odd extent at or below `value` (2 becomes 3); 1 stays, since an
    extent of 1 is a variant of its own."""
    if value <= 1 or value % 2:
        return value
    return 3 if value == 2 else value - 1


def _half_aligned(value: int) -> int:
    """An extent divisible by 16 made `FACT_DIVISOR // 2` (8): a weaker shape fact
    that a variant keeping its extents powers of two (a row filling one tile) still
    takes, where no odd extent stays in it."""
    return FACT_DIVISOR // 2 if value > 1 and value % FACT_DIVISOR == 0 else value


# A configuration's constants for other extents, or None where they cannot follow.
Rederive = Callable[[dict[str, Any], dict[str, int]], "dict[str, Any] | None"]


def _layout_free(config: dict[str, Any]) -> bool:
    """Whether the configuration leaves its layout and inputs to the spec, so
    changing its extents keeps it a launch the host makes."""
    return not (config.get("strides") or config.get("producers"))


def _reshapable(config: dict[str, Any]) -> bool:
    """Whether the configuration's extents may change: it leaves its layout and inputs
    to the spec and fixes no input's values. Recorded values (a permutation of the
    rows, ids below another array's extent) hold for the recorded shapes only: cut
    to other extents, they would no longer be one value per element, nor be
    indices in range or free of duplicates, and random ones in their place make the
    reference race on duplicate targets, so that no port could pass. Such a
    configuration gets no ragged or unit class (the dtype and unaligned classes,
    which keep its shapes, keep its values)."""
    return _layout_free(config) and not config.get("values")


def class_configs(
    configs: Sequence[dict[str, Any]],
    variants: Sequence[str],
    rederive: Rederive,
    arrays: Sequence[str] = (),
) -> list[ClassConfig]:
    """The configurations to add, `variants[i]` being the variant of `configs[i]`:
    per variant, the element types, the ragged and the unaligned class (of `arrays`)
    none of its configurations has, each made from the variant's first configuration
    that can take it."""
    taken = {c["name"] for c in configs}
    added: list[ClassConfig] = []

    def add(config: dict[str, Any], source: str, suffix: str, kind: str = "dtype") -> None:
        name = f"{source}_{suffix}"
        while name in taken:
            name += "_"
        taken.add(name)
        config["name"] = name
        added.append(ClassConfig(config, source, kind))

    dtypes = {(v, c["dtype"]) for c, v in zip(configs, variants, strict=True)}
    unaligned = {v for c, v in zip(configs, variants, strict=True) if c.get("storage_offsets")}
    raggeds = {v for c, v in zip(configs, variants, strict=True) if ragged(c.get("dims", {}))}
    pairs = list(zip(configs, variants, strict=True))
    # A configuration naming the arrays that keep their dtype (`array_dtypes`) first:
    # in one whose arrays all have its dtype, every array would take the new one.
    for config, variant in sorted(pairs, key=lambda pair: not pair[0].get("array_dtypes")):
        if config.get("producers") or config["dtype"] not in FLOAT_CLASSES:
            continue
        for dtype in FLOAT_CLASSES:
            if (variant, dtype) not in dtypes:
                dtypes.add((variant, dtype))
                widened = copy.deepcopy(config)
                widened["dtype"] = dtype
                add(widened, config["name"], f"as_{dtype}")
    for config, variant in pairs:
        if config.get("producers") or config["dtype"] not in FLOAT_CLASSES:
            continue
        if variant not in unaligned and _layout_free(config) and arrays:
            unaligned.add(variant)
            shifted = copy.deepcopy(config)
            shifted["storage_offsets"] = {name: 1 for name in arrays}
            add(shifted, config["name"], "unaligned", "unaligned")
        dims = config.get("dims", {})
        odd = {name: _odd(value) for name, value in dims.items()}
        if variant in raggeds or not _reshapable(config) or not ragged(odd):
            continue
        raggeds.add(variant)
        moved = [name for name, value in odd.items() if value != dims[name]]
        half = {name: _half_aligned(value) for name, value in dims.items()}
        for changed, suffix, kind in [
            (odd, "ragged", "ragged"),
            *(
                ({**dims, name: value}, f"ragged_{name.lower()}", "ragged_extent")
                for name, value in odd.items()
                if value != dims[name] and len(moved) > 1
            ),
            *([(half, "half_aligned", "half_aligned")] if half != dims else []),
        ]:
            shaped = _reshaped(config, changed, rederive)
            if shaped is not None:
                add(shaped, config["name"], suffix, kind)
    return added


def _reshaped(
    config: dict[str, Any], dims: dict[str, int], rederive: Rederive
) -> dict[str, Any] | None:
    """`config` at the extents `dims`, its constants rederived for them; None where
    they cannot be."""
    constants = rederive(config, dims) if config.get("constants") else {}
    if constants is None:
        return None
    shaped = copy.deepcopy(config)
    shaped["dims"] = dims
    if constants:
        shaped["constants"] = constants
    return shaped


@dataclass(frozen=True)
class UnitVariant:
    """A variant for the launches of `base` whose extent `symbol` is 1."""

    base: str
    symbol: str

    @property
    def name(self) -> str:
        return f"{self.base}_{self.symbol.lower()}_1"

    def condition(self, when: str) -> str:
        """Its dispatch condition, `when` being its base's."""
        one = f"{self.symbol} == 1"
        return one if when.strip() == "True" else f"({when}) and ({one})"


def tied_symbols(shapes: Iterable[Sequence[object]]) -> set[str]:
    """The extent symbols that name two extents of one array (`shapes`: each array's
    shape). Such a tie is what the records happened to hold (every recorded
    layer_norm input was square): a unit variant of it would be proven with every
    tied extent 1 but dispatched on one, so other code would run than was proven."""
    tied: set[str] = set()
    for shape in shapes:
        names = [extent for extent in shape if isinstance(extent, str)]
        tied.update(name for name in names if names.count(name) > 1)
    return tied


def unit_configs(
    configs: Sequence[dict[str, Any]],
    variants: Sequence[str],
    rederive: Rederive,
    taken: set[str],
    tied: set[str],
) -> tuple[list[ClassConfig], list[UnitVariant]]:
    """For each configuration (`variants[i]` its variant) that leaves its layout and
    inputs to the spec (`_reshapable`), one per extent symbol above 1 with that extent
    made 1 (constants rederived), bound for that extent's unit variant; the same
    launch reached from two configurations is added once. `taken`: the names already
    used. `tied`: symbols naming two extents of one array (`tied_symbols`), which get
    none. Returns the configurations and their unit variants, in order."""
    added: list[ClassConfig] = []
    units: dict[str, UnitVariant] = {}
    seen: set[str] = set()
    for config, variant in zip(configs, variants, strict=True):
        if config.get("producers") or not _reshapable(config):
            continue
        dims = config.get("dims", {})
        for symbol, value in dims.items():
            if value == 1 or symbol in tied:
                continue
            shaped = _reshaped(config, {**dims, symbol: 1}, rederive)
            if shaped is None:
                continue
            unit = UnitVariant(variant, symbol)
            launch = json.dumps(
                [unit.name, {k: v for k, v in shaped.items() if k != "name"}], sort_keys=True
            )
            if launch in seen:
                continue
            seen.add(launch)
            name = f"{config['name']}_{symbol.lower()}_1"
            while name in taken:
                name += "_"
            taken.add(name)
            shaped["name"] = name
            units.setdefault(unit.name, unit)
            added.append(ClassConfig(shaped, config["name"], "unit", unit.name))
    return added, list(units.values())


def keep_serving(
    spec: PortSpec,
    added: Sequence[ClassConfig],
    compiles: Callable[[list[Config]], set[str]],
) -> tuple[list[ClassConfig], list[str]]:
    """The added configurations to keep in `spec` (written from the records alone),
    and why each other one was left out: it must resolve, dispatch to its source's
    variant, and compile as the reference (`compiles` returns the names of the
    configurations the reference exports)."""
    by_name = {c.name: c for c in spec.test_configs}
    dropped: list[str] = []
    candidates: list[tuple[ClassConfig, Config]] = []
    variant_of: dict[str, str] = {}
    for item in added:
        name = item.config["name"]
        try:
            config = Config.model_validate(item.config)
            resolved = spec.resolve(config, "test")
            source = spec.resolve(by_name[item.source], "test")
        except (ValueError, ValidationError) as error:
            dropped.append(f"{name}: {error}")
            continue
        wanted = item.variant or source.variant
        if resolved.variant != wanted:
            dropped.append(f"{name}: dispatches to variant {resolved.variant}, not {wanted}")
            continue
        candidates.append((item, config))
        variant_of[name] = wanted
    exported = compiles([config for _, config in candidates]) if candidates else set()
    for _, config in candidates:
        if config.name not in exported:
            dropped.append(f"{config.name}: the reference does not compile for it")
    served = [(item, config) for item, config in candidates if config.name in exported]
    whole = {variant_of[config.name] for item, config in served if item.kind == "ragged"}
    kept = []
    for item, config in served:
        if item.kind in ("ragged_extent", "half_aligned") and variant_of[config.name] in whole:
            continue  # the variant's ragged class serves: weaker facts than its add nothing
        kept.append(item)
    return kept, dropped
