"""Stage D, the host/FFI builder: the C-ABI launcher, the library, the wrapper, and
correctness on a GPU.

1. Copy the checkout's library workspace into `host/library/`
   (`library.create_workspace`): the run's library is built there, never in the
   checkout.
2. Take the kernel stage B wrote (`generated/kernel.rs`), laid out by rustfmt. If
   the library already holds that kernel for this operator it is reused (a re-run
   changes nothing); otherwise it is copied into the crate (`src/ffi/kernels/<op>.rs`).
3. Bind the C ABI to the port from the run's spec and its reference kernel
   (`binding`), generate the launcher, the cdef, the wrapper and the pipeline
   check, and build the library (under the library's file lock).
4. Host checks without a GPU: the plain-Rust pipeline check (cargo test), the
   ABI error paths through cffi, and the library's launch plan against the
   spec's for every configuration the port takes (`abi_checks`).
5. Copy `ffi.rs` and `wrapper.py` into `host/`, build the GPU job bundle
   (`host/bundle/`) and run it here (`host/gpu/`): on a machine without a GPU,
   correctness ends BLOCKED env and the report says nothing ran on a GPU.

Verdict: ALL_PASS only when the host part passed and correctness is ALL_PASS.
FAIL class host for a launcher or build problem of the host side, class kernel
when the kernel does not fit the calling convention or fails correctness;
BLOCKED env when the GPU (or a tool) is missing.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from nodes.correctness.runner import RunOutcome, run_bundle
from nodes.host_builder.abi_checks import AbiProber, supported_configs
from nodes.host_builder.binding import (
    BindingError,
    OperatorBinding,
    bind_operator,
)
from nodes.host_builder.bundle import BundleBuildError, build_bundle
from nodes.host_builder.library import (
    LibraryBuildError,
    LibraryCrate,
    add_operator,
    build_library,
    create_workspace,
    install_kernel,
    laid_out_kernel,
    library_lock,
    load_wrapper,
    read_manifest,
    run_pipeline_check,
)
from nodes.host_builder.rust_entry import RustSourceError, parse_kernel_source
from nodes.perf_validator.stage import GPU_RESULTS_DIR
from schemas.gpu import LiteralDispatch
from schemas.kernel_writer import REPORT_FILE, PortReport
from schemas.pipeline import Stage
from schemas.port_spec import PortSpec, PortSpecError, load_port_spec
from schemas.reports import (
    AbiCheck,
    CheckResult,
    CorrectnessReport,
    HostBuildReport,
    KernelWriterReport,
    ReportError,
    load_report,
)
from schemas.run_layout import RunLayout
from schemas.state import PipelineState, StageResult
from schemas.verdicts import CorrectnessVerdict, FailureClass, HostBuildVerdict

BUNDLE_DIR = "bundle"
WORKSPACE_DIR = "library"  # under host/: the cargo workspace the run's library is built in


class StageFailure(Exception):
    """Ends the stage with FAIL (or BLOCKED) of a class, and why."""

    def __init__(self, verdict: HostBuildVerdict, klass: FailureClass, why: str) -> None:
        super().__init__(why)
        self.verdict = verdict
        self.klass = klass


@dataclass
class _Progress:
    """What the stage has established so far; the report is built from it."""

    state: PipelineState
    layout: RunLayout
    attempt: int
    symbol: str | None = None
    host_checks: list[CheckResult] = field(default_factory=list)
    abi_checks: list[AbiCheck] = field(default_factory=list)
    ffi_rs: str | None = None
    wrapper: str | None = None
    library: str | None = None
    notes: list[str] = field(default_factory=list)

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.host_checks.append(CheckResult(name=name, passed=passed, detail=detail))
        return passed


@dataclass(frozen=True)
class WriterEntries:
    """The kernel writer's entries: one per variant, and those specialised to literal
    constants (several can share a variant; the launcher picks by the constants)."""

    by_variant: dict[str, str] | None = None
    literal: list[LiteralDispatch] | None = None


def kernel_source(layout: RunLayout) -> tuple[Path, WriterEntries]:
    """generated/kernel.rs (as B's report names it), and B's entries."""
    try:
        written = load_report(KernelWriterReport, layout)
        kernel = layout.resolve(written.kernel_rs) if written.kernel_rs else layout.kernel_rs
    except ReportError:
        kernel = layout.kernel_rs
    if not kernel.is_file():
        raise StageFailure(
            HostBuildVerdict.FAIL, FailureClass.KERNEL, f"no kernel source at {kernel.name}"
        )
    report_path = layout.generated_dir / REPORT_FILE
    if not report_path.is_file():
        return kernel, WriterEntries()
    return kernel, writer_entries(
        PortReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    )


def writer_entries(report: PortReport) -> WriterEntries:
    literal = [
        LiteralDispatch(
            entry=e.entry,
            variant=e.variant,
            constants={name: int(value) for name, value in e.bindings.items()},
        )
        for e in report.literal_entries
    ]
    specialised = {e.entry for e in literal}
    by_variant: dict[str, list[str]] = {}
    for entry in report.entries:
        if entry.name not in specialised:
            by_variant.setdefault(entry.variant, []).append(entry.name)
    several = {v: names for v, names in by_variant.items() if len(names) > 1}
    if several:
        raise StageFailure(
            HostBuildVerdict.FAIL,
            FailureClass.HOST,
            f"variants with several entries not specialised to literals {several}: the "
            "launcher cannot choose between them",
        )
    return WriterEntries(
        by_variant={v: names[0] for v, names in by_variant.items()} or None,
        literal=literal or None,
    )


@dataclass(frozen=True)
class _Placed:
    path: Path
    module_path: str
    entries: WriterEntries = WriterEntries()  # what the library already knew, when reused


def _place_kernel(crate: LibraryCrate, operator: str, kernel: Path) -> _Placed:
    """The kernel already in the library when it is the same text laid out, else an
    installed copy."""
    manifest = read_manifest(crate)
    known = next((op for op in manifest.operators if op.name == operator), None)
    if known is not None:
        current = crate.src_dir / known.kernel
        if current.is_file() and current.read_text(encoding="utf-8") == laid_out_kernel(kernel):
            return _Placed(
                current, known.rust_module_path, WriterEntries(known.entries, known.literal_entries)
            )
    return _Placed(*install_kernel(crate, operator, kernel))


def _bind(
    progress: _Progress, workspace: LibraryCrate, spec: PortSpec, spec_path: Path
) -> OperatorBinding:
    kernel, entries = kernel_source(progress.layout)
    try:
        placed = _place_kernel(workspace, spec.name, kernel)
        if entries == WriterEntries():
            entries = placed.entries
        binding = bind_operator(
            spec,
            spec_path,
            parse_kernel_source(placed.path),
            placed.module_path,
            entries.by_variant,
            entries.literal,
        )
    except (BindingError, RustSourceError) as exc:
        progress.check("bind the C ABI to the port", False, str(exc))
        raise StageFailure(HostBuildVerdict.FAIL, FailureClass.KERNEL, str(exc)) from None
    generated = add_operator(workspace, binding, entries.by_variant, entries.literal)
    progress.symbol = binding.abi.symbol
    written = ", ".join(p.name for p in generated.written) or "nothing changed"
    progress.check("generate the launcher, cdef, wrapper and pipeline check", True, written)
    missing = binding.unsupported_dtypes()
    if missing:
        progress.notes.append(f"dtypes the spec allows but the port does not take: {missing}")
    return binding


def _build(progress: _Progress, workspace: LibraryCrate, operator: str) -> Path:
    log = progress.layout.stage_log(Stage.HOST_BUILDER, progress.attempt)
    try:
        with library_lock():
            library = build_library(workspace, log)
        pipeline_log = log.with_suffix(".pipeline.log")
        run_pipeline_check(workspace, operator, pipeline_log)
    except LibraryBuildError as exc:
        progress.check("build and pipeline check", False, str(exc))
        raise StageFailure(HostBuildVerdict.FAIL, _build_failure_class(exc.log), str(exc)) from None
    progress.check("build the library", True, library.name)
    progress.check("plain-Rust pipeline check", True, f"cargo test pipeline {operator}::")
    return library


def _build_failure_class(log: str) -> FailureClass:
    """Host when rustc points into a generated launcher, else kernel (the kernel does
    not compile, or the pipeline check does not compile it to Tile IR)."""
    places = re.findall(r"-->\s+(\S+?):\d+:\d+", log)
    launcher = [p for p in places if "/ffi/" in p and "/ffi/kernels/" not in p]
    return FailureClass.HOST if launcher else FailureClass.KERNEL


def _abi(
    progress: _Progress,
    workspace: LibraryCrate,
    spec: PortSpec,
    binding: OperatorBinding,
    library: Path,
) -> None:
    prober = AbiProber(load_wrapper(workspace.wrapper_path).Library(library), binding)
    configs = supported_configs(spec, binding)
    if not configs:
        progress.check("a configuration the port takes", False, "the port takes none")
        raise StageFailure(
            HostBuildVerdict.FAIL,
            FailureClass.KERNEL,
            f"the port takes none of the spec's configurations ({binding.unsupported_dtypes()})",
        )
    progress.abi_checks = prober.run_error_probes(configs[0])
    progress.host_checks += prober.plan_checks(spec)
    failed = [c.case for c in progress.abi_checks if not c.passed]
    failed += [c.name for c in progress.host_checks if not c.passed]
    if failed:
        raise StageFailure(HostBuildVerdict.FAIL, FailureClass.HOST, f"ABI checks failed: {failed}")


def _copy_artifacts(
    progress: _Progress, workspace: LibraryCrate, operator: str, library: Path
) -> None:
    """`host/ffi.rs` and `host/wrapper.py`; the library stays where the workspace built it."""
    shutil.copyfile(workspace.ffi_dir / f"{operator}.rs", progress.layout.ffi_rs)
    shutil.copyfile(workspace.wrapper_path, progress.layout.wrapper_py)
    progress.ffi_rs = progress.layout.relative(progress.layout.ffi_rs)
    progress.wrapper = progress.layout.relative(progress.layout.wrapper_py)
    progress.library = progress.layout.relative(library)


def _correctness(
    progress: _Progress, workspace: LibraryCrate, spec_path: Path
) -> CorrectnessReport:
    state = progress.state
    host = progress.layout.host_dir
    try:
        build_bundle(
            spec_path,
            host / BUNDLE_DIR,
            workspace,
            run_id=state.run_id,
            attempt=progress.attempt,
            time_all_configs=state.options.time_all_configs,
        )
    except BundleBuildError as exc:
        progress.check("build the GPU job bundle", False, str(exc))
        raise StageFailure(HostBuildVerdict.FAIL, FailureClass.HOST, str(exc)) from None
    progress.check("build the GPU job bundle", True, f"host/{BUNDLE_DIR}")
    if state.options.no_gpu:
        return CorrectnessReport(
            run_id=state.run_id,
            attempt=progress.attempt,
            verdict=CorrectnessVerdict.BLOCKED,
            ran_on_gpu=False,
            summary="Nothing was run on a GPU: the run was started with --no-gpu. "
            f"Run the bundle host/{BUNDLE_DIR} with `tileport gpu-run` on a GPU host.",
        )
    outcome: RunOutcome = run_bundle(host / BUNDLE_DIR, host / GPU_RESULTS_DIR)
    return outcome.correctness


def _report(
    progress: _Progress,
    verdict: HostBuildVerdict,
    klass: FailureClass | None,
    summary: str,
    correctness: CorrectnessReport | None,
) -> HostBuildReport:
    return HostBuildReport(
        run_id=progress.state.run_id,
        attempt=progress.attempt,
        verdict=verdict,
        verdict_class=klass,
        summary=summary,
        notes=progress.notes,
        c_symbol=progress.symbol,
        ffi_rs=progress.ffi_rs,
        wrapper=progress.wrapper,
        library=progress.library,
        host_checks=progress.host_checks,
        abi_checks=progress.abi_checks,
        correctness_report=(
            None
            if correctness is None
            else progress.layout.relative(progress.layout.report_path(correctness.FILE_NAME))
        ),
    )


def _verdict_of(correctness: CorrectnessReport) -> tuple[HostBuildVerdict, FailureClass | None]:
    if correctness.verdict is CorrectnessVerdict.ALL_PASS:
        return HostBuildVerdict.ALL_PASS, None
    if correctness.verdict is CorrectnessVerdict.BLOCKED:
        return HostBuildVerdict.BLOCKED, FailureClass.ENV
    return HostBuildVerdict.FAIL, FailureClass.KERNEL


def run(state: PipelineState) -> StageResult:
    layout = state.layout()
    progress = _Progress(state, layout, state.next_attempt(Stage.HOST_BUILDER))
    spec_path = Path(state.spec_path)
    correctness: CorrectnessReport | None = None
    try:
        spec = load_port_spec(spec_path)
        workspace = create_workspace(layout.host_dir / WORKSPACE_DIR)
        binding = _bind(progress, workspace, spec, spec_path)
        library = _build(progress, workspace, spec.name)
        _abi(progress, workspace, spec, binding, library)
        _copy_artifacts(progress, workspace, spec.name, library)
        correctness = _correctness(progress, workspace, spec_path)
    except PortSpecError as exc:
        report = _report(progress, HostBuildVerdict.FAIL, FailureClass.HOST, str(exc), None)
        return StageResult(report=report)
    except StageFailure as failure:
        report = _report(progress, failure.verdict, failure.klass, str(failure), correctness)
        return StageResult(report=report)
    verdict, klass = _verdict_of(correctness)
    summary = ""
    if verdict is not HostBuildVerdict.ALL_PASS:
        summary = f"host part passed; {correctness.summary or correctness.gpu_statement()}"
    report = _report(progress, verdict, klass, summary, correctness)
    return StageResult(report=report, extra_reports=(correctness,))
