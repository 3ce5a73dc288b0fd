"""Stage B: port one kernel from its port spec, deterministically.

1. Reference exports: the variant's base configuration, a probe of it with
   every integer constant moved to a distinct value, and one export per
   distinct configuration to check (dtype, constants and launch facts).
2. Lift the base and the probe to Rust; constants whose values moved the IR
   become const generics; array dtypes that vary across the variant's
   configurations become `E: ElementType`; launch facts (divisibility of
   shapes, strides and base addresses) that vary become const generics too.
   Where no generic can express the variant, each distinct constant set gets
   its own literal-specialised entry.
3. Write kernel.rs, compile every checked configuration from it (one resident
   exporter), diff the IR and compare SASS on every target.

A variant whose reference is a bytecode dump (`reference_bytecode`) has only
that specialisation: it is checked alone, without a probe, as a literal entry.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nodes.analyzer.branches import ConstantBranch, Scope, branch_outcome
from nodes.analyzer.source import KernelSource, SourceError, read_kernel_source
from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.generics import (
    Recovery,
    confirms,
    constrained_probe,
    fact_stem,
    generic_name,
    probe_values,
    recover,
)
from nodes.kernel_writer.lifter import FactSlot, LiftedKernel, Lifter, ParamLayout
from nodes.kernel_writer.module import EntryCode, GenericParam, render_module
from nodes.kernel_writer.naming import SourceNames, read_source
from nodes.kernel_writer.partial import MARK as PARTIAL_MARK
from nodes.kernel_writer.partial import partial_lift
from nodes.kernel_writer.rust_check import RustCheck, check_kernel_rs
from nodes.kernel_writer.rust_types import DTYPE_BYTES, DTYPE_ELEMENTS, ELEMENT_BYTES_GENERIC
from nodes.kernel_writer.verify import check_config
from schemas.kernel_writer import (
    COMPILED_LEVELS,
    GPU_DECIDED_LEVELS,
    REPORT_FILE,
    REQUIRED_TARGETS,
    BlockedConstruct,
    ConfigCheck,
    EntryInfo,
    LiteralEntry,
    PortReport,
    RecoveredGeneric,
    Timings,
)
from schemas.port_spec import PortSpec, ResolvedConfig, Variant, load_port_spec, spec_relative
from schemas.reference_export import (
    ArrayArg,
    ArrayListArg,
    ConstantArg,
    ExportRecord,
    Specialisation,
)
from schemas.spec_expr import ExprError, evaluate, names_in
from schemas.verdicts import KernelWriterVerdict
from tileir.mlir import parse_module
from toolchain.bytecode_dump import location_files
from toolchain.reference_export import (
    ReferenceExportError,
    export_with_dumps,
    library_module,
    specialise,
    variant_dumps,
)
from toolchain.rust_export import RustExporter

KERNEL_FILE = "kernel.rs"
PARTIAL_FILE = "partial_kernel.rs"
VERIFY_WORKERS = 2  # the build machine's cores
LAUNCHER_MAX_ARGUMENTS = 64  # cutile 0.5.0's `KernelArgs` tuples (tile_kernel.rs)


@dataclass
class _Check:
    """One configuration to verify: its specialisation and resolved config."""

    label: str
    config: ResolvedConfig
    spec: Specialisation


@dataclass
class _VariantPlan:
    variant: Variant
    checks: list[_Check]
    base: _Check
    layouts: list[ParamLayout]
    generic_arrays: set[str]
    facts: dict[FactSlot, tuple[int, str]]  # launch fact -> (base value, generic)
    fact_sources: dict[str, str] = field(default_factory=dict)
    # The kernel's constant branches (a probe keeps each on the base's side) and its
    # locals derived from constants (`num_tiles`: `cdiv(N, TILE_SIZE)`), which
    # become generics of their own where they move the IR.
    branches: tuple[ConstantBranch, ...] = ()
    cutile_modules: frozenset[str] = frozenset()
    derived: dict[str, str] = field(default_factory=dict)
    # The names a const generic of the variant's entry may take (its constants' and
    # derived locals', `generic_name`): no variable of the body takes one, since a
    # `let` may not shadow a const generic.
    generic_names: frozenset[str] = frozenset()


@dataclass
class _Lifted:
    entry: EntryCode
    variant: str
    checks: list[_Check] = field(default_factory=list)
    # Constants recovered as generics: a proof failure takes literal entries instead.
    generic_constants: tuple[str, ...] = ()


# -- planning ------------------------------------------------------------------------


def _configs_of(spec: PortSpec, variant: Variant) -> list[ResolvedConfig]:
    out = []
    for config, purpose in spec.all_configs():
        resolved = spec.resolve(config, purpose)
        if resolved.variant == variant.name:
            out.append(resolved)
    return out


def _check_key(specialisation: Specialisation) -> str:
    return json.dumps(
        specialisation.model_dump(exclude={"variant", "config", "grid"}), sort_keys=True
    )


def _fact_weight(specialisation: Specialisation) -> int:
    """How much a launch knows: richer facts make the better base to lift."""
    total = 0
    for param in specialisation.params.values():
        if isinstance(param, ArrayArg):
            facts = param.facts
            numbers = [facts.base_addr_divisible_by, *facts.shape_divisible_by]
            numbers += facts.stride_divisible_by
            total += sum(n.bit_length() for n in numbers)
    return total


def _layouts(
    spec: PortSpec, names: SourceNames, base: Specialisation, generic_arrays: set[str]
) -> list[ParamLayout]:
    order = names.params or [*spec.arrays, *spec.scalars, *spec.constants]
    layouts = []
    for name in order:
        param = base.params.get(name)
        if isinstance(param, ArrayArg):
            layouts.append(
                ParamLayout(
                    name, "array", param.facts.dtype, param.facts.ndim, name in generic_arrays
                )
            )
        elif param is not None and param.kind == "scalar":
            layouts.append(ParamLayout(name, "scalar", param.dtype))
        elif isinstance(param, ArrayListArg):
            layouts.append(
                ParamLayout(
                    name, "list", param.element.dtype, param.element.ndim, name in generic_arrays
                )
            )
    return layouts


def _fact_fields(ndim: int) -> list[str]:
    """An array's launch facts in calling-convention order (a list's table
    columns follow it too): base address, shapes, strides."""
    return ["base", *(f"shape{d}" for d in range(ndim)), *(f"stride{d}" for d in range(ndim))]


def _fact_generic_name(stem: str, what: str) -> str:
    if what == "base":
        return f"{stem}_ALIGN"
    kind, dim = what[:-1], what[-1]
    return f"{stem}_{kind.upper()}_{dim}_DIV"


def _fact_generics(
    layouts: list[ParamLayout], checks: list[_Check], base: _Check
) -> tuple[dict[FactSlot, tuple[int, str]], dict[str, str]]:
    """Launch facts that differ between the checked configurations become
    const generics: `X_ALIGN` (base address), `X_SHAPE_1_DIV`, `X_STRIDE_0_DIV`."""
    facts: dict[FactSlot, tuple[int, str]] = {}
    sources: dict[str, str] = {}
    index = 0
    for layout in layouts:
        fields = _fact_fields(layout.ndim)
        if layout.kind == "array":
            slots = [((index + k, -1), what) for k, what in enumerate(fields)]
        elif layout.kind == "list":
            # A list's element facts are assumes on the values its table holds.
            slots = [((index, k), what) for k, what in enumerate(fields)]
        else:
            slots = []
        for slot, what in slots:
            values = {_fact(check.spec, layout.name, what) for check in checks}
            if len(values) > 1:
                name = _fact_generic_name(fact_stem(layout.name), what)
                facts[slot] = (_fact(base.spec, layout.name, what), name)
                sources[name] = f"{layout.name}.{what}: {sorted(values)}"
        index += layout.arguments
    return facts, sources


def _fact(specialisation: Specialisation, array: str, what: str) -> int:
    param = specialisation.params[array]
    assert isinstance(param, ArrayArg | ArrayListArg)
    facts = param.facts if isinstance(param, ArrayArg) else param.element
    if what == "base":
        return facts.base_addr_divisible_by
    kind, dim = what[:-1], int(what[-1])
    return (facts.shape_divisible_by if kind == "shape" else facts.stride_divisible_by)[dim]


def _plan(
    spec: PortSpec, names: SourceNames, variant: Variant, source: KernelSource | None
) -> _VariantPlan:
    checks: dict[str, _Check] = {}
    # A bytecode dump is its representative configuration's specialisation only.
    dumped = variant.reference_bytecode is not None
    for resolved in [spec.representative(variant)] if dumped else _configs_of(spec, variant):
        specialisation = specialise(resolved)
        key = _check_key(specialisation)
        if key not in checks:
            label = f"{variant.name}__{resolved.name}"
            checks[key] = _Check(
                label, resolved, specialisation.model_copy(update={"variant": label})
            )
    ordered = list(checks.values())
    dtypes_by_array: dict[str, set[str]] = {}
    for check in ordered:
        for name, arg in check.spec.params.items():
            if isinstance(arg, ArrayArg):
                dtypes_by_array.setdefault(name, set()).add(arg.facts.dtype)
            elif isinstance(arg, ArrayListArg):
                dtypes_by_array.setdefault(name, set()).add(arg.element.dtype)
    generic_arrays = {name for name, dtypes in dtypes_by_array.items() if len(dtypes) > 1}
    base = max(ordered, key=lambda c: (_base_preference(c, generic_arrays), _fact_weight(c.spec)))
    layouts = _layouts(spec, names, base.spec, generic_arrays)
    arguments = sum(layout.arguments for layout in layouts)
    if arguments > LAUNCHER_MAX_ARGUMENTS:
        raise Blocked(
            "entry",
            _definition(spec, names),
            f"{arguments} entry parameters (an array passes its address, extents and "
            f"strides): cutile-rs 0.5.0 makes launchers of at most {LAUNCHER_MAX_ARGUMENTS} "
            "(UPSTREAM_GAPS.md G15)",
        )
    facts, sources = _fact_generics(layouts, ordered, base)
    taken = {generic_name(name) for name in spec.constants}
    derived = {
        name: expression
        for name, expression in (source.derived if source else {}).items()
        if generic_name(name) not in taken
    }
    return _VariantPlan(
        variant,
        ordered,
        base,
        layouts,
        generic_arrays,
        facts,
        sources,
        tuple(source.branches if source else ()),
        source.cutile_modules if source else frozenset(),
        derived,
        frozenset(taken | {generic_name(name) for name in derived}),
    )


def _kernel_source(path: Path, kernel: str) -> KernelSource | None:
    """The analyzer's reading of the kernel (branches, derived locals); None where the
    source cannot be read, and nothing is derived from it."""
    try:
        return read_kernel_source(path, kernel)
    except SourceError:
        return None


def _constant_scope(specialisation: Specialisation) -> dict[str, bool | int | float]:
    return {
        name: arg.value
        for name, arg in specialisation.params.items()
        if isinstance(arg, ConstantArg) and isinstance(arg.value, bool | int | float)
    }


def _derived_values(
    plan: _VariantPlan, constants: Mapping[str, bool | int | float]
) -> dict[str, int]:
    """The integer locals the kernel derives from these constant values."""
    values: dict[str, int] = {}
    for name, expression in plan.derived.items():
        try:
            value = evaluate(expression, constants)
        except ExprError:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            values[name] = value
    return values


def _keeps_variant(spec: PortSpec, plan: _VariantPlan, probes: Mapping[str, int]) -> bool:
    """Whether the base configuration with `probes` in place still dispatches to the
    plan's variant (the first whose condition holds); a condition that cannot be
    evaluated here keeps nothing."""
    config = plan.base.config
    env: dict[str, bool | int | float | str] = {
        **config.dims,
        "dtype": config.dtype,
        **config.constants,
        **probes,
    }
    for variant in spec.variants:
        try:
            holds = evaluate(variant.when, env)
        except ExprError:
            return False
        if holds:
            return variant.name == plan.variant.name
    return False


def _branch_sides(
    plan: _VariantPlan, specialisation: Specialisation, constants: Mapping[str, int]
) -> tuple[bool | None, ...]:
    """The side of each constant branch a specialisation takes with `constants` in
    place of its own values."""
    dtypes = {
        name: arg.facts.dtype
        for name, arg in specialisation.params.items()
        if isinstance(arg, ArrayArg)
    }
    scope = Scope({**_constant_scope(specialisation), **constants}, dtypes)
    return tuple(branch_outcome(branch, scope, plan.cutile_modules) for branch in plan.branches)


def _definition(spec: PortSpec, names: SourceNames) -> str:
    """`file.py:line` of the kernel's `def`, or the file alone."""
    file = Path(spec.source).name
    for number, line in enumerate(names.lines, start=1):
        if line.lstrip().startswith(f"def {spec.kernel}("):
            return f"{file}:{number}"
    return file


def _base_preference(check: _Check, generic_arrays: set[str]) -> int:
    """Lift from a narrow dtype: its conversions to float32 are explicit in the
    IR and become `convert_tile`, which is free when E is float32."""
    for name in generic_arrays:
        arg = check.spec.params[name]
        if isinstance(arg, ArrayArg) and arg.facts.dtype != "float32":
            return 1
    return 0


def _dump_note(spec: PortSpec, plan: _VariantPlan, references: Path, names: SourceNames) -> str:
    """What a port from a bytecode dump recovers, and what it leaves unchecked."""
    others = sorted(
        {
            resolved.name
            for resolved in _configs_of(spec, plan.variant)
            if _check_key(specialise(resolved)) != _check_key(plan.base.spec)
        }
    )
    unchecked = (
        f"configurations {', '.join(others)} have other specialisations and are not checked"
        if others
        else "every configuration of the variant has this specialisation"
    )
    if not location_files((references / f"{plan.base.label}.loc.mlir").read_text()):
        naming = "the dump carries no source locations: names come from the IR"
    elif names.lines:
        naming = "names come from the source through the dump's locations"
    else:
        naming = "the source cannot be read: names come from the IR"
    return (
        f"variant {plan.variant.name}: the reference is the bytecode dump "
        f"{plan.variant.reference_bytecode}, taken as configuration {plan.base.config.name}; "
        "nothing else can be compiled from it, so no constant is probed (literal entries) "
        f"and no dtype or launch-fact generic is recovered; {unchecked}; {naming}"
    )


# -- lifting -------------------------------------------------------------------------


def _export(
    spec_path: Path,
    spec: PortSpec,
    specs: list[Specialisation],
    out: Path,
    dumps: Mapping[str, Path],
) -> ExportRecord:
    return export_with_dumps(
        spec_relative(spec_path, spec.source),
        spec.kernel,
        specs,
        out,
        dumps=dumps,
        target=spec.targets[0],
        cubin_targets=(),  # verification assembles both sides itself, alike
        entry_symbol=spec.entry_symbol,
        **library_module(spec_path, spec),
    )


def _lift_file(
    path: Path,
    plan: _VariantPlan,
    kernel: str,
    names: SourceNames,
    scalar_constants: frozenset[int] = frozenset(),
    check: _Check | None = None,
    peers: Mapping[int, list[str]] | None = None,
) -> LiftedKernel:
    module = parse_module(path.read_text())
    facts = plan.facts if check is None else _facts_of(plan, check)
    lifter = Lifter(
        module.entries[0],
        plan.layouts,
        kernel,
        names,
        facts,
        scalar_constants,
        peers,
        reserved=plan.generic_names,
    )
    return lifter.lift()


def _constant_values(path: Path) -> list[str]:
    entry = parse_module(path.read_text()).entries[0]
    return [op.attributes.get("value", "") for op in entry.walk() if op.name == "constant"]


def _constant_peers(
    plan: _VariantPlan, base: _Check, checks: list[_Check], references: Path
) -> dict[int, list[str]]:
    """The n-th constant of `base`'s reference as every other check's reference has
    it, where the two IRs hold as many constants: a constant of the dtype generic
    `E` is spelt so that it is right in each (literals.py)."""
    if not plan.generic_arrays:
        return {}
    own = _constant_values(references / f"{base.label}.loc.mlir")
    peers: dict[int, list[str]] = {n: [] for n in range(len(own))}
    for check in checks:
        if check is base:
            continue
        values = _constant_values(references / f"{check.label}.loc.mlir")
        if len(values) == len(own):
            for n, value in enumerate(values):
                peers[n].append(value)
    return peers


def _facts_of(plan: _VariantPlan, check: _Check) -> dict[FactSlot, tuple[int, str]]:
    """The fact generics with the values `check`'s export states."""
    out = {}
    for arg, (_, name) in plan.facts.items():
        out[arg] = (_fact_at(plan, check, arg), name)
    return out


def _fact_at(plan: _VariantPlan, check: _Check, slot: FactSlot) -> int:
    arg_index, column = slot
    index = 0
    for layout in plan.layouts:
        if index <= arg_index < index + layout.arguments and layout.kind != "scalar":
            field = arg_index - index if layout.kind == "array" else column
            return _fact(check.spec, layout.name, _fact_fields(layout.ndim)[field])
        index += layout.arguments
    raise KeyError(slot)


def _entry_name(spec: PortSpec, variant: Variant) -> str:
    """The entry a variant's port has: the kernel's name, suffixed by the variant's
    when there are several."""
    if len(spec.variants) > 1:
        return f"{spec.kernel}_{variant.name}"
    return spec.kernel


def _generic_values(plan: _VariantPlan, check: _Check) -> dict[str, str]:
    """Every generic an entry of the variant may take, with its argument for `check`:
    `E` and `E_BYTES` (the dtype of the arrays it types), each integer constant's
    generic, each launch-fact generic."""
    values: dict[str, str] = {}
    dtype = next(
        (
            arg.facts.dtype
            for name, arg in check.spec.params.items()
            if isinstance(arg, ArrayArg) and name in plan.generic_arrays
        ),
        None,
    )
    if dtype is not None:
        values["E"] = DTYPE_ELEMENTS[dtype]
        values[ELEMENT_BYTES_GENERIC] = str(DTYPE_BYTES[dtype])
    for name, value in _derived_values(plan, _constant_scope(check.spec)).items():
        values[generic_name(name)] = str(value)
    for name, value in _int_constants(check.spec).items():
        values[generic_name(name)] = str(value)
    for slot, (_, name) in plan.facts.items():
        values[name] = str(_fact_at(plan, check, slot))
    return values


@dataclass(frozen=True)
class PortTarget:
    """One configuration a port of the spec is checked on, as stage B checks a lifted
    port: the entry that serves it and the argument of every generic it may take."""

    label: str
    variant: str
    entry: str
    dispatch: str
    generic_values: dict[str, str]


def port_targets(spec_path: Path) -> list[PortTarget]:
    """The configurations `port_kernel` checks (their references are
    `reference/<label>.mlir` and `.bytecode` once it has exported them). Raises
    Blocked where the spec cannot be planned."""
    spec = load_port_spec(spec_path)
    source = spec_relative(spec_path, spec.source)
    names = read_source(source, spec.kernel)
    kernel_source = _kernel_source(source, spec.kernel)
    targets = []
    for variant in spec.variants:
        plan = _plan(spec, names, variant, kernel_source)
        entry = _entry_name(spec, variant)
        for check in plan.checks:
            values = _generic_values(plan, check)
            targets.append(PortTarget(check.label, variant.name, entry, variant.when, values))
    return targets


def port_verdict(checks: list[ConfigCheck], rustc: RustCheck) -> tuple[KernelWriterVerdict, str]:
    """The verdict of a kernel.rs checked on `checks` and built by rustc, with its
    summary: COMPILED when every configuration is exact or SASS-identical on
    sm_90 and sm_100, or at least equivalent (the GPU decides), and rustc builds it."""
    failed = [c for c in checks if c.error is not None]
    if failed:
        return KernelWriterVerdict.FAIL_COMPILE, f"{failed[0].config}: {failed[0].error}"
    if not rustc.passed:
        first = rustc.log.splitlines()[0] if rustc.log else "no output"
        return KernelWriterVerdict.FAIL_COMPILE, "kernel.rs does not build with rustc: " + first
    if all(c.level == "exact" for c in checks):
        summary = f"{len(checks)} configuration(s) exact and SASS-identical"
        return KernelWriterVerdict.COMPILED, summary
    if all(c.level in COMPILED_LEVELS for c in checks):
        exact = sum(c.level == "exact" for c in checks)
        summary = (
            f"{len(checks)} configuration(s): {exact} exact, {len(checks) - exact} "
            "sass-identical (their cubins disassemble identically on "
            f"{' and '.join(REQUIRED_TARGETS)}; the IR text differs)"
        )
        return KernelWriterVerdict.COMPILED, summary
    if all(c.level in (*COMPILED_LEVELS, *GPU_DECIDED_LEVELS) for c in checks):
        equivalent = sum(c.level in GPU_DECIDED_LEVELS for c in checks)
        summary = (
            f"{len(checks)} configuration(s): {len(checks) - equivalent} exact or "
            f"sass-identical, {equivalent} equivalent (the IR means the same, the SASS "
            "differs): the GPU run decides, inside the A/A band or not"
        )
        return KernelWriterVerdict.COMPILED, summary
    worst = next(c for c in checks if c.level not in COMPILED_LEVELS)
    summary = f"{worst.config}: IR {worst.ir_level}, SASS " + ", ".join(
        f"{t.target} {'identical' if t.sass_identical else 'differs'}" for t in worst.targets
    )
    return KernelWriterVerdict.FAIL_FIXABLE, summary


def _dense_generic(lines: list[str], used: list[str]) -> str | None:
    """A generic left as the value of `constant(..)`, which cutile-rs rejects."""
    for name in used:
        pattern = re.compile(rf"constant\({generic_name(name)}\b")
        if any(pattern.search(line) for line in lines):
            return generic_name(name)
    return None


def _int_constants(specialisation: Specialisation) -> dict[str, int]:
    return {
        name: arg.value
        for name, arg in specialisation.params.items()
        if isinstance(arg, ConstantArg) and type(arg.value) is int
    }


def _with_constants(
    specialisation: Specialisation, values: dict[str, int], label: str
) -> Specialisation:
    params = dict(specialisation.params)
    for name, value in values.items():
        params[name] = ConstantArg(value=value)
    return specialisation.model_copy(update={"params": params, "variant": label})


# -- the stage -----------------------------------------------------------------------


class _Porter:
    def __init__(self, spec_path: Path, out: Path) -> None:
        self.spec_path = spec_path
        self.out = out
        self.spec = load_port_spec(spec_path)
        self.source = spec_relative(spec_path, self.spec.source)
        self.names = read_source(self.source, self.spec.kernel)
        self.kernel_source = _kernel_source(self.source, self.spec.kernel)
        self.timings: dict[str, float] = {"reference_export_s": 0.0, "lift_s": 0.0}
        self.generics: list[RecoveredGeneric] = []
        self.literal_entries: list[LiteralEntry] = []
        self.notes: list[str] = []
        self.dumps: dict[str, Path] = {}  # check label -> the bytecode dump it is
        self.work = Path(tempfile.mkdtemp(prefix="tileport-port-"))
        self.rustc: RustCheck | None = None

    @property
    def source_name(self) -> str:
        """The kernel's file as its reader knows it: the module's path in its
        library (`tilegym/ops/cutile/gelu.py`), else the spec's `source`."""
        if self.spec.module is not None:
            return self.spec.module.replace(".", "/") + ".py"
        return self.spec.source

    def timed_export(self, specs: list[Specialisation], out: Path) -> ExportRecord:
        started = time.perf_counter()
        try:
            return _export(self.spec_path, self.spec, specs, out, self.dumps)
        finally:
            self.timings["reference_export_s"] += time.perf_counter() - started

    def lift_variant(self, plan: _VariantPlan, references: Path) -> list[_Lifted]:
        if plan.base.label in self.dumps:
            reason = (
                f"the reference is the bytecode dump {plan.variant.reference_bytecode}: no "
                "export with other constants can be made to probe them"
            )
            return self.literal_variant(plan, references, reason, _int_constants(plan.base.spec))
        kernel = _entry_name(self.spec, plan.variant)
        base_file = references / f"{plan.base.label}.loc.mlir"
        started = time.perf_counter()
        peers = _constant_peers(plan, plan.base, plan.checks, references)
        base = _lift_file(base_file, plan, kernel, self.names, peers=peers)
        self.timings["lift_s"] += time.perf_counter() - started
        # Every constant is probed, a probe keeping the base on this variant (the
        # variant's condition is the cuTile host's choice of kernel code). Where no
        # probe of a constant the condition names, with one value in all the
        # variant's configurations, keeps it there, that constant stays put: its
        # other values are other variants, not a generic's.
        named = names_in(plan.variant.when) if plan.variant.when else set()
        deciding = {
            name
            for name in named
            if len({_int_constants(check.spec).get(name) for check in plan.checks}) == 1
        }
        constants = _int_constants(plan.base.spec)
        accept = self.probe_check(plan, constants)
        probes = constrained_probe(constants, set(), accept)
        if probes is None and deciding & set(constants):
            constants = {n: v for n, v in constants.items() if n not in deciding}
            accept = self.probe_check(plan, constants)
            probes = constrained_probe(constants, set(), accept)
        probes = probes or probe_values(constants, set())
        recovered_lines: list[str] | None = base.body
        used: list[str] = []
        reason = ""
        unprobed = sorted(set(constants) - set(probes))
        constants = {name: value for name, value in constants.items() if name in probes}
        if unprobed:
            self.notes.append(
                f"variant {plan.variant.name}: no free probe value for {', '.join(unprobed)} "
                "(every other power of two is another constant's value): kept literal"
            )
        if constants:
            probe_label = f"{plan.variant.name}__probe"
            probe_spec = _with_constants(plan.base.spec, probes, probe_label)
            probe_dir = self.work / f"{plan.variant.name}-probe"
            # A second probe moving every constant up: a number that follows
            # several constants (H * SEQ_LEN) can stay put in the first.
            second = constrained_probe(
                constants, set(probes.values()), accept, upward=True
            ) or probe_values(constants, set(probes.values()), upward=True)
            second_label = f"{plan.variant.name}__probe2"
            second_file = self.second_probe(plan, second, second_label, set(constants))
            try:
                self.timed_export([probe_spec], probe_dir)
                started = time.perf_counter()
                probe_file = probe_dir / f"{probe_label}.loc.mlir"
                probe = _lift_file(probe_file, plan, kernel, self.names, peers=peers)
                # Derived locals first: a constant with the same values names them.
                moved_base = {**self.derived_at(plan, {}), **constants}
                moved_probe = {**self.derived_at(plan, probes), **probes}
                moved_second = {**self.derived_at(plan, second), **second}
                result = recover(base.body, probe.body, moved_base, moved_probe)
                generic_constants = frozenset(
                    base.constant_lines[line]
                    for line in result.moved_lines
                    if line in base.constant_lines
                )
                if result.lines is not None and generic_constants:
                    # Constants whose value is a generic: spelt as scalars, re-lifted.
                    base = _lift_file(
                        base_file, plan, kernel, self.names, generic_constants, peers=peers
                    )
                    probe = _lift_file(
                        probe_file, plan, kernel, self.names, generic_constants, peers=peers
                    )
                    result = recover(base.body, probe.body, moved_base, moved_probe)
                if result.lines is not None and second_file is not None:
                    again = _lift_file(
                        second_file,
                        plan,
                        kernel,
                        self.names,
                        generic_constants,
                        peers=peers,
                    )
                    check = recover(base.body, again.body, moved_base, moved_second)
                    if check.lines is None or not confirms(
                        result.lines, check.lines, moved_base, moved_second
                    ):
                        result = (
                            check
                            if check.lines is None
                            else Recovery(
                                None,
                                reason="a number stayed put in one probe and moved in the other: "
                                "constant arithmetic, which stable Rust rejects in types",
                            )
                        )
                self.timings["lift_s"] += time.perf_counter() - started
                recovered_lines, used, reason = result.lines, result.used, result.reason
                dense = _dense_generic(recovered_lines or [], used)
                if dense is not None:
                    recovered_lines = None
                    reason = (
                        f"a constant follows {dense} but is not an i32 scalar: cutile-rs "
                        "takes only literals in constant(..)"
                    )
            except ReferenceExportError as err:
                recovered_lines, reason = None, f"the probe export failed: {err}"
            except Blocked as err:
                recovered_lines, reason = None, f"the probe did not lift: {err}"
            if recovered_lines is not None:
                for name in used:
                    if any(g.name == generic_name(name) for g in self.generics):
                        continue
                    moved = (
                        f"differential export: {name} {moved_base[name]} -> "
                        f"{moved_probe[name]} moved the IR exactly where "
                        f"{generic_name(name)} stands"
                    )
                    derived = plan.derived.get(name) if name not in constants else None
                    self.generics.append(
                        RecoveredGeneric(
                            name=generic_name(name),
                            kind="constant" if derived is None else "derived",
                            source=name if derived is None else derived,
                            how=moved
                            if derived is None
                            else f"{moved}; the kernel computes {name} = {derived}, "
                            "which the launcher computes",
                        )
                    )
        if recovered_lines is not None:
            entry = self.entry_code(kernel, plan, base, recovered_lines, used)
            return [_Lifted(entry, plan.variant.name, plan.checks, tuple(used))]
        return self.literal_variant(plan, references, reason, constants)

    @staticmethod
    def derived_at(plan: _VariantPlan, probes: Mapping[str, int]) -> dict[str, int]:
        """The derived locals at the base's constants with `probes` in place."""
        return _derived_values(plan, {**_constant_scope(plan.base.spec), **probes})

    def probe_check(
        self, plan: _VariantPlan, constants: dict[str, int]
    ) -> Callable[[dict[str, int]], bool]:
        """Whether probe values keep the base's structure (every constant branch on
        the base's side, the launch on the plan's variant) and move every derived
        local to a value pair of its own, so that what moved names what it is."""
        sides = _branch_sides(plan, plan.base.spec, {})
        base = self.derived_at(plan, {})
        named = names_in(plan.variant.when) if plan.variant.when else set()

        def accept(probes: dict[str, int]) -> bool:
            if _branch_sides(plan, plan.base.spec, probes) != sides:
                return False
            if named & set(probes) and not _keeps_variant(self.spec, plan, probes):
                return False
            pairs = {(constants[name], probes[name]) for name in probes}
            moved = self.derived_at(plan, probes)
            for name, value in base.items():
                pair = (value, moved.get(name, value))
                if pair[0] == pair[1] or pair in pairs:
                    return False
                pairs.add(pair)
            return True

        return accept

    def second_probe(
        self, plan: _VariantPlan, values: dict[str, int], label: str, constants: set[str]
    ) -> Path | None:
        """The second probe's reference, or None where it has no value for every
        constant or does not compile (an upward tile past a limit)."""
        if set(values) != constants:
            return None
        out = self.work / f"{plan.variant.name}-probe2"
        try:
            self.timed_export([_with_constants(plan.base.spec, values, label)], out)
        except ReferenceExportError:
            self.notes.append(f"variant {plan.variant.name}: the upward probe does not compile")
            return None
        return out / f"{label}.loc.mlir"

    def entry_code(
        self,
        name: str,
        plan: _VariantPlan,
        lifted: LiftedKernel,
        lines: list[str],
        constants: list[str],
    ) -> EntryCode:
        generics: list[GenericParam] = []
        if lifted.uses_element_generic:
            generics.append(GenericParam("E", "type"))
        generics += [GenericParam(generic_name(c), "const") for c in constants]
        text = "\n".join(lines)
        if re.search(rf"\b{ELEMENT_BYTES_GENERIC}\b", text):
            generics.append(GenericParam(ELEMENT_BYTES_GENERIC, "const"))
            self.record_element_bytes_generic(plan)
        for _, generic in sorted(plan.facts.values(), key=lambda f: f[1]):
            if generic in text and all(g.name != generic for g in generics):
                generics.append(GenericParam(generic, "const"))
        doc = [
            f"Variant `{plan.variant.name}` of `{self.spec.kernel}`; dispatch: "
            f"`{plan.variant.when}`."
        ]
        return EntryCode(name, lifted, generics, doc, lines)

    def record_element_bytes_generic(self, plan: _VariantPlan) -> None:
        if any(g.name == ELEMENT_BYTES_GENERIC for g in self.generics):
            return
        self.generics.append(
            RecoveredGeneric(
                name=ELEMENT_BYTES_GENERIC,
                kind="fact",
                source=", ".join(sorted(plan.generic_arrays)),
                how="a pointer computed from these arrays is assumed aligned to the element "
                "size, which follows `E`",
            )
        )

    def literal_variant(
        self, plan: _VariantPlan, references: Path, reason: str, constants: dict[str, int]
    ) -> list[_Lifted]:
        """One entry per distinct constant set among the checked configurations."""
        groups: dict[tuple[tuple[str, int], ...], list[_Check]] = {}
        for check in plan.checks:
            key = tuple(sorted(_int_constants(check.spec).items()))
            groups.setdefault(key, []).append(check)
        out = []
        for key, checks in groups.items():
            # `-1` as `_minus1`: the suffix is part of a Rust identifier.
            suffix = "_".join(
                f"{name.lower()}{value}".replace("-", "_minus") for name, value in key
            )
            entry_name = f"{self.spec.kernel}_{plan.variant.name}" + (
                f"_{suffix}" if suffix else ""
            )
            group_base = max(
                checks,
                key=lambda c: (_base_preference(c, plan.generic_arrays), _fact_weight(c.spec)),
            )
            lifted = _lift_file(
                references / f"{group_base.label}.loc.mlir",
                plan,
                entry_name,
                self.names,
                check=group_base,
                peers=_constant_peers(plan, group_base, checks, references),
            )
            entry = self.entry_code(entry_name, plan, lifted, lifted.body, [])
            bindings = {name: str(value) for name, value in key}
            self.literal_entries.append(
                LiteralEntry(
                    entry=entry_name, variant=plan.variant.name, bindings=bindings, reason=reason
                )
            )
            out.append(_Lifted(entry, plan.variant.name, checks))
        return out

    def generic_args(self, lifted: _Lifted, check: _Check, plan: _VariantPlan) -> list[str]:
        values = _generic_values(plan, check)
        return [values[generic.name] for generic in lifted.entry.generics]

    def run(self) -> PortReport:
        started = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            return self.port(started)
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    def blocked(self, started: float, blocked: list[BlockedConstruct]) -> PortReport:
        root = f"{self.source.parent}/"
        blocked = [b.model_copy(update={"location": b.location.replace(root, "")}) for b in blocked]
        first = blocked[0]
        summary = f"{first.op} at {first.location}: {first.missing}"
        return self.report(
            KernelWriterVerdict.BLOCKED, blocked=blocked, started=started, summary=summary
        )

    def port(self, started: float) -> PortReport:
        try:
            plans = [
                _plan(self.spec, self.names, v, self.kernel_source) for v in self.spec.variants
            ]
        except Blocked as err:
            return self.blocked(
                started, [BlockedConstruct(op=err.op, location=err.location, missing=err.missing)]
            )
        references = self.out / "reference"
        all_specs = [check.spec for plan in plans for check in plan.checks]
        dumps = variant_dumps(self.spec_path, self.spec)
        self.dumps = {p.base.label: dumps[p.variant.name] for p in plans if p.variant.name in dumps}
        try:
            self.timed_export(all_specs, references)
        except ReferenceExportError as err:
            where = err.error.file or self.spec.source
            if err.error.line is not None:
                where += f":{err.error.line}"
            return self.blocked(
                started,
                [
                    BlockedConstruct(
                        op="reference export", location=where, missing=err.error.message
                    )
                ],
            )
        self.notes += [
            _dump_note(self.spec, p, references, self.names)
            for p in plans
            if p.base.label in self.dumps
        ]
        lifted: list[_Lifted] = []
        blocked: list[BlockedConstruct] = []
        for plan in plans:
            try:
                lifted += self.lift_variant(plan, references)
            except Blocked as err:
                blocked.append(
                    BlockedConstruct(
                        op=err.op,
                        location=err.location,
                        missing=err.missing,
                        variant=plan.variant.name,
                    )
                )
        self.record_dtype_and_fact_generics(plans)
        if blocked:
            self.write_partial(plans, lifted, references)
            return self.blocked(started, blocked)
        kernel_rs = self.out / KERNEL_FILE
        verify_started = time.perf_counter()
        checks = self.write_and_verify(lifted, plans, kernel_rs, references)
        unproven = self.unproven_generic_variants(lifted, checks)
        if unproven:
            lifted = self.literal_instead(lifted, plans, references, unproven)
            checks = self.write_and_verify(lifted, plans, kernel_rs, references)
        self.timings["verify_s"] = time.perf_counter() - verify_started
        rustc_started = time.perf_counter()
        rustc = check_kernel_rs(kernel_rs)
        self.timings["rustc_s"] = time.perf_counter() - rustc_started
        self.rustc = rustc
        entries = [
            EntryInfo(
                name=item.entry.name,
                variant=item.variant,
                dispatch=next(p.variant.when for p in plans if p.variant.name == item.variant),
                generics=[g.declaration for g in item.entry.generics],
            )
            for item in lifted
        ]
        verdict, summary = port_verdict(checks, rustc)
        return self.report(
            verdict,
            checks=checks,
            entries=entries,
            started=started,
            summary=summary,
            kernel_rs=KERNEL_FILE,
        )

    def write_partial(
        self, plans: list[_VariantPlan], lifted: list[_Lifted], references: Path
    ) -> None:
        """PARTIAL_FILE: the variants that lifted, and the others lifted as far as
        they go, each construct the lifter cannot lift marked where it stands."""
        entries: list[EntryCode] = []
        for plan in plans:
            done = [item.entry for item in lifted if item.variant == plan.variant.name]
            if done:
                entries += done
                continue
            kernel = _entry_name(self.spec, plan.variant)
            path = references / f"{plan.base.label}.loc.mlir"
            try:
                body, _ = partial_lift(path, plan.layouts, kernel, self.names, plan.facts)
            except Blocked as err:
                self.notes.append(f"variant {plan.variant.name}: no partial port ({err})")
                continue
            entries.append(self.entry_code(kernel, plan, body, body.body, []))
        if not entries:
            return
        header = [
            f"`{self.spec.kernel}` from `{self.source_name}`: the kernel writer's partial port.",
            f"Each `{PARTIAL_MARK}` comment marks a construct it cannot lift, with its",
            "reference IR, in place of the code it needs; this file is not compiled.",
        ]
        text = render_module(self.spec.kernel, header, entries)
        (self.out / PARTIAL_FILE).write_text(text.replace(f"{self.source.parent}/", ""))
        self.notes.append(f"{PARTIAL_FILE}: what was lifted, each construct left marked")

    def record_dtype_and_fact_generics(self, plans: list[_VariantPlan]) -> None:
        for plan in plans:
            if plan.generic_arrays and not any(g.name == "E" for g in self.generics):
                dtypes = sorted(
                    {
                        arg.facts.dtype
                        for check in plan.checks
                        for name, arg in check.spec.params.items()
                        if isinstance(arg, ArrayArg) and name in plan.generic_arrays
                    }
                )
                self.generics.append(
                    RecoveredGeneric(
                        name="E",
                        kind="dtype",
                        source=", ".join(sorted(plan.generic_arrays)),
                        how=f"the variant's configurations use {', '.join(dtypes)}; the "
                        "element type of these arrays and of every value typed like them",
                    )
                )
            for name, source in plan.fact_sources.items():
                if not any(g.name == name for g in self.generics):
                    self.generics.append(
                        RecoveredGeneric(
                            name=name,
                            kind="fact",
                            source=source.split(":")[0],
                            how=f"launch fact that varies across the configurations: {source}",
                        )
                    )

    def write_and_verify(
        self, lifted: list[_Lifted], plans: list[_VariantPlan], kernel_rs: Path, references: Path
    ) -> list[ConfigCheck]:
        header = [
            f"`{self.spec.kernel}` from `{self.source_name}`, lifted from its Tile IR by",
            "tileport's kernel writer (deterministic, no LLM). Each entry reproduces its",
            "reference's Tile IR; port_report.json has the proof per configuration.",
        ]
        kernel_rs.write_text(
            render_module(self.spec.kernel, header, [item.entry for item in lifted])
        )
        return self.verify(lifted, plans, kernel_rs, references)

    @staticmethod
    def unproven_generic_variants(
        lifted: list[_Lifted], checks: list[ConfigCheck]
    ) -> dict[str, ConfigCheck]:
        """The variants whose entry is generic in a constant and fails a configuration's
        proof, with the first failure: the differential export moved the IR where the
        generic stands, but a value it implies (a trip count, a derived extent) stayed
        put, or cutile-rs compiles the generic otherwise (UPSTREAM_GAPS.md G16)."""
        proven = (*COMPILED_LEVELS, *GPU_DECIDED_LEVELS)
        generic = {item.variant for item in lifted if item.generic_constants}
        failed: dict[str, ConfigCheck] = {}
        for check in checks:
            if check.variant in generic and (check.error is not None or check.level not in proven):
                failed.setdefault(check.variant, check)
        return failed

    def literal_instead(
        self,
        lifted: list[_Lifted],
        plans: list[_VariantPlan],
        references: Path,
        unproven: dict[str, ConfigCheck],
    ) -> list[_Lifted]:
        """`lifted` with the entries of the `unproven` variants made literal per
        constant set; the generics only they had are no longer reported."""
        replaced: list[_Lifted] = []
        for item in lifted:
            if item.variant not in unproven:
                replaced.append(item)
                continue
            plan = next(p for p in plans if p.variant.name == item.variant)
            failure = unproven[item.variant]
            reason = (
                f"the entry generic in {', '.join(map(generic_name, item.generic_constants))} "
                f"failed {failure.config} ({failure.error or failure.level})"
            )
            self.notes.append(f"variant {item.variant}: {reason}: literal entries instead")
            replaced += self.literal_variant(
                plan, references, reason, _int_constants(plan.base.spec)
            )
        still = {generic_name(c) for item in replaced for c in item.generic_constants}
        self.generics = [g for g in self.generics if g.kind != "constant" or g.name in still]
        return replaced

    def verify(
        self, lifted: list[_Lifted], plans: list[_VariantPlan], kernel_rs: Path, references: Path
    ) -> list[ConfigCheck]:
        """Check every configuration; exports share one resident exporter, and
        the tileiras runs of two configurations overlap."""
        generated = self.out / "generated"
        with RustExporter() as exporter, ThreadPoolExecutor(max_workers=VERIFY_WORKERS) as pool:
            futures = []
            for item in lifted:
                plan = next(p for p in plans if p.variant.name == item.variant)
                for check in item.checks:
                    reference_mlir = (references / f"{check.label}.mlir").read_text()
                    reference_bytecode = references / f"{check.label}.bytecode"
                    futures.append(
                        pool.submit(
                            check_config,
                            exporter,
                            kernel_rs.resolve(),
                            item.entry.name,
                            self.generic_args(item, check, plan),
                            reference_mlir,
                            reference_bytecode,
                            tuple(self.spec.targets),
                            generated,
                            check.label,
                            item.variant,
                            self.out,
                        )
                    )
            return [future.result() for future in futures]

    def report(
        self,
        verdict: KernelWriterVerdict,
        *,
        started: float,
        summary: str,
        checks: list[ConfigCheck] | None = None,
        entries: list[EntryInfo] | None = None,
        blocked: list[BlockedConstruct] | None = None,
        kernel_rs: str | None = None,
    ) -> PortReport:
        timings = Timings(
            reference_export_s=round(self.timings["reference_export_s"], 3),
            lift_s=round(self.timings["lift_s"], 3),
            verify_s=round(self.timings.get("verify_s", 0.0), 3),
            rustc_s=round(self.timings.get("rustc_s", 0.0), 3),
            total_s=round(time.perf_counter() - started, 3),
        )
        report = PortReport(
            kernel=self.spec.kernel,
            spec=str(self.spec_path),
            verdict=verdict,
            summary=summary,
            kernel_rs=kernel_rs,
            entries=entries or [],
            generics=self.generics,
            literal_entries=self.literal_entries,
            checks=checks or [],
            blocked=blocked or [],
            timings=timings,
            rustc_check=None if self.rustc is None else self.rustc.passed,
            rustc_log=self.rustc.log if self.rustc is not None else "",
            notes=self.notes,
        )
        (self.out / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")
        return report


def port_kernel(spec_path: Path, out: Path) -> PortReport:
    """Port the kernel of `spec_path` into `out` (kernel.rs, generated/, reference/,
    port_report.json) and return the report."""
    return _Porter(spec_path, out).run()
