"""Stage A, the analyzer: resolves what cuTile Python's JIT hides and writes the
contract every later stage routes from (`reports/analysis.json`).

From the port spec it validates the spec against the kernel source, enumerates
variants and configurations and maps each configuration to its variant, checks
that no variant spans both sides of a branch that only constants decide,
exports the reference Tile IR of every variant into `reference/` (or takes a
variant's bytecode dump, `reference_bytecode`), and records ops, padding,
conversions, tolerances (from the spec, never invented), autotune space and
the entry-symbol policy. Baselines are timed only where a GPU and a GPU runner
are present.

Verdicts: PASS; FAIL_FIXABLE when the spec is wrong (each problem names its
field); BLOCKED when the kernel does not export (file:line of the error), or
its reference backend cannot be used on this machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from nodes.analyzer.baselines import BaselineOutcome, time_baselines
from nodes.analyzer.branches import ConstantBranch, Scope, branch_outcome, reaches
from nodes.analyzer.source import KernelSource, SourceError, read_kernel_source
from schemas.pipeline import Stage
from schemas.port_spec import PortSpec, PortSpecError, ResolvedConfig, load_port_spec, spec_relative
from schemas.reference_export import ArrayFacts, ExportError, ExportRecord, Specialisation
from schemas.reports import (
    AnalysisReport,
    ArrayParam,
    AutotuneSpace,
    ConfigUse,
    CorrectnessReference,
    DtypeLowering,
    EntrySymbolPolicy,
    KernelAnalysis,
    KernelPattern,
    LaunchPath,
    OperatorConfig,
    OpsUsed,
    ReferenceBackend,
    Scalar,
    Tolerance,
    Variant,
)
from schemas.run_layout import RunLayout, write_text_atomic
from schemas.state import PipelineState, StageResult
from schemas.verdicts import AnalyzerVerdict
from tileir.mlir import iter_ops, parse_module
from toolchain.bytecode_dump import dump_notes
from toolchain.doctor import check_triton_tileir
from toolchain.reference_export import (
    ReferenceExportError,
    export_with_dumps,
    library_module,
    specialisations,
    variant_dumps,
)

Timer = Callable[[Path, KernelAnalysis, Path, bool], BaselineOutcome]

# Export errors that a change to the spec fixes, and the spec field to change.
SPEC_ERROR_FIELDS: Final = {
    "spec_error": "(spec)",
    "kernel_not_found": "kernel",
    "signature_mismatch": "arrays/scalars/constants",
}
# Element-type conversions of data; integer width changes of index math are not lowering.
CONVERSION_OPS: Final = frozenset({"ftof", "itof", "ftoi"})
_PADDING = re.compile(r"padding_value\s*=\s*([A-Za-z0-9_.+-]+)")


class AnalysisStop(Exception):
    """Ends the analysis with a verdict other than PASS."""

    def __init__(self, verdict: AnalyzerVerdict, summary: str, problems: list[str]) -> None:
        super().__init__(summary)
        self.verdict = verdict
        self.summary = summary
        self.problems = problems


def fixable(problems: list[str]) -> AnalysisStop:
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return AnalysisStop(
        AnalyzerVerdict.FAIL_FIXABLE, f"fix the port spec: {problems[0]}{more}", problems
    )


def blocked(line: str) -> AnalysisStop:
    return AnalysisStop(AnalyzerVerdict.BLOCKED, line, [line])


@dataclass
class Findings:
    """What the analysis learnt beside the contract itself: one line each."""

    notes: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.notes.append(line)


def run(state: PipelineState) -> StageResult:
    return StageResult(analyse(state))


def analyse(
    state: PipelineState,
    *,
    timer: Timer | None = None,
) -> AnalysisReport:
    """The analyzer's report for this run (also logged to logs/analyzer.<n>.log)."""
    layout = state.layout()
    meta = state.report_meta(Stage.ANALYZER)
    findings = Findings()
    try:
        analysis = _analyse(
            Path(state.spec_path),
            layout,
            findings,
            no_gpu=state.options.no_gpu,
            timer=timer or _time,
        )
    except AnalysisStop as stop:
        report = AnalysisReport(
            **meta,
            verdict=stop.verdict,
            summary=stop.summary,
            problems=stop.problems,
            notes=findings.notes,
        )
    else:
        summary = (
            f"{analysis.kernel_name}: {len(analysis.variants)} variant(s), "
            f"{len(analysis.configs)} configuration(s), reference IR exported"
        )
        report = AnalysisReport(
            **meta,
            verdict=AnalyzerVerdict.PASS,
            analysis=analysis,
            summary=summary,
            notes=findings.notes,
        )
    _write_log(layout, meta["attempt"], report)
    return report


def _write_log(layout: RunLayout, attempt: int, report: AnalysisReport) -> None:
    lines = [f"verdict: {report.verdict}", f"summary: {report.summary}"]
    lines += [f"problem: {problem}" for problem in report.problems]
    lines += [f"note: {note}" for note in report.notes]
    write_text_atomic(layout.stage_log(Stage.ANALYZER, attempt), "\n".join(lines) + "\n")


def _time(
    spec_path: Path, analysis: KernelAnalysis, run_dir: Path, no_gpu: bool
) -> BaselineOutcome:
    return time_baselines(spec_path, analysis, run_dir, no_gpu=no_gpu)


# -- the analysis, step by step ----------------------------------------------------------


def _analyse(
    spec_path: Path,
    layout: RunLayout,
    findings: Findings,
    *,
    no_gpu: bool,
    timer: Timer,
) -> KernelAnalysis:
    spec = _load_spec(spec_path)
    _require_backend(spec, findings)
    source_path = spec_relative(spec_path, spec.source)
    source = _read_source(source_path, spec, findings)
    _require_parameters(source, spec)
    resolved = [spec.resolve(config, purpose) for config, purpose in spec.all_configs()]
    _require_structural_variants(spec, source, resolved, findings)
    _note_generic_constants(spec, resolved, findings)
    specs = specialisations(spec)
    record = _export_reference(spec_path, spec, specs, layout)
    ir_texts = {
        variant.name: layout.reference_ir(variant.name).read_text() for variant in spec.variants
    }
    findings.add(
        f"reference IR: cuda-tile {record.cuda_tile_version}, bytecode {record.bytecode_version}, "
        f"{record.tileiras_version}"
    )
    for exported in record.variants:
        if exported.dump is None:
            findings.add(
                f"variant {exported.variant}: exported from configuration "
                f"{exported.specialisation.config}, entry {exported.symbol}"
            )
    for note in dump_notes(record, layout.reference_dir, spec.source):
        findings.add(note)
    analysis = _contract(spec, source, resolved, specs, ir_texts, layout, findings)
    outcome = timer(spec_path, analysis, layout.root, no_gpu)
    findings.add(outcome.note)
    if outcome.timings:
        analysis = analysis.model_copy(update={"baselines": outcome.timings})
        analysis = KernelAnalysis.model_validate(analysis.model_dump())
    return analysis


def _load_spec(spec_path: Path) -> PortSpec:
    try:
        return load_port_spec(spec_path)
    except PortSpecError as exc:
        raise fixable([f"{field}: {message}" for field, message in exc.problems]) from None


def _require_backend(spec: PortSpec, findings: Findings) -> None:
    triton = check_triton_tileir()
    findings.add(f"Triton-TileIR: {triton.note or triton.version}")
    if spec.reference_backend == "triton_tileir" and not _all_dumps(spec):
        raise blocked(
            "reference_backend triton_tileir: only cuTile Python references can be exported "
            f"on this machine (Triton-TileIR: {triton.note}); a variant can name its Tile IR "
            "bytecode dump instead (reference_bytecode)"
        )


def _all_dumps(spec: PortSpec) -> bool:
    """Every variant's reference is a bytecode dump: nothing is compiled from the source."""
    return all(variant.reference_bytecode is not None for variant in spec.variants)


def _read_source(path: Path, spec: PortSpec, findings: Findings) -> KernelSource:
    try:
        return read_kernel_source(path, spec.kernel)
    except SourceError as exc:
        if exc.field == "source" and _all_dumps(spec):
            findings.add(
                f"source {spec.source}: {exc}; every variant is a bytecode dump, so the spec's "
                "parameters stand in for the kernel's and no source-level check is made "
                "(constant branches, conversions, bounds checks)"
            )
            return KernelSource(
                path=path,
                kernel=spec.kernel,
                line=0,
                parameters=[*spec.arrays, *spec.scalars, *spec.constants],
                constant_parameters=list(spec.constants),
            )
        if exc.field is not None:
            raise fixable([f"{exc.field}: {exc}"]) from None
        where = f"{spec.source}:{exc.line}" if exc.line is not None else spec.source
        raise blocked(f"{where}: the kernel does not export: {exc}") from None


def _require_parameters(source: KernelSource, spec: PortSpec) -> None:
    """The spec declares every kernel parameter once, and no other."""
    declared = {**{n: "arrays" for n in spec.arrays}, **{n: "scalars" for n in spec.scalars}}
    declared.update({n: "constants" for n in spec.constants})
    where = source.where(source.line)
    problems = [
        f"arrays/scalars/constants: kernel parameter {name!r} ({where}) is not declared"
        for name in source.parameters
        if name not in declared
    ]
    problems += [
        f"{declared[name]}.{name}: {spec.kernel} ({where}) has no parameter {name!r}"
        for name in declared
        if name not in source.parameters
    ]
    problems += [
        f"{declared[name]}.{name}: declared as {declared[name]} but {spec.kernel} ({where}) "
        "annotates it ct.Constant"
        for name in source.constant_parameters
        if name in declared and declared[name] != "constants"
    ]
    if problems:
        raise fixable(problems)


def _scope(config: ResolvedConfig) -> Scope:
    return Scope(
        constants=config.constants,
        array_dtypes={name: array.dtype for name, array in config.arrays.items()},
    )


def _require_structural_variants(
    spec: PortSpec, source: KernelSource, resolved: list[ResolvedConfig], findings: Findings
) -> None:
    """No variant may cover configurations on both sides of a constant branch."""
    modules = source.cutile_modules
    outcomes = {
        config.name: {
            branch.index: branch_outcome(branch, _scope(config), modules)
            for branch in source.branches
        }
        for config in resolved
    }
    problems: list[str] = []
    for branch in source.branches:
        sides = _sides_per_variant(branch, spec, resolved, outcomes)
        described = branch.describe(source.path.name)
        if not any(side is not None for taken in sides.values() for side in taken.values()):
            findings.add(f"constant branch {described}: undetermined for every configuration")
            continue
        findings.add(f"constant branch {described}: " + _sides_text(sides))
        for variant, taken in sides.items():
            known = {side for side in taken.values() if side is not None}
            if len(known) > 1:
                examples = ", ".join(f"{name}: {side}" for name, side in taken.items())
                problems.append(
                    f"variants.{variant}: its configurations take both sides of {described} "
                    f"({examples}); split it into one variant per side"
                )
    if problems:
        raise fixable(problems)


def _sides_per_variant(
    branch: ConstantBranch,
    spec: PortSpec,
    resolved: list[ResolvedConfig],
    outcomes: dict[str, dict[int, bool | None]],
) -> dict[str, dict[str, bool | None]]:
    sides: dict[str, dict[str, bool | None]] = {variant.name: {} for variant in spec.variants}
    for config in resolved:
        if reaches(branch, outcomes[config.name]):
            sides[config.variant][config.name] = outcomes[config.name][branch.index]
    return sides


def _sides_text(sides: dict[str, dict[str, bool | None]]) -> str:
    parts = []
    for variant, taken in sides.items():
        known = sorted({side for side in taken.values() if side is not None})
        label = "/".join("taken" if side else "not taken" for side in known) or "undetermined"
        parts.append(f"{variant}: {label}")
    return "; ".join(parts)


def _note_generic_constants(
    spec: PortSpec, resolved: list[ResolvedConfig], findings: Findings
) -> None:
    """Constants whose value differs inside one variant must become const generics."""
    for variant in spec.variants:
        configs = [config for config in resolved if config.variant == variant.name]
        for name in spec.constants:
            values = sorted({config.constants[name] for config in configs}, key=str)
            if len(values) > 1:
                shown = ", ".join(str(value) for value in values)
                findings.add(
                    f"variant {variant.name}: constant {name} takes {shown} across its "
                    "configurations: a const generic on the Rust side, never a runtime argument"
                )


def _export_reference(
    spec_path: Path,
    spec: PortSpec,
    specs: list[Specialisation],
    layout: RunLayout,
) -> ExportRecord:
    try:
        return export_with_dumps(
            spec_relative(spec_path, spec.source),
            spec.kernel,
            specs,
            layout.reference_dir,
            dumps=variant_dumps(spec_path, spec),
            target=spec.targets[0],
            cubin_targets=tuple(spec.targets),
            entry_symbol=spec.entry_symbol,
            **library_module(spec_path, spec),
        )
    except ReferenceExportError as exc:
        raise _export_stop(exc.error, spec) from None


def _export_stop(error: ExportError, spec: PortSpec) -> AnalysisStop:
    where = _error_location(error, spec)
    variant = f" [variant {error.variant}]" if error.variant else ""
    if error.kind in SPEC_ERROR_FIELDS:
        return fixable([f"{SPEC_ERROR_FIELDS[error.kind]}: {where}{error.message}{variant}"])
    line = f"{where}the kernel does not export ({error.kind}{variant}): {error.message}"
    if error.source_line:
        line += f" | {error.source_line}"
    return blocked(line)


def _error_location(error: ExportError, spec: PortSpec) -> str:
    if error.file is None:
        return ""
    shown = spec.source if Path(error.file).name == Path(spec.source).name else error.file
    return f"{shown}:{error.line}: " if error.line is not None else f"{shown}: "


# -- the contract ----------------------------------------------------------------------


def _contract(
    spec: PortSpec,
    source: KernelSource,
    resolved: list[ResolvedConfig],
    specs: list[Specialisation],
    ir_texts: dict[str, str],
    layout: RunLayout,
    findings: Findings,
) -> KernelAnalysis:
    single = len(spec.variants) == 1
    by_variant = {specialisation.variant: specialisation for specialisation in specs}
    backend = ReferenceBackend(spec.reference_backend)
    variants = [
        Variant(
            name=variant.name,
            kernel_function=spec.kernel,
            dispatch_condition=_dispatch_condition(variant.when, single),
            constants=_variant_constants(by_variant[variant.name]),
            reference_ir=layout.relative(layout.reference_ir(variant.name)),
            reference_backend=backend,
            arrays=_array_params(by_variant[variant.name]),
            autotune_configs=_autotune_configs(spec, variant.constants),
        )
        for variant in spec.variants
    ]
    if source.unchecked_access_lines:
        lines = ", ".join(source.where(line) for line in source.unchecked_access_lines)
        findings.add(f"memory accesses with check_bounds=False: {lines}")
    return KernelAnalysis(
        operator=spec.name,
        kernel_name=spec.kernel,
        source_file=str(source.path),
        reference_backend=backend,
        launch_path=LaunchPath(spec.launch_path),
        pattern=KernelPattern.SINGLE if single else KernelPattern.MULTI_VARIANT,
        ops=_ops_used(spec, source, ir_texts, layout),
        configs=[_operator_config(config) for config in resolved],
        variants=variants,
        config_variants={config.name: config.variant for config in resolved},
        correctness_reference=CorrectnessReference(
            function=spec.reference.function, origin=spec.reference.origin
        ),
        tolerances={
            dtype: Tolerance(atol=t.atol, rtol=t.rtol, source=t.source)
            for dtype, t in spec.tolerances.items()
        },
        autotune=_autotune_space(spec),
        entry_symbols=EntrySymbolPolicy(
            c_symbol=c_symbol(spec.name),
            rust_entries={
                variant.name: spec.kernel if single else f"{spec.kernel}_{variant.name}"
                for variant in spec.variants
            },
        ),
    )


def c_symbol(operator: str) -> str:
    return "cutile_" + re.sub(r"[^a-z0-9_]", "_", operator.lower())


def _dispatch_condition(when: str, single: bool) -> str:
    if single:
        return "always"
    return "otherwise" if when.strip() == "True" else when


def _variant_constants(specialisation: Specialisation) -> dict[str, Scalar]:
    return {
        name: param.value
        for name, param in specialisation.params.items()
        if param.kind == "constant"
    }


def _array_params(specialisation: Specialisation) -> list[ArrayParam]:
    params = []
    for name, param in specialisation.params.items():
        facts: ArrayFacts | None = None
        if param.kind == "array":
            facts = param.facts
        elif param.kind == "array_list":
            facts = param.element
        if facts is not None:
            params.append(
                ArrayParam(
                    name=name,
                    dtype=facts.dtype,
                    ndim=facts.ndim,
                    shape_divisible_by=list(facts.shape_divisible_by),
                    stride_divisible_by=list(facts.stride_divisible_by),
                    stride_constant=list(facts.stride_constant),
                    base_addr_divisible_by=facts.base_addr_divisible_by,
                )
            )
    return params


def _autotune_entries(spec: PortSpec) -> list[dict[str, Scalar]]:
    if spec.autotune is None:
        return []
    entries = []
    for candidate in spec.autotune.space:
        entry: dict[str, Scalar] = dict(candidate.constants)
        if candidate.hints is not None:
            entry.update(candidate.hints.as_kwargs())
        entries.append(entry)
    return entries


def _autotune_configs(
    spec: PortSpec, fixed: dict[str, bool | int | float | str]
) -> list[dict[str, Scalar]]:
    """The autotune candidates a variant can run: none contradicts its own constants."""
    return [
        entry
        for entry in _autotune_entries(spec)
        if all(entry.get(name, value) == value for name, value in fixed.items())
    ]


def _autotune_space(spec: PortSpec) -> AutotuneSpace | None:
    if spec.autotune is None:
        return None
    return AutotuneSpace(key=list(spec.autotune.key), space=_autotune_entries(spec))


def _operator_config(config: ResolvedConfig) -> OperatorConfig:
    return OperatorConfig(
        id=config.name,
        dtype=config.dtype,
        shapes={name: list(array.shape) for name, array in config.arrays.items()},
        constants=dict(config.constants),
        uses=[ConfigUse.CORRECTNESS if config.purpose == "test" else ConfigUse.PERF],
    )


def _ops_used(
    spec: PortSpec, source: KernelSource, ir_texts: dict[str, str], layout: RunLayout
) -> OpsUsed:
    ir_ops: set[str] = set()
    padding = set(source.padding_modes)
    lowering = [
        DtypeLowering(
            source=f"dtype of {conversion.value}",
            target=conversion.target,
            where=source.where(conversion.line),
        )
        for conversion in source.conversions
    ]
    for variant, text in sorted(ir_texts.items()):
        module = parse_module(text)
        where = layout.relative(layout.reference_ir(variant))
        conversions: dict[tuple[str, str, str], list[int]] = {}
        for op in iter_ops(module):
            ir_ops.add(op.name)
            if op.name in CONVERSION_OPS and op.operand_types and op.result_types:
                key = (
                    _element_type(op.operand_types[0]),
                    _element_type(op.result_types[0]),
                    op.name,
                )
                conversions.setdefault(key, []).append(op.line)
        lowering += [
            DtypeLowering(
                source=source_type,
                target=target_type,
                where=f"{where} line(s) {', '.join(map(str, lines))} ({name})",
            )
            for (source_type, target_type, name), lines in conversions.items()
        ]
        padding.update(_PADDING.findall(text))
    return OpsUsed(
        ops=[f"ct.{name}" for name in sorted(source.calls)]
        + [f"cuda_tile.{name}" for name in sorted(ir_ops)],
        uses_cdiv="cdiv" in source.calls or _spec_uses_cdiv(spec),
        check_bounds=source.check_bounds,
        padding_modes=sorted(padding),
        dtype_lowering=lowering,
    )


def _element_type(tile_type: str) -> str:
    """`tile<1x1024xf16>` -> `f16`; anything else is returned whole."""
    match = re.search(r"(?:^|x|<)([a-z]+[0-9]+)>$", tile_type.strip())
    return match.group(1) if match else tile_type


def _spec_uses_cdiv(spec: PortSpec) -> bool:
    expressions: list[object] = [*spec.grid]
    for variant in spec.variants:
        expressions += [*(variant.grid or []), *variant.constants.values()]
    for array in spec.arrays.values():
        expressions += array.shape
    expressions += [constant.default for constant in spec.constants.values()]
    return any(isinstance(e, str) and "cdiv(" in e for e in expressions)
