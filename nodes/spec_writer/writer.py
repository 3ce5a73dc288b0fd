"""Port specs from recorded launches of an unmodified kernel library.

For each `@ct.kernel` the launch file names, one spec (`docs/PORT_SPEC.md`) is
written beside the others in the output folder:

- the kernel by module under the source root (nothing copied);
- parameters from the records and the source: arrays (rank, dtypes, roles from
  the stores in the body), `ct.Constant` parameters as constants, other
  numbers as runtime scalars;
- dimension symbols: one per array extent, shared where extents agree in every
  record, a literal where an extent never changes;
- the grid as an expression that reproduces every record (`grid.py`);
- a variant per side of each constant branch (and per set of host hints);
- test configurations: one per variant and dtype (and per recorded set of the
  constants a first port's entries were specialised to), up to 96; then, up to
  32 in all, dtypes and launch-fact patterns, ragged shapes first, with the
  recorded strides and misalignment; perf configurations from the largest
  records; each gives its input arrays the values its record holds (small
  integer and bool tensors: `values`), so indices keep their meaning;
- the reference kernel itself as the correctness oracle.

Every spec is validated by loading it back.
"""

from __future__ import annotations

import ast
import copy
import itertools
import json
import os
import re
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from nodes.analyzer.branches import Scope, branch_outcome
from nodes.analyzer.source import KernelSource, SourceError, read_kernel_source
from nodes.spec_writer.classes import (
    ClassConfig,
    class_configs,
    keep_serving,
    tied_symbols,
    unit_configs,
)
from nodes.spec_writer.grid import grid_expression
from nodes.spec_writer.producers import ProducerPlan, producer_launches, producer_plan
from nodes.spec_writer.roles import Role, array_roles
from schemas.launch_capture import (
    BoolArg,
    FloatArg,
    IntArg,
    LaunchArg,
    LaunchRecord,
    SequenceArg,
    TensorArg,
)
from schemas.port_spec import (
    ITEMSIZE,
    Config,
    Hints,
    PortSpec,
    PortSpecError,
    ResolvedArray,
    parse_port_spec,
)
from schemas.reference_export import (
    ArrayArg,
    ArrayListArg,
    ConstantArg,
    ParamArg,
    ScalarArg,
    Specialisation,
)
from schemas.spec_expr import evaluate_int
from toolchain.reference_export import (
    ReferenceExportError,
    export_reference,
    launch_facts,
    mangled_symbol,
    specialise,
)
from toolchain.source_tree import SourceTree, SourceTreeError, constant_parameters

# Configurations that prove what the port is launched for (every variant in every
# dtype, every constant set a literal-specialised entry needs) are bounded only by
# MAX_PROVING_CONFIGS; those for other dtypes and fact patterns stop at
# MAX_TEST_CONFIGS.
MAX_PROVING_CONFIGS: Final = 96
MAX_TEST_CONFIGS: Final = 32
MAX_PERF_CONFIGS: Final = 3
NUM_SMS: Final = 132
# torch.testing.assert_close's defaults; integers and bools compare exactly.
DEFAULT_TOLERANCES: Final = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1.3e-6),
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
    "float8_e4m3fn": (0.125, 0.125),
    "float8_e5m2": (0.25, 0.25),
    "float8_e8m0fnu": (0.0, 0.0),  # powers of two: a port gives the same ones
}
HINT_NAMES: Final = {"occupancy": "occupancy", "num_ctas": "num_ctas", "num_cta_in_cga": "num_ctas"}


class SpecWriteError(ValueError):
    """A kernel's records cannot become a spec; says which kernel and why."""


@dataclass
class KernelLaunches:
    """Every record of one kernel."""

    file: str
    kernel: str
    records: list[LaunchRecord] = field(default_factory=list)


@dataclass(frozen=True)
class WrittenSpec:
    kernel: str
    file: str  # the kernel's file, as the records name it
    module: str
    path: Path
    records: int
    test_configs: int
    variants: int
    grid_literal: bool
    # Test configurations of specialisation classes the records lack (`classes`),
    # and those not added with why.
    classes: tuple[str, ...] = ()
    dropped_classes: tuple[str, ...] = ()


def group_by_kernel(records: Iterable[LaunchRecord]) -> list[KernelLaunches]:
    groups: dict[tuple[str, str], KernelLaunches] = {}
    for record in records:
        key = (record.file, record.kernel)
        groups.setdefault(key, KernelLaunches(record.file, record.kernel)).records.append(record)
    return list(groups.values())


def recorded_module(tree: SourceTree, file: str) -> str:
    """The dotted name of a record's kernel file under the source root; where the
    file is not there, the error names the recorded file, the root and the path tried."""
    path = tree.root / file
    module = tree.module_of(path)
    if not path.is_file():
        raise SpecWriteError(
            f"no module {module!r} under the source root {tree.root}: the recorded file "
            f"{file} is not at {path} (`tileport capture --source-root` records files "
            "relative to that folder; without it, relative to the sys.path entry that "
            "held them)"
        )
    return module


def outside_source_root(
    records: Iterable[LaunchRecord], source_root: Path
) -> tuple[list[LaunchRecord], list[str]]:
    """The records whose kernel file lies under `source_root`, and one line per kernel
    whose file lies outside it (absolute elsewhere, or leading out of it), saying so."""
    root = source_root.resolve()
    inside: list[LaunchRecord] = []
    outside: dict[tuple[str, str], str] = {}
    for record in records:
        if (root / record.file).resolve().is_relative_to(root):
            inside.append(record)
        else:
            outside[(record.file, record.kernel)] = (
                f"{record.file}::{record.kernel}: its file is outside the source root {root}"
            )
    return inside, list(outside.values())


def parse_hints(text: str | None) -> dict[str, dict[str, int]]:
    """`<default = {occupancy = 2}, sm_80 = {...}>` -> {"default": {"occupancy": 2}, ...}."""
    if not text:
        return {}
    parsed: dict[str, dict[str, int]] = {}
    for target, body in re.findall(r"(\w+)\s*=\s*\{([^}]*)\}", text):
        parsed[target] = {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(-?\d+)", body)}
    return parsed


# -- one argument ------------------------------------------------------------------


def _tensor(arg: LaunchArg) -> TensorArg | None:
    if isinstance(arg, TensorArg):
        return arg
    if isinstance(arg, SequenceArg) and arg.items and isinstance(arg.items[0], TensorArg):
        return arg.items[0]
    return None


def _tile_following(value: object, before: Mapping[str, int], after: Mapping[str, int]) -> object:
    """A free integer constant as it follows the extents it equals: a tile as wide as
    the row it fills (rms_norm's TILE_SIZE of N columns: no rule, since the host
    caps it by the element size) stays as wide when the row shrinks to another power
    of two, a tile's only possible shape. Extents it equals that move apart, or to a
    value no tile can have, leave it as it was: a square configuration whose rows
    alone shrink says nothing of which extent its tile spans."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    moved = {after.get(name, extent) for name, extent in before.items() if extent == value}
    if len(moved) != 1:
        return value
    [width] = moved
    return width if width > 0 and width & (width - 1) == 0 else value


def _number(arg: LaunchArg) -> bool | int | float:
    if isinstance(arg, IntArg | FloatArg | BoolArg):
        return arg.value
    raise SpecWriteError(f"a {arg.kind} argument where a number was recorded before")


def _row_major(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return strides[::-1]


def _fact_pattern(tensor: TensorArg) -> tuple[object, ...]:
    """What a launch specialises an array on (toolchain.reference_export.launch_facts)."""
    size = ITEMSIZE.get(tensor.dtype, 1)
    return (
        tensor.dtype,
        tuple(d % 16 == 0 for d in tensor.shape),
        tuple(d == 1 for d in tensor.shape),
        tuple(s == 1 or (s * size) % 16 == 0 for s in tensor.stride),
        tuple(s == 1 for s in tensor.stride),
        tensor.align16,
    )


# -- one kernel ----------------------------------------------------------------------


class KernelSpec:
    """The spec of one kernel, assembled from its records."""

    def __init__(
        self,
        tree: SourceTree,
        launches: KernelLaunches,
        hints: dict[str, str],
        recorded: Sequence[LaunchRecord] = (),
        widen: bool = False,
    ) -> None:
        self.tree = tree
        # Records as examples of the specialisation space (`classes`): every extent a
        # symbol, integer constants generic candidates rather than variant keys.
        self.widen = widen
        # Every record in recording order (other kernels' too): where producers come from.
        self.recorded = recorded
        self.producers: ProducerPlan | None = None
        self.launches = launches
        self.records = launches.records
        self.module = recorded_module(tree, launches.file)
        self.kernel = launches.kernel
        kernel_def = tree.kernel(self.module, self.kernel)
        self.params = self.records[0].params
        if kernel_def is not None and list(kernel_def.params) != self.params:
            raise SpecWriteError(
                f"{launches.file}:{kernel_def.line}: the records name parameters {self.params}, "
                f"the source {list(kernel_def.params)}"
            )
        self.constness = constant_parameters(tree, self.module, self.kernel)
        self.signature_hints = hints
        self.arrays = [
            p for p, a in zip(self.params, self.records[0].args, strict=True) if _tensor(a)
        ]
        self.lists = {
            p
            for p, a in zip(self.params, self.records[0].args, strict=True)
            if isinstance(a, SequenceArg)
        }
        self.constants = [
            p for p in self.params if p not in self.arrays and self.constness.get(p, False)
        ]
        self.scalars = [p for p in self.params if p not in self.arrays and p not in self.constants]
        self.dims, self.shapes = self._dimensions()
        self.source = self._kernel_source()
        self.dropped = 0
        self.constant_rules = self._constant_rules()
        self.bind_constants_per_config = False
        self.literal_constants: tuple[str, ...] = ()
        self.added: list[ClassConfig] = []

    def keep_compiled(self, symbols: set[str]) -> None:
        """Drop the records whose launch compiled no recorded entry (it failed)."""
        compiled = [r for r in self.records if self.symbol_of(r) in symbols]
        if not compiled:
            raise SpecWriteError("none of its launches compiled a recorded entry symbol")
        if len(compiled) < len(self.records):
            self.dropped = len(self.records) - len(compiled)
            self.records = compiled
            self.dims, self.shapes = self._dimensions()
            self.constant_rules = self._constant_rules()

    def _constant_rules(self) -> dict[str, str | int | float | bool | None]:
        """Each constant's default: a literal, or an expression of the dimensions (and
        earlier constants) that gives its value in every record, as the C launcher
        derives constants from the call's shapes; None where neither fits, and the
        constant's values then tell variants apart."""
        rules: dict[str, str | int | float | bool | None] = {}
        scopes: list[dict[str, int | float | bool]] = [
            dict(self.dim_values(r)) for r in self.records
        ]
        for name in self.constants:
            values = [_number(self.arg(r, name)) for r in self.records]
            derived = [c for c, rule in rules.items() if rule is not None]
            expression = (
                _shape_expression(values, scopes, sorted(set(self.dims.values())), derived)
                if len(set(values)) > 1 or self.widen
                else None
            )
            # One recorded value stays a literal unless the records are only examples
            # and the value is an extent's (gelu's N_ELEMENTS is x's length).
            rules[name] = values[0] if expression is None and len(set(values)) == 1 else expression
            if rules[name] is not None:  # later constants may divide by it
                for scope, value in zip(scopes, values, strict=True):
                    scope[name] = value
        return rules

    def variant_constants(self, record: LaunchRecord) -> tuple[tuple[str, object], ...]:
        """The constants whose values tell variants apart: those no rule derives; when
        widened, not the integers, which the kernel writer makes generic where the IR
        lets it (literal entries per value where not)."""
        free = self.free_integers()
        return tuple(
            (name, _number(self.arg(record, name)))
            for name, rule in self.constant_rules.items()
            if rule is None and name not in free
        )

    def generic_candidate(self, name: str) -> bool:
        return all(self.arg(r, name).kind == "int" for r in self.records)

    def free_integers(self) -> tuple[str, ...]:
        """Widened, the integer constants no rule derives: not variant keys, so a
        variant may hold several values of them (generic where the IR lets it)."""
        if not self.widen:
            return ()
        return tuple(
            name
            for name, rule in self.constant_rules.items()
            if rule is None and self.generic_candidate(name)
        )

    def rederive(self, config: dict[str, Any], dims: dict[str, int]) -> dict[str, Any] | None:
        """`config`'s constants for the extents `dims`: those a rule derives from the
        extents follow them, and so does a free integer (no rule: the records held
        several values) that equals extents of `config` which all move to one power
        of two (`_tile_following`); the others keep their values. None where a rule
        does not evaluate there."""
        scope: dict[str, int | float | bool] = {"num_sms": NUM_SMS, **dims}
        constants: dict[str, Any] = {}
        for name, value in config.get("constants", {}).items():
            rule = self.constant_rules.get(name)
            if isinstance(rule, str):
                try:
                    value = evaluate_int(rule, scope)
                except (KeyError, ValueError, ZeroDivisionError):
                    return None
            elif rule is None and name in self.constant_rules:
                value = _tile_following(value, config.get("dims", {}), dims)
            constants[name] = value
            scope[name] = value
        return constants

    # -- parameters and dimensions

    def arg(self, record: LaunchRecord, name: str) -> LaunchArg:
        return record.args[self.params.index(name)]

    def tensor(self, record: LaunchRecord, name: str) -> TensorArg:
        tensor = _tensor(self.arg(record, name))
        if tensor is None:
            raise SpecWriteError(f"{self.kernel}: {name} is not an array in every record")
        return tensor

    def _dimensions(self) -> tuple[dict[tuple[str, int], str], dict[str, list[int | str]]]:
        """A symbol per extent slot (shared by slots equal in every record) or a literal."""
        slots: dict[tuple[str, int], tuple[int, ...]] = {}
        for name in self.arrays:
            ranks = {len(self.tensor(r, name).shape) for r in self.records}
            if len(ranks) != 1:
                raise SpecWriteError(f"{self.kernel}: {name} has ranks {sorted(ranks)}")
            for axis in range(ranks.pop()):
                slots[(name, axis)] = tuple(self.tensor(r, name).shape[axis] for r in self.records)
        symbols: dict[tuple[str, int], str] = {}
        by_values: dict[tuple[int, ...], str] = {}
        taken = {p.upper() for p in self.params}
        for (name, axis), values in slots.items():
            if len(set(values)) == 1 and not self.widen:
                continue
            if values not in by_values:
                symbol = f"{name.upper()}_{axis}"
                while symbol in taken:
                    symbol += "_"
                taken.add(symbol)
                by_values[values] = symbol
            symbols[(name, axis)] = by_values[values]
        shapes: dict[str, list[int | str]] = {}
        for (name, axis), values in slots.items():
            shapes.setdefault(name, []).append(symbols.get((name, axis), values[0]))
        return symbols, shapes

    def _kernel_source(self) -> KernelSource | None:
        try:
            return read_kernel_source(self.tree.root / self.launches.file, self.kernel)
        except SourceError:
            return None

    def dim_values(self, record: LaunchRecord) -> dict[str, int]:
        return {
            symbol: self.tensor(record, name).shape[axis]
            for (name, axis), symbol in self.dims.items()
        }

    def scope(self, record: LaunchRecord) -> dict[str, int | float | bool]:
        values: dict[str, int | float | bool] = {"num_sms": NUM_SMS}
        values.update(self.dim_values(record))
        for name in [*self.constants, *self.scalars]:
            values[name] = _number(self.arg(record, name))
        return values

    def hints(self, record: LaunchRecord) -> dict[str, int]:
        """The hints the host set with replace_hints: those of the compiled entry that the
        kernel's decorator does not already give (per-target hints come from decorators)."""
        text = record.hints or self.signature_hints.get(record.symbol or "", None)
        if text is None:
            text = self.signature_hints.get(self.symbol_of(record), None)
        return self.host_hints(text)

    def host_hints(self, text: str | None) -> dict[str, int]:
        """The part of an entry's hints (as Tile IR prints them) that the host set."""
        parsed = parse_hints(text)
        if set(parsed) - {"default"}:
            return {}
        decorator = self._decorator_hints()
        chosen = {}
        for key, value in parsed.get("default", {}).items():
            name = HINT_NAMES.get(key)
            if name is not None and decorator.get(key) != value:
                chosen[name] = value
        return chosen

    def _decorator_hints(self) -> dict[str, int]:
        function = self.tree.module(self.module).function(self.kernel)
        found: dict[str, int] = {}
        for decorator in function.decorator_list if function else []:
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if isinstance(keyword.value, ast.Constant) and isinstance(
                        keyword.value.value, int
                    ):
                        found[str(keyword.arg)] = keyword.value.value
        return found

    def symbol_of(self, record: LaunchRecord) -> str:
        """The entry symbol a launch of `record` compiles: recorded, or mangled from the
        facts the launch derives."""
        return record.symbol or mangled_symbol(self.kernel, self.params, self.specialise(record))

    def launch_specialisation(self, record: LaunchRecord, variant: str) -> Specialisation:
        """What the launch of `record` compiled: its facts and the hints the host set."""
        hints = self.hints(record)
        return self.specialise(record).model_copy(
            update={"variant": variant, "hints": Hints(**hints) if hints else None}
        )

    def specialise(self, record: LaunchRecord) -> Specialisation:
        params: dict[str, ParamArg] = {}
        for name in self.params:
            arg = self.arg(record, name)
            if name in self.arrays:
                tensor = self.tensor(record, name)
                facts = launch_facts(
                    ResolvedArray(
                        dtype=tensor.dtype,  # type: ignore[arg-type]
                        shape=tensor.shape,
                        strides=tensor.stride,
                        storage_offset=0 if tensor.align16 else 1,
                        role="in",
                    )
                )
                params[name] = (
                    ArrayListArg(element=facts)
                    if isinstance(arg, SequenceArg)
                    else ArrayArg(facts=facts)
                )
            elif name in self.constants:
                params[name] = ConstantArg(value=_number(arg))
            else:
                kinds = {"int": "int32", "float": "float32", "bool": "bool"}
                params[name] = ScalarArg(dtype=kinds[arg.kind])  # type: ignore[arg-type]
        return Specialisation(variant="record", params=params)

    # -- variants

    def branch_key(self, record: LaunchRecord) -> tuple[object, ...]:
        if self.source is None:
            return ()
        scope = Scope(
            constants={n: _number(self.arg(record, n)) for n in self.constants},
            array_dtypes={n: self.tensor(record, n).dtype for n in self.arrays},
        )
        return tuple(
            branch_outcome(branch, scope, self.source.cutile_modules)
            for branch in self.source.branches
        )

    def variant_key(self, record: LaunchRecord) -> tuple[object, ...]:
        return (
            self.branch_key(record),
            tuple(sorted(self.hints(record).items())),
            self.variant_constants(record),
            self.unit_extents(record),
        )

    def unit_extents(self, record: LaunchRecord) -> tuple[tuple[bool, ...], ...]:
        """Which extents of each array are 1: a launch makes them shape constants,
        so the kernel's entry (its signature, its views) differs with them."""
        return tuple(
            tuple(extent == 1 for extent in self.tensor(record, name).shape)
            for name in self.arrays
            if name not in self.lists
        )

    # -- configurations

    def config_dtype(self, record: LaunchRecord) -> str:
        dtypes = [self.tensor(record, n).dtype for n in self.arrays]
        floats = [d for d in dtypes if d.startswith(("float", "bfloat"))]
        return (floats or dtypes)[0]

    def config(self, record: LaunchRecord, name: str) -> dict[str, Any]:
        dtype = self.config_dtype(record)
        config: dict[str, Any] = {"name": name, "dims": self.dim_values(record), "dtype": dtype}
        array_dtypes = {
            n: self.tensor(record, n).dtype
            for n in self.arrays
            if self.tensor(record, n).dtype != dtype
        }
        if array_dtypes:
            config["array_dtypes"] = array_dtypes
        if self.constants and self.bind_constants_per_config:
            config["constants"] = {n: _number(self.arg(record, n)) for n in self.constants}
        if self.scalars:
            config["scalars"] = {n: _number(self.arg(record, n)) for n in self.scalars}
        strides = {
            n: list(self.tensor(record, n).stride)
            for n in self.arrays
            if n not in self.lists
            and list(self.tensor(record, n).stride) != _row_major(self.tensor(record, n).shape)
        }
        if strides:
            config["strides"] = strides
        offsets = {n: 1 for n in self.arrays if not self.tensor(record, n).align16}
        if offsets:
            config["storage_offsets"] = offsets
        return config

    def ragged(self, record: LaunchRecord) -> bool:
        return any(v % 16 for v in self.dim_values(record).values())

    def size(self, record: LaunchRecord) -> int:
        total = 0
        for name in self.arrays:
            count = 1
            for extent in self.tensor(record, name).shape:
                count *= extent
            total += count
        return total

    def pattern(self, record: LaunchRecord) -> tuple[object, ...]:
        return (
            self.variant_key(record),
            tuple(_fact_pattern(self.tensor(record, n)) for n in self.arrays),
        )

    def pick_tests(self, variants: dict[tuple[object, ...], str]) -> list[LaunchRecord]:
        """The records to prove: every variant in every dtype it was launched with (a
        variant runs only in the dtypes its configurations prove) and with every set of
        values of `literal_constants`; then, up to MAX_TEST_CONFIGS in all, every dtype
        and fact pattern. Ragged and small first within each."""
        order = sorted(self.records, key=lambda r: (not self.ragged(r), self.size(r)))
        chosen: list[LaunchRecord] = []

        def cover(key: Any, limit: int = MAX_TEST_CONFIGS) -> None:
            seen = {key(r) for r in chosen}
            for record in order:
                if len(chosen) >= limit:
                    return
                if key(record) not in seen:
                    chosen.append(record)
                    seen.add(key(record))

        proving = MAX_PROVING_CONFIGS
        cover(self.variant_key, proving)
        cover(lambda r: (self.variant_key(r), self.config_dtype(r)), proving)
        # An entry specialised to literal constants serves only the values it bakes in;
        # widened, any integer a variant holds several values of may end up literal.
        per_value = self.literal_constants or self.free_integers()
        if per_value:
            cover(
                lambda r: (
                    self.variant_key(r),
                    self.config_dtype(r),
                    tuple(_number(self.arg(r, n)) for n in per_value),
                ),
                proving,
            )
        cover(self.config_dtype)
        cover(self.pattern)
        if len(chosen) < 2:
            cover(lambda r: (self.ragged(r), self.size(r)))
        return chosen

    def pick_perf(self, tests: list[LaunchRecord]) -> list[LaunchRecord]:
        """The largest records of the variants the tests cover (a spec's every variant
        has a test configuration)."""
        tested = {self.variant_key(r) for r in tests}
        largest = sorted(
            (r for r in self.records if self.variant_key(r) in tested), key=self.size, reverse=True
        )
        chosen: list[LaunchRecord] = []
        for record in largest:
            if len(chosen) >= MAX_PERF_CONFIGS:
                break
            if record in tests or any(
                self.config_dtype(c) == self.config_dtype(record) for c in chosen
            ):
                continue
            chosen.append(record)
        return chosen

    # -- the whole spec

    def arrays_section(self, roles: dict[str, Role]) -> dict[str, Any]:
        section: dict[str, Any] = {}
        for name in self.arrays:
            tensors = [self.tensor(r, name) for r in self.records]
            entry: dict[str, Any] = {
                "rank": len(tensors[0].shape),
                "shape": self.shapes.get(name, []),
                "dtypes": self.recorded_dtypes()[name],
                "role": roles[name],
            }
            if name in self.lists:
                lengths = {len(self.arg(r, name).items) for r in self.records}  # type: ignore[union-attr]
                entry["list_length"] = max(lengths)
            if self.producers is not None and name in self.producers.zeroed:
                entry["init"] = {"kind": "zeros"}  # as the host allocates it
            elif roles[name] != "out":
                init = self._index_range(name)
                if init is not None:
                    entry["init"] = init
            section[name] = entry
        return section

    def _index_range(self, name: str) -> dict[str, Any] | None:
        """randint bounds for an integer array from its recorded value ranges: up to a
        dimension that is one more than the largest value in every record (an index into
        it), else the values every record allows."""
        ranged = [
            (record, tensor)
            for record in self.records
            if (tensor := self.tensor(record, name)).min is not None and tensor.max is not None
        ]
        if not ranged:
            return None
        low = max(int(t.min or 0) for _, t in ranged)
        for symbol in sorted(set(self.dims.values())):
            if all(self.dim_values(r)[symbol] == int(t.max or 0) + 1 for r, t in ranged):
                return {
                    "kind": "randint",
                    "low": min(int(t.min or 0) for _, t in ranged),
                    "high": symbol,
                }
        high = min(int(t.max or 0) for _, t in ranged) + 1
        return {"kind": "randint", "low": low, "high": high} if high > low else None

    def build(self, source_root: str, name: str) -> dict[str, Any]:
        roles = array_roles(self.tree, self.module, self.kernel, self.arrays)
        reads = {n for n in self.arrays if roles[n] != "out" and n not in self.lists}
        self.producers = (
            producer_plan(self.tree, self.module, self.kernel, self.params, reads)
            if self.recorded
            else None
        )
        keys: dict[tuple[object, ...], str] = {}
        for record in self.records:
            keys.setdefault(self.variant_key(record), f"v{len(keys)}")
        tests = self.pick_tests(keys)
        perf = self.pick_perf(tests)
        self.choose_constant_binding([*tests, *perf])
        configs = [self.config(r, f"t{i}_{self.config_dtype(r)}") for i, r in enumerate(tests)]
        perf_configs = [
            self.config(r, f"perf{i}_{self.config_dtype(r)}") for i, r in enumerate(perf)
        ]
        self._add_producers([*tests, *perf], [*configs, *perf_configs], reads)
        self._add_values([*tests, *perf], [*configs, *perf_configs], roles)
        self.added = (
            class_configs(
                configs,
                [keys[self.variant_key(r)] for r in tests],
                self.rederive,
                [name for name in self.arrays if name not in self.lists],
            )
            if self.widen
            else []
        )
        used = [*tests, *perf]
        variants = self._variants(keys, used, [c["name"] for c in [*configs, *perf_configs]])
        data = {
            "spec_version": 1,
            "name": name,
            "description": f"{self.kernel} of {self.module}, from {len(self.records)} "
            "recorded launch(es).",
            "source_root": source_root,
            "module": self.module,
            "kernel": self.kernel,
            "reference_backend": "cutile_python",
            "launch_path": "direct",
            "arrays": self.arrays_section(roles),
            **({"scalars": self._scalars()} if self.scalars else {}),
            **({"constants": self._constants()} if self.constants else {}),
            "grid": self._grid(used, [c["name"] for c in [*configs, *perf_configs]]),
            "variants": variants,
            "test_configs": configs,
            **({"perf_configs": perf_configs} if perf_configs else {}),
            "reference": {
                "oracle": "reference_kernel",
                "origin": f"the reference kernel {self.module}::{self.kernel} launched on the "
                "same inputs",
            },
        }
        return _with_config_dtypes(data, self.recorded_dtypes())

    def recorded_dtypes(self) -> dict[str, list[str]]:
        return {n: sorted({self.tensor(r, n).dtype for r in self.records}) for n in self.arrays}

    def _add_producers(
        self, records: list[LaunchRecord], configs: list[dict[str, Any]], reads: set[str]
    ) -> None:
        """Each configuration's producer launches, from the records of its test; where
        one configuration has none to give, no configuration gets any (and the plan is
        dropped), so the spec's inputs are made one way throughout."""
        if self.producers is None:
            return
        position = {id(record): index for index, record in enumerate(self.recorded)}
        found = [
            producer_launches(self.producers, record, self.recorded[: position[id(record)]], reads)
            if id(record) in position
            else None
            for record in records
        ]
        if any(launches is None for launches in found):
            self.producers = None
            return
        for config, launches in zip(configs, found, strict=True):
            config["producers"] = launches

    def _add_values(
        self, records: list[LaunchRecord], configs: list[dict[str, Any]], roles: dict[str, Role]
    ) -> None:
        """Each configuration's fixed input values: those its record holds for an input
        array (`TensorArg.values`, small integer and bool tensors). An index array whose
        values mean something (a permutation, sorted unique ids, per-expert offsets) is
        then given them, not random integers the reference itself races on (duplicate
        targets) or reads out of range. Not an array a producer launch takes: the
        producers make it from the drawn arrays, as the operator does; not a list."""
        for record, config in zip(records, configs, strict=True):
            taken = {
                argument["array"]
                for launch in config.get("producers", [])
                for argument in launch["arguments"]
                if "array" in argument
            }
            values = {
                name: _FlowList(tensor.values)
                for name in self.arrays
                if roles[name] != "out" and name not in self.lists and name not in taken
                if (tensor := self.tensor(record, name)).values is not None
            }
            if values:
                config["values"] = values

    def _scalars(self) -> dict[str, Any]:
        kinds = {"int": "int32", "float": "float32", "bool": "bool"}
        return {n: {"dtype": kinds[self.arg(self.records[0], n).kind]} for n in self.scalars}

    def _constants(self) -> dict[str, Any]:
        kinds = {"int": "int", "float": "float", "bool": "bool"}
        section: dict[str, Any] = {}
        for name in self.constants:
            entry: dict[str, Any] = {"type": kinds[self.arg(self.records[0], name).kind]}
            rule = self.constant_rules[name]
            if rule is not None and not self.bind_constants_per_config:
                entry["default"] = rule
            section[name] = entry
        return section

    def _grid(self, used: list[LaunchRecord], names: list[str]) -> list[int | str]:
        scopes = [self.scope(r) for r in used]
        shapes = sorted(set(self.dims.values()))
        others = [*self.constants, *self.scalars]
        divisors = [c for c in self.constants if self.arg(used[0], c).kind == "int"]
        keys = [_config_condition(s, self.dims.values()) for s in scopes]
        self.grid_literal = False
        grid: list[int | str] = []
        for axis in range(3):
            expression = grid_expression(
                [r.grid[axis] for r in used], scopes, shapes, others, divisors, keys
            )
            self.grid_literal |= isinstance(expression, str) and " if " in expression
            grid.append(expression)
        while len(grid) > 1 and grid[-1] == 1:
            grid.pop()
        return grid

    def _variants(
        self, keys: dict[tuple[object, ...], str], used: list[LaunchRecord], names: list[str]
    ) -> list[dict[str, Any]]:
        by_variant: dict[str, list[LaunchRecord]] = {}
        for record in used:
            by_variant.setdefault(keys[self.variant_key(record)], []).append(record)
        # A variant is launched for every recorded launch of its kind and of a dtype its
        # configurations prove, not only for those configurations: the library's own
        # calls are those launches. Another dtype is another compiled kernel, unproven.
        proven = {(keys[self.variant_key(r)], self.config_dtype(r)) for r in used}
        for record in self.records:
            variant = keys.get(self.variant_key(record))
            taken = (variant, self.config_dtype(record)) in proven
            if variant is not None and taken and record not in by_variant[variant]:
                by_variant[variant].append(record)
        deciding = self.deciding_constants(keys) if self.widen else None
        by_branches = self.branch_conditions(keys) if self.widen else None
        variants = []
        for key, variant in keys.items():
            members = by_variant.get(variant)
            if not members:
                continue
            entry: dict[str, Any] = {"name": variant}
            hints = dict(key[1]) if isinstance(key[1], tuple) else {}
            if hints:
                entry["hints"] = hints
            bound = dict(key[2]) if isinstance(key[2], tuple) else {}
            if bound and not self.bind_constants_per_config:
                entry["constants"] = bound
            if len(keys) > 1 and by_branches is not None:
                entry["when"] = by_branches[key]
            elif len(keys) > 1:
                conditions = (
                    (
                        _config_condition(
                            self.scope(record),
                            self.dims.values(),
                            self.constants if self.bind_constants_per_config else (),
                            self.config_dtype(record),
                        )
                        if deciding is None
                        else _config_condition(self.scope(record), (), deciding)
                    )
                    for record in members
                )
                entry["when"] = " or ".join(f"({c})" for c in dict.fromkeys(conditions))
            variants.append(entry)
        return variants

    def branch_conditions(
        self, keys: dict[tuple[object, ...], str]
    ) -> dict[tuple[object, ...], str] | None:
        """Each variant's condition as the kernel states it: the spec condition of
        every constant branch its launches reach, or its negation, so that a launch
        no record holds takes the side cuTile Python takes. None where the variants
        differ in more than their branches (hints, unit extents) or a branch reads a
        dtype."""
        branches = self.source.branches if self.source else []
        if not branches or len({key[1:] for key in keys}) > 1:
            return None
        conditions: dict[tuple[object, ...], str] = {}
        for key in keys:
            outcomes = key[0]
            assert isinstance(outcomes, tuple)
            parts = []
            for branch, outcome in zip(branches, outcomes, strict=True):
                if outcome is None:
                    continue
                condition = branch.spec_condition
                if condition is None:
                    return None
                condition = self.over_bound_names(condition)
                parts.append(condition if outcome else f"not ({condition})")
            conditions[key] = " and ".join(f"({part})" for part in parts) or "True"
        return conditions

    def over_bound_names(self, condition: str) -> str:
        """`condition` over what a configuration binds: a constant the spec derives
        (its default) is written as its rule, itself over the extents."""
        if self.bind_constants_per_config:
            return condition
        rules = {
            name: ast.parse(str(rule), mode="eval").body
            for name, rule in self.constant_rules.items()
            if rule is not None
        }
        tree = ast.parse(condition, mode="eval").body
        for _ in range(len(rules) + 1):  # a rule may name earlier constants
            written = _Substitute(rules).visit(copy.deepcopy(tree))
            if ast.dump(written) == ast.dump(tree):
                break
            tree = written
        return ast.unparse(tree)

    def deciding_constants(self, keys: dict[tuple[object, ...], str]) -> list[str] | None:
        """The fewest constants (at most three) of those the configurations bind whose
        values tell every record's variant, so that a variant's condition names only
        what chooses it (the caller passes the constants), not the shapes and dtypes
        it was recorded with; None where no such set exists."""
        variant_of = [keys[self.variant_key(r)] for r in self.records]
        # A condition sees the constants a configuration binds, not those the spec
        # derives or a variant binds.
        bound = self.constants if self.bind_constants_per_config else []
        values = {n: [_number(self.arg(r, n)) for r in self.records] for n in bound}
        # What a branch tests or no generic can stand for decides first: an integer the
        # kernel writer makes generic tells variants apart only by chance of the records.
        branch_names = {
            node.id
            for branch in (self.source.branches if self.source else [])
            for node in ast.walk(branch.test)
            if isinstance(node, ast.Name)
        }
        deciding = [n for n in bound if n in branch_names or not self.generic_candidate(n)]
        pools = [deciding, bound] if deciding != bound else [bound]
        for pool, size in itertools.product(pools, range(1, 4)):
            for names in itertools.combinations(pool, size):
                seen: dict[tuple[object, ...], str] = {}
                rows = zip(*(values[n] for n in names), strict=True)
                if all(
                    seen.setdefault(row, variant) == variant
                    for row, variant in zip(rows, variant_of, strict=True)
                ):
                    return list(names)
        return None

    def choose_constant_binding(self, used: list[LaunchRecord]) -> None:
        """Configurations bind no constants (the C launcher derives them) unless records
        with the same shapes and dtype compiled different variants: then only the
        configurations' own bindings tell them apart."""
        seen: dict[tuple[object, ...], tuple[object, ...]] = {}
        # Widened, a variant may hold several sets of the integers no rule derives.
        self.bind_constants_per_config = bool(self.free_integers())
        for record in used:
            where = (tuple(sorted(self.dim_values(record).items())), self.config_dtype(record))
            if seen.setdefault(where, self.variant_key(record)) != self.variant_key(record):
                self.bind_constants_per_config = True


class _Substitute(ast.NodeTransformer):
    """Names replaced by expressions."""

    def __init__(self, values: Mapping[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node


def _with_config_dtypes(
    data: dict[str, Any], recorded: Mapping[str, Iterable[str]]
) -> dict[str, Any]:
    """`data` with each array's dtypes (`recorded`, by array) and the tolerances
    covering every dtype its configurations give it (recorded or added by `classes`)."""
    configs = [*data["test_configs"], *data.get("perf_configs", [])]
    for name, array in data["arrays"].items():
        given = {c.get("array_dtypes", {}).get(name, c["dtype"]) for c in configs}
        array["dtypes"] = sorted(set(recorded[name]) | given)
    data["tolerances"] = {d: _tolerance(d) for d in sorted({c["dtype"] for c in configs})}
    return data


def _config_condition(
    scope: dict[str, int | float | bool],
    dims: Iterable[str],
    constants: Sequence[str] = (),
    dtype: str | None = None,
) -> str:
    names = [*sorted(set(dims)), *constants]
    parts = [f"{n} == {scope[n]!r}" for n in names if n in scope]
    if dtype is not None:
        parts.append(f"dtype == {dtype!r}")
    return " and ".join(parts) or "True"


def _shape_expression(
    values: Sequence[bool | int | float],
    scopes: Sequence[dict[str, int | float | bool]],
    dims: Sequence[str],
    constants: Sequence[str],
) -> str | None:
    """The simplest of `D`, `next_pow2(D)`, `D * E`, `next_pow2(D * E)`, `cdiv(D, C)` that
    gives `values[i]` from `scopes[i]` for every record (dims D, E; earlier constants C)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    wanted = [int(v) for v in values]
    candidates = [t for d in dims for t in (d, f"next_pow2({d})")]
    candidates += [f"cdiv({d}, {c})" for c in constants for d in dims]
    for i, d in enumerate(dims):
        candidates += [t for e in dims[i:] for t in (f"{d} * {e}", f"next_pow2({d} * {e})")]
    for text in candidates:  # evaluated as the spec resolves them
        try:
            if [evaluate_int(text, scope) for scope in scopes] == wanted:
                return text
        except (KeyError, ValueError, ZeroDivisionError):  # ExprError is a ValueError
            continue
    return None


def _tolerance(dtype: str) -> dict[str, Any]:
    atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    source = (
        "torch.testing.assert_close defaults"
        if dtype in DEFAULT_TOLERANCES and not dtype.startswith("float8")
        else "tileport default for this dtype (docs/TILEGYM.md)"
    )
    return {"atol": atol, "rtol": rtol, "source": source}


def _spec_name(kernel: str, module: str, taken: set[str]) -> str:
    name = kernel.strip("_") or "kernel"
    if name in taken:
        name = f"{module.rpartition('.')[2]}_{name}"
    taken.add(name)
    return name


def read_signature_hints(path: Path) -> dict[str, str]:
    """symbol -> hints from a `signatures.jsonl` (tilegym-launches layout), or from
    launch records that carry their entry symbol and hints, if present."""
    if not path.is_file():
        return {}
    hints = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            if entry.get("symbol"):
                hints[entry["symbol"]] = entry.get("hints") or ""
    return hints


def write_specs(
    records: Sequence[LaunchRecord],
    source_root: Path,
    out: Path,
    signature_hints: dict[str, str] | None = None,
    literal_constants: Mapping[tuple[str, str], Iterable[str]] | None = None,
    widen: bool = False,
    relative_source_root: bool = False,
    kernels: Collection[tuple[str, str]] | None = None,
    unit_extents: bool = False,
) -> tuple[list[WrittenSpec], list[str]]:
    """One spec per kernel into `out` (per (file, kernel) of `kernels` when given: the
    other records still give a stage its producer launches); also the problems of
    kernels that got none.
    `literal_constants`, by (module, kernel): the constants its port's entries are
    specialised to (a first port's report says), every recorded set of which then
    gets a configuration. `widen`: add the specialisation classes the records lack
    (`classes`), each checked against the reference's own export; `unit_extents`
    (with `widen`) adds the unit variants too (`classes.unit_configs`): not yet by
    default, since the kernel writer does not prove every one (rms_norm's backward
    and static-persistent kernels fail with a row of one and ragged columns), and
    one it cannot prove fails the whole port. A spec names the
    source root by its absolute path, so that a copy of it elsewhere still finds the
    library; `relative_source_root` names it relative to `out` instead, for specs
    that travel together with the library (a service's SOURCE_ROOT takes no
    absolute path)."""
    tree = SourceTree(source_root)
    out.mkdir(parents=True, exist_ok=True)
    root_text = (
        os.path.relpath(tree.root, out.resolve()) if relative_source_root else str(tree.root)
    )
    written: list[WrittenSpec] = []
    problems: list[str] = []
    taken: set[str] = set()
    for launches in group_by_kernel(records):
        if kernels is not None and (launches.file, launches.kernel) not in kernels:
            continue
        try:
            kernel = KernelSpec(tree, launches, signature_hints or {}, records, widen)
            if signature_hints:
                kernel.keep_compiled(set(signature_hints))
            literal = (literal_constants or {}).get((kernel.module, kernel.kernel), ())
            kernel.literal_constants = tuple(n for n in kernel.constants if n in set(literal))
            name = _spec_name(kernel.kernel, kernel.module, taken)
            data = kernel.build(root_text, name)
            path = out / f"{name}.port.yaml"
            text = _yaml(data, launches)
            parse_port_spec(yaml.safe_load(text), path)
            added: tuple[str, ...] = ()
            dropped: list[str] = []
            if kernel.added:
                data, added, dropped = _add_classes(kernel, data, path, unit_extents)
                text = _yaml(data, launches)
                parse_port_spec(yaml.safe_load(text), path)
        except (SpecWriteError, SourceTreeError) as exc:
            problems.append(f"{launches.file}::{launches.kernel}: {exc}")
            continue
        except PortSpecError as exc:
            problems.append(f"{launches.file}::{launches.kernel}: the spec does not load: {exc}")
            continue
        path.write_text(text, encoding="utf-8")
        written.append(
            WrittenSpec(
                kernel=launches.kernel,
                file=launches.file,
                module=kernel.module,
                path=path,
                records=len(launches.records),
                test_configs=len(data["test_configs"]),
                variants=len(data["variants"]),
                grid_literal=kernel.grid_literal,
                classes=added,
                dropped_classes=tuple(dropped),
            )
        )
    return written, problems


def _add_classes(
    kernel: KernelSpec, data: dict[str, Any], path: Path, unit_extents: bool
) -> tuple[dict[str, Any], tuple[str, ...], list[str]]:
    """`data` with the class configurations `keep_serving` keeps (and, with
    `unit_extents`, the unit variants), their names, and why the others were left
    out."""
    every = [*data["test_configs"], *(c.config for c in kernel.added)]
    # The recorded configurations, in arrays that allow the added dtypes too.
    arrays = _with_config_dtypes({**data, "test_configs": every}, kernel.recorded_dtypes())
    recorded = {**arrays, "test_configs": data["test_configs"]}
    spec = parse_port_spec(yaml.safe_load(_yaml(recorded, kernel.launches)), path)
    kept, dropped = keep_serving(
        spec,
        kernel.added,
        lambda configs: _reference_compiles(kernel.tree, kernel.launches.file, spec, configs),
    )
    data["test_configs"] += [c.config for c in kept]
    data = _with_config_dtypes(data, kernel.recorded_dtypes())
    units, unit_dropped = _add_unit_variants(kernel, data, path) if unit_extents else ([], [])
    return data, tuple(c.config["name"] for c in [*kept, *units]), [*dropped, *unit_dropped]


def _add_unit_variants(
    kernel: KernelSpec, data: dict[str, Any], path: Path
) -> tuple[list[ClassConfig], list[str]]:
    """Adds to `data` (in place) each variant's unit variants (`classes.unit_configs`),
    each dispatched just before its variant and kept with the configurations the
    reference compiles and that dispatch to it; returns those configurations and why
    the others were left out."""
    spec = parse_port_spec(yaml.safe_load(_yaml(data, kernel.launches)), path)
    configs = [c for c in data["test_configs"] if not c.get("producers")]
    variants = [spec.resolve(Config.model_validate(c), "test").variant for c in configs]
    tied = tied_symbols(array.shape for array in spec.arrays.values())
    added, units = unit_configs(
        configs, variants, kernel.rederive, {c["name"] for c in configs}, tied
    )
    # A spec loads only with a configuration for each variant: a unit variant no
    # candidate reaches (its extent of 1 moves the launch to another variant, as a
    # one-column row fills its tile) is not written. Where a candidate goes: its base
    # variant's first unit variant whose extent it makes 1 (first match wins).
    reached: set[str] = set()
    for item in added:
        try:
            base = spec.resolve(Config.model_validate(item.config), "test").variant
        except (ValueError, ValidationError):
            continue
        dims = item.config.get("dims", {})
        target = next((u.name for u in units if u.base == base and dims.get(u.symbol) == 1), None)
        if target is not None:
            reached.add(target)
    units = [u for u in units if u.name in reached]
    added = [item for item in added if item.variant in reached]
    if not added:
        return [], []
    extended: list[dict[str, Any]] = []
    for variant in data["variants"]:
        for unit in (u for u in units if u.base == variant["name"]):
            when = unit.condition(str(variant.get("when", "True")))
            own = {k: v for k, v in variant.items() if k not in ("representative", "name")}
            extended.append({**own, "name": unit.name, "when": when})
        extended.append(variant)
    # Parsed with every candidate, so that each unit variant has its configurations.
    candidates = [*data["test_configs"], *(item.config for item in added)]
    spec = parse_port_spec(
        yaml.safe_load(
            _yaml({**data, "variants": extended, "test_configs": candidates}, kernel.launches)
        ),
        path,
    )
    kept, dropped = keep_serving(
        spec,
        added,
        lambda configs: _reference_compiles(kernel.tree, kernel.launches.file, spec, configs),
    )
    unused = {u.name for u in units} - {item.variant for item in kept}
    data["variants"] = [v for v in extended if v["name"] not in unused]
    data["test_configs"] += [item.config for item in kept]
    return kept, dropped


def _reference_compiles(
    tree: SourceTree, file: str, spec: PortSpec, configs: list[Config]
) -> set[str]:
    """The names of the configurations the reference compiles for (a bytecode
    export in the sandbox; one at a time only when they fail together)."""
    specs = {
        c.name: specialise(spec.resolve(c, "test")).model_copy(update={"variant": c.name})
        for c in configs
    }
    names = list(specs)

    def exports(chosen: list[str]) -> bool:
        with tempfile.TemporaryDirectory(prefix="tileport-classes-") as scratch:
            try:
                export_reference(
                    tree.root / file,
                    spec.kernel,
                    [specs[n] for n in chosen],
                    Path(scratch),
                    cubin_targets=(),
                    source_root=tree.root,
                    module=spec.module,
                )
            except ReferenceExportError:
                return False
        return True

    if exports(names):
        return set(names)
    return {n for n in names if exports([n])}


class _FlowList(list[Any]):
    """A list the spec writes on one line (`[3, 0, 2, 1]`), as an array's values."""


class _SpecDumper(yaml.SafeDumper):
    pass


def _flow_list(dumper: yaml.SafeDumper, values: _FlowList) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", values, flow_style=True)


_SpecDumper.add_representer(_FlowList, _flow_list)


def _yaml(data: dict[str, Any], launches: KernelLaunches) -> str:
    header = (
        f"# Port spec of {launches.kernel} ({launches.file}), written by `tileport specs` from "
        f"{len(launches.records)} recorded launch(es).\n"
    )
    return header + yaml.dump(data, Dumper=_SpecDumper, sort_keys=False, width=100)
