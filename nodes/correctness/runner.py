"""The GPU job runner: `tileport gpu-run BUNDLE [--out DIR]`.

A bundle (see `nodes.host_builder.bundle`) holds the built library, its generated
wrapper, the port spec, the reference kernel and its correctness reference.
On a GPU host this module runs, in order:

1. correctness: every configuration (test configurations under every seed,
   perf configurations under the first), fresh random inputs per seed, outputs
   poisoned first, the spec's tolerances, a non-finite check, and a bitwise
   comparison with the cuTile Python kernel's own output;
2. ABI probes that need a GPU (host memory, misaligned device memory);
3. perf, only after ALL_PASS (docs/PIPELINE.md, "Performance protocol");
4. host wall-clock per call, with and without CUDA graph capture.

It writes `correctness.json` (CorrectnessReport), `perf.json` (PerfReport),
`gpu_run.json` (GpuRunReport) and `summary.md`. Without a usable GPU every
stage ends BLOCKED with class env, and the reports say plainly that nothing
ran on a GPU. Imports at module level are the standard library, pydantic and
the project's schemas: the bundle carries exactly these files.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from nodes.correctness.harness import (
    CaseArrays,
    Comparison,
    buffer_addresses,
    compare,
    expected_outputs,
    is_ragged,
    make_arrays,
)
from nodes.correctness.upload import TOKEN_ENV, UploadError, upload_results
from nodes.perf_validator.bootstrap import SamplingDecision, SamplingPolicy
from nodes.perf_validator.measure import (
    DEFAULT_PLACEMENTS,
    L2_FLUSH_METHODS,
    Contender,
    config_summaries,
    geomean_band,
    host_overhead,
    l2_flush,
    measure_config,
    perf_detail,
)
from schemas.gpu import (
    AbiProbe,
    BundleManifest,
    CaseDetail,
    GpuEnvironment,
    GpuRunReport,
    HostOverhead,
    PerfDetail,
    band_text,
)
from schemas.port_spec import PortSpec, ResolvedConfig, load_port_spec
from schemas.reports import (
    CorrectnessCase,
    CorrectnessReport,
    MeasurementEnvironment,
    PerfReport,
    PerfRow,
    ReferenceBackend,
    geomean_line,
    geomean_ratio,
)
from schemas.verdicts import CorrectnessVerdict, PerfVerdict
from toolchain.cupti import KernelTimer
from toolchain.jit_cubins import keep_compiles
from toolchain.kernel_slice import load_kernel

EXIT_ALL_PASS = 0
EXIT_FAILED = 1
EXIT_BLOCKED = 2
EXIT_BAD_BUNDLE = 3
EXIT_UPLOAD_FAILED = 4
# 30 rounds of 100 calls (measure.HOST_ROUNDS): host speed drifts by ±10 % within a run.
HOST_OVERHEAD_CALLS = 3000
MAX_PLACEMENTS = 32  # each is a loaded copy of the library and two of the kernel
MANIFEST_FILE = "manifest.json"

T = TypeVar("T")


class BundleError(ValueError):
    pass


# --- the bundle -----------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    root: Path
    manifest: BundleManifest

    def path(self, relative: str) -> Path:
        return self.root / relative


def load_bundle(root: Path) -> Bundle:
    manifest_path = root / MANIFEST_FILE
    try:
        manifest = BundleManifest.model_validate_json(manifest_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BundleError(f"{manifest_path}: {exc.strerror}") from None
    except ValueError as exc:
        raise BundleError(f"{manifest_path}: invalid manifest: {exc}") from None
    problems = []
    for entry in manifest.files:
        path = root / entry.path
        if not path.is_file():
            problems.append(f"{entry.path} is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != entry.sha256:
            problems.append(f"{entry.path} does not match its sha256 (damaged in transfer?)")
    if problems:
        raise BundleError("; ".join(problems))
    return Bundle(root=root, manifest=manifest)


def _import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the environment ------------------------------------------------------------------


@dataclass
class GpuContext:
    """Everything a GPU run uses, once the environment probe has succeeded."""

    bundle: Bundle
    spec: PortSpec
    torch: Any
    ct: Any
    wrapper: ModuleType
    library: Any
    kernel: Any
    reference: Any
    torch_equivalent: Any
    device: Any
    environment: GpuEnvironment
    notes: list[str] = field(default_factory=list)
    producer_kernels: dict[str, Any] = field(default_factory=dict)
    """The spec module's other kernels that producer launches run, loaded once each."""
    hinted_kernels: dict[tuple[tuple[tuple[str, Any], ...], int], Any] = field(default_factory=dict)
    """The reference kernel with each configuration's hints (`hinted_kernel`)."""
    kernel_copies: dict[tuple[tuple[tuple[str, Any], ...], int], Any] = field(default_factory=dict)
    """The hinted kernels again, each in a module of its own (`reference_in_module`)."""
    library_copies: list[Any] = field(default_factory=list)
    """The kernel library loaded again from copies of its file (`library_in_module`)."""
    disk_cache: bool = False
    """The library keeps and reads compiled kernels in cutile's per-user disk cache."""
    flush_method: str = "kernel"
    """How the L2 is flushed before each timed call (`measure.L2Flush`)."""
    placements: int = DEFAULT_PLACEMENTS
    """The modules each timed side rotates through (`timed_contenders`)."""

    @property
    def operator(self) -> str:
        return self.bundle.manifest.operator

    @property
    def array_order(self) -> list[str]:
        return [a["name"] for a in self.wrapper.OPERATORS[self.operator]["arrays"]]

    @property
    def scalar_order(self) -> list[str]:
        return [s["name"] for s in self.wrapper.OPERATORS[self.operator]["scalars"]]


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "glibc": "-".join(platform.libc_ver())}
    for name in ("torch", "cuda-tile", "cupti-python", "cffi", "pydantic"):
        version = _version(name)
        if version:
            found[name] = version
    tileiras = os.environ.get("CUTILE_TILEIRAS_PATH")
    if tileiras and Path(tileiras).exists():
        done = subprocess.run([tileiras, "--version"], capture_output=True, text=True, check=False)
        lines = (done.stdout or done.stderr).strip().splitlines()
        found["tileiras"] = lines[-1] if lines else "unknown"
    return found


def _nvidia_smi() -> tuple[str | None, dict[str, str]]:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None, {}
    fields = ["driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem"]
    done = subprocess.run(
        [tool, f"--query-gpu={','.join(fields)}", "--format=csv,noheader", "-i", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    values = [v.strip() for v in done.stdout.strip().split(",")]
    if done.returncode != 0 or len(values) != len(fields):
        return None, {}
    return values[0], dict(zip(fields[1:], values[1:], strict=True))


def _probe(bundle: Bundle, missing: list[str]) -> dict[str, Any]:
    """Imports what a GPU run needs; every failure is appended to `missing`."""
    found: dict[str, Any] = {}
    for name, module in (
        ("torch", "torch"),
        ("cuda.tile", "cuda.tile"),
        ("cupti", "cupti"),
        ("cffi", "cffi"),
    ):
        try:
            found[name] = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{name} is not importable ({exc})")
    torch = found.get("torch")
    if torch is not None and not torch.cuda.is_available():
        missing.append("torch sees no CUDA device (torch.cuda.is_available() is False)")
    tileiras = os.environ.get("CUTILE_TILEIRAS_PATH")
    if not tileiras or not Path(tileiras).exists():
        missing.append("CUTILE_TILEIRAS_PATH does not name a tileiras binary (source env.sh)")
    if "cffi" in found:
        try:
            wrapper = _import_file(bundle.path(bundle.manifest.wrapper), "tileport_kernels")
            found["wrapper"] = wrapper
            found["library"] = wrapper.Library(bundle.path(bundle.manifest.library))
        except Exception as exc:  # a library that does not load is an environment fact
            missing.append(f"the kernel library does not load: {type(exc).__name__}: {exc}")
    return found


def probe_environment(bundle: Bundle) -> tuple[GpuEnvironment, GpuContext | None]:
    missing: list[str] = []
    found = _probe(bundle, missing)
    torch = found.get("torch")
    gpu_ready = not missing and torch is not None
    environment = GpuEnvironment(versions=_versions(), missing=missing)
    if not gpu_ready:
        return environment, None
    assert torch is not None
    try:
        return _gpu_context(bundle, found, environment)
    except Exception as exc:  # the job cannot be set up here: still an environment fact
        missing.append(f"the job could not be prepared: {type(exc).__name__}: {exc}")
        return GpuEnvironment(versions=environment.versions, missing=missing), None


def _gpu_context(
    bundle: Bundle, found: dict[str, Any], environment: GpuEnvironment
) -> tuple[GpuEnvironment, GpuContext]:
    torch = found["torch"]
    device = torch.device("cuda", torch.cuda.current_device())
    properties = torch.cuda.get_device_properties(device)
    driver, clocks = _nvidia_smi()
    environment = GpuEnvironment(
        gpu=torch.cuda.get_device_name(device),
        compute_capability="{}.{}".format(*torch.cuda.get_device_capability(device)),
        driver=driver,
        clocks=clocks,
        l2_bytes=int(properties.L2_cache_size),
        num_sms=int(properties.multi_processor_count),
        versions=environment.versions,
    )
    spec = load_port_spec(bundle.path(bundle.manifest.spec))
    context = GpuContext(
        bundle=bundle,
        spec=spec,
        torch=torch,
        ct=found["cuda.tile"],
        wrapper=found["wrapper"],
        library=found["library"],
        kernel=_reference_kernel(bundle, spec),
        reference=(
            None
            if spec.reference.function is None
            else _spec_function(bundle, spec.reference.function)
        ),
        torch_equivalent=(
            None
            if bundle.manifest.torch_equivalent is None
            else _spec_function(bundle, bundle.manifest.torch_equivalent)
        ),
        device=device,
        environment=environment,
    )
    return environment, context


def _reference_kernel(bundle: Bundle, spec: PortSpec) -> Any:
    """The reference kernel: sliced out of the bundled library module for a library
    spec (`toolchain.kernel_slice`, as the export did), else the bundled source file."""
    if spec.module is not None and spec.source_root is not None:
        return _module_kernel(bundle, spec, spec.kernel)
    module = _import_file(bundle.path(bundle.manifest.reference_source), "reference_kernel")
    return getattr(module, spec.kernel)


def case_arrays(ctx: GpuContext, resolved: ResolvedConfig, seed: int) -> CaseArrays:
    """The configuration's arrays under `seed`, its producer launches run on them."""
    if not resolved.producers:
        return make_arrays(ctx.torch, ctx.spec, resolved, seed, ctx.device)

    def prepare(drawn: dict[str, Any]) -> None:
        run_producers(ctx, resolved, drawn)

    return make_arrays(ctx.torch, ctx.spec, resolved, seed, ctx.device, prepare)


def run_producers(ctx: GpuContext, resolved: ResolvedConfig, drawn: dict[str, Any]) -> None:
    """The configuration's producer launches, in order, as cuTile Python launches them:
    on the drawn arrays they name, zeroed scratch arrays and their recorded values."""
    torch = ctx.torch
    for producer in resolved.producers:
        kernel = ctx.producer_kernels.get(producer.kernel)
        if kernel is None:
            kernel = _module_kernel(ctx.bundle, ctx.spec, producer.kernel)
            ctx.producer_kernels[producer.kernel] = kernel
        arguments: list[Any] = []
        for argument in producer.arguments:
            if argument.array is not None:
                arguments.append(drawn[argument.array])
            elif argument.scratch is not None:
                scratch = argument.scratch
                dtype = getattr(torch, scratch.dtype)
                arguments.append(torch.zeros(scratch.shape, dtype=dtype, device=ctx.device))
            else:
                arguments.append(argument.value)
        grid = tuple(producer.grid)
        ctx.ct.launch(torch.cuda.current_stream(), grid, kernel, tuple(arguments))
    torch.cuda.synchronize()


def _module_kernel(bundle: Bundle, spec: PortSpec, name: str) -> Any:
    """Another kernel of a library spec's module, sliced out as the reference is."""
    if spec.module is None or spec.source_root is None:
        raise ValueError(f"producer {name}: only a library spec (module, source_root) has one")
    root = bundle.path(bundle.manifest.spec).parent / spec.source_root
    return load_kernel(root, spec.module, name)[1]


def _spec_function(bundle: Bundle, function: str) -> Any:
    """`module:function`, the module beside the bundle's spec."""
    module_name, name = function.split(":")
    spec_dir = bundle.path(bundle.manifest.spec).parent
    module = sys.modules.get(module_name)
    if module is None:
        module = _import_file(spec_dir / f"{module_name.replace('.', '/')}.py", module_name)
    return getattr(module, name)


# --- correctness ------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    case: CorrectnessCase
    detail: CaseDetail


def _kernel_arguments(ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays) -> list[Any]:
    """The reference kernel's arguments in its parameter order: arrays, scalars and
    the constants the launch bakes in."""
    values: list[Any] = []
    for name in ctx.bundle.manifest.kernel_parameters:
        if name in resolved.arrays:
            values.append(arrays.kernel_outputs.get(name, arrays.inputs.get(name)))
        elif name in resolved.scalars:
            values.append(resolved.scalars[name])
        else:
            values.append(resolved.constants[name])
    return values


def hinted_kernel(ctx: GpuContext, resolved: ResolvedConfig) -> Any:
    """The reference kernel with the configuration's hints, made once per set of hints.

    `replace_hints` returns a new kernel with its own JIT cache (as cuTile Python's
    documentation says; TileGym keeps them with `cached_replace_hints`): one per call
    compiles, or loads from the disk cache, a new module for every launch, which costs
    tens of milliseconds per call and runs the reference from freshly loaded code each
    time, a handicap no port call has."""
    hints = _hints(resolved)
    if not hints:
        return ctx.kernel
    return _kernel_once(ctx, ctx.hinted_kernels, hints)


def reference_in_module(ctx: GpuContext, resolved: ResolvedConfig, copy: int) -> Any:
    """The kernel of `hinted_kernel` (copy 0), or that kernel once more in a module of
    its own, made once per set of hints and copy: the same hints (none included) give a
    new kernel with its own JIT cache, so its code is loaded again, elsewhere in device
    memory."""
    if copy == 0:
        return hinted_kernel(ctx, resolved)
    return _kernel_once(ctx, ctx.kernel_copies, _hints(resolved), copy)


def _hints(resolved: ResolvedConfig) -> dict[str, Any]:
    return resolved.hints.as_kwargs() if resolved.hints is not None else {}


def _kernel_once(
    ctx: GpuContext, made: dict[Any, Any], hints: dict[str, Any], copy: int = 0
) -> Any:
    key = (tuple(sorted(hints.items())), copy)
    kernel = made.get(key)
    if kernel is None:
        kernel = ctx.kernel.replace_hints(**hints)
        made[key] = kernel
    return kernel


def launch_reference_kernel(
    ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays, kernel: Any = None
) -> None:
    """The cuTile Python kernel launched by `ct.launch`: the configuration's hinted
    kernel, or `kernel` (the same code loaded elsewhere)."""
    kernel = kernel if kernel is not None else hinted_kernel(ctx, resolved)
    stream = ctx.torch.cuda.current_stream()
    ctx.ct.launch(stream, resolved.grid, kernel, tuple(_kernel_arguments(ctx, resolved, arrays)))


def launch_port(
    ctx: GpuContext, arrays: CaseArrays, resolved: ResolvedConfig, library: Any = None
) -> None:
    """The port called through its wrapper: the bundle's library, or `library` (the
    same library loaded again)."""
    scalars = tuple(resolved.argument(name) for name in ctx.scalar_order)
    (library or ctx.library).call(ctx.operator, arrays.port_arrays(ctx.array_order), scalars)


def library_in_module(ctx: GpuContext, copy: int) -> Any:
    """The bundle's library (copy 0), or the library loaded once more from a copy of its
    file (the dynamic loader hands back the loaded library for the same file): its own
    statics, so its own compiled entries, each loaded into a module of its own, the
    port's code elsewhere in device memory. A copy's file is removed once loaded (the
    mapping stays)."""
    if copy == 0:
        return ctx.library
    while len(ctx.library_copies) < copy:
        source = Path(ctx.library.path)
        with tempfile.TemporaryDirectory(prefix="tileport-module-") as scratch:
            path = Path(scratch) / source.name
            shutil.copyfile(source, path)
            library = ctx.wrapper.Library(path)
        if ctx.disk_cache:
            library.enable_disk_cache()
        ctx.library_copies.append(library)
    return ctx.library_copies[copy - 1]


def reference_arguments(
    ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays
) -> dict[str, Any]:
    """What the correctness reference (and the torch column) is called with: the
    input arrays, the scalars and the constants the spec passes."""
    kwargs: dict[str, Any] = dict(arrays.inputs)
    kwargs.update(resolved.scalars)
    kwargs.update({name: resolved.constants[name] for name in ctx.spec.reference.pass_constants})
    return kwargs


def reference_values(
    ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays
) -> dict[str, Any]:
    """The expected outputs: the spec's function, or, with the reference-kernel oracle,
    what the reference kernel wrote (launched by `_matches_reference_kernel`)."""
    outputs = [name for name, a in resolved.arrays.items() if a.role in ("out", "inout")]
    if ctx.reference is None:
        return {name: arrays.kernel_outputs[name] for name in outputs}
    result = ctx.reference(**reference_arguments(ctx, resolved, arrays))
    return expected_outputs(result, outputs)


@dataclass
class _PortCall:
    ok: bool
    status: int | None = None
    message: str = ""


def _call_port(ctx: GpuContext, arrays: CaseArrays, resolved: ResolvedConfig) -> _PortCall:
    """One launch of the port; a refusal (by the wrapper or by the C side, which then
    gives its status) or any other error is recorded, never raised."""
    try:
        launch_port(ctx, arrays, resolved)
        ctx.torch.cuda.synchronize()
    except ctx.wrapper.TileportError as exc:
        return _PortCall(False, exc.status, f"the port refused the call: {exc}")
    except Exception as exc:  # recorded in the case: one bad call must not end the run
        return _PortCall(False, None, f"the port call failed: {type(exc).__name__}: {exc}")
    return _PortCall(True)


def _matches_reference_kernel(
    ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays, messages: list[str]
) -> bool | None:
    """Whether the port's outputs equal, bit for bit, the cuTile Python kernel's."""
    try:
        launch_reference_kernel(ctx, resolved, arrays)
        ctx.torch.cuda.synchronize()
    except Exception as exc:  # the baseline failing is reported, not fatal
        messages.append(f"the reference kernel failed: {type(exc).__name__}: {exc}")
        return None
    return all(
        same_bits(ctx.torch, arrays.port_outputs[name], arrays.kernel_outputs[name])
        for name in arrays.port_outputs
    )


def same_bits(torch: Any, a: Any, b: Any) -> bool:
    """Equal bit for bit: an element neither side wrote stays the NaN it was poisoned
    with on both, which `torch.equal` would call different."""
    if isinstance(a, list | tuple):  # a list-of-arrays output, element by element
        return len(a) == len(b) and all(same_bits(torch, x, y) for x, y in zip(a, b, strict=True))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False

    def raw(tensor: Any) -> Any:
        return tensor.contiguous().reshape(-1).view(torch.uint8)

    return bool(torch.equal(raw(a), raw(b)))


def _reference_reproducible(
    ctx: GpuContext, resolved: ResolvedConfig, seed: int, first: CaseArrays, messages: list[str]
) -> bool | None:
    """The cuTile Python kernel launched again on the same inputs (the same seed, fresh
    arrays): does it give its own output again? A kernel whose writes collide gives
    what the run's scheduling gives, and then neither side can match it bitwise."""
    try:
        again = case_arrays(ctx, resolved, seed)
        launch_reference_kernel(ctx, resolved, again)
        ctx.torch.cuda.synchronize()
    except Exception as exc:  # reported; the case's verdict does not depend on it
        messages.append(f"the reference kernel failed when launched again: {exc}")
        return None
    differing = [
        name
        for name in first.kernel_outputs
        if not same_bits(ctx.torch, first.kernel_outputs[name], again.kernel_outputs[name])
    ]
    if differing:
        messages.append(
            "the cuTile Python kernel gives another output when launched again on the same "
            f"inputs ({', '.join(differing)}): its result depends on the run (colliding "
            "writes on these inputs), so no port can match it bit for bit"
        )
    return not differing


def _compare_with_reference(
    ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays, messages: list[str]
) -> list[Comparison]:
    tolerance = ctx.spec.tolerances[resolved.dtype]
    try:
        expected = reference_values(ctx, resolved, arrays)
        if not expected:
            messages.append(
                "the spec names no output (an array of role out or inout) to compare: "
                "nothing proves this case"
            )
        comparisons = [
            compare(
                ctx.torch, name, arrays.port_outputs[name], want, tolerance.atol, tolerance.rtol
            )
            for name, want in expected.items()
        ]
    except Exception as exc:  # a reference that cannot be computed fails the case
        messages.append(f"the correctness reference failed: {type(exc).__name__}: {exc}")
        return []
    messages += [c.message for c in comparisons]
    return comparisons


def run_case(ctx: GpuContext, resolved: ResolvedConfig, seed: int) -> CaseResult:
    arrays = case_arrays(ctx, resolved, seed)
    tolerance = ctx.spec.tolerances[resolved.dtype]
    port = _call_port(ctx, arrays, resolved)
    messages = [port.message] if port.message else []
    matches = _matches_reference_kernel(ctx, resolved, arrays, messages) if port.ok else None
    comparisons = _compare_with_reference(ctx, resolved, arrays, messages) if port.ok else []
    passed = port.ok and bool(comparisons) and all(c.passed for c in comparisons)
    reproducible = None
    if matches is False and not passed:
        reproducible = _reference_reproducible(ctx, resolved, seed, arrays, messages)
    case = CorrectnessCase(
        config_id=resolved.name,
        dtype=resolved.dtype,
        seed=seed,
        shapes={name: list(a.shape) for name, a in resolved.arrays.items()},
        passed=passed,
        max_abs_error=max((c.max_abs for c in comparisons), default=None),
        max_rel_error=max((c.max_rel for c in comparisons), default=None),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
        nonfinite_outputs=any(c.nonfinite for c in comparisons),
        message="; ".join(messages),
    )
    detail = CaseDetail(
        config_id=resolved.name,
        seed=seed,
        ragged=is_ragged(resolved),
        poisoned_outputs=sorted(n for n, a in resolved.arrays.items() if a.role == "out"),
        port_status=port.status,
        matches_reference_kernel=matches,
        reference_reproducible=reproducible,
    )
    return CaseResult(case, detail)


def run_correctness(ctx: GpuContext) -> list[CaseResult]:
    results: list[CaseResult] = []
    seeds = ctx.bundle.manifest.seeds
    for config, purpose in ctx.spec.all_configs():
        resolved = ctx.spec.resolve(config, purpose)
        for seed in seeds if purpose == "test" else seeds[:1]:
            try:
                results.append(run_case(ctx, resolved, seed))
            except Exception as exc:  # one broken case must not lose the others
                results.append(_broken_case(ctx, resolved, seed, exc))
    return results


def _broken_case(
    ctx: GpuContext, resolved: ResolvedConfig, seed: int, exc: Exception
) -> CaseResult:
    tolerance = ctx.spec.tolerances[resolved.dtype]
    case = CorrectnessCase(
        config_id=resolved.name,
        dtype=resolved.dtype,
        seed=seed,
        shapes={name: list(a.shape) for name, a in resolved.arrays.items()},
        passed=False,
        atol=tolerance.atol,
        rtol=tolerance.rtol,
        message=f"the case could not run: {type(exc).__name__}: {exc}",
    )
    detail = CaseDetail(
        config_id=resolved.name,
        seed=seed,
        ragged=is_ragged(resolved),
        poisoned_outputs=sorted(n for n, a in resolved.arrays.items() if a.role == "out"),
    )
    return CaseResult(case, detail)


# --- ABI probes that need a GPU ------------------------------------------------------------


def abi_probes(ctx: GpuContext, resolved: ResolvedConfig) -> list[AbiProbe]:
    """Host memory (pageable and pinned) passed as the first array (not a list), through
    the raw C entry: the device check must refuse it before any launch."""
    torch = ctx.torch
    arrays = case_arrays(ctx, resolved, 0)
    port_arrays = arrays.port_arrays(ctx.array_order)
    plain = [
        (name, value)
        for name, value in zip(ctx.array_order, port_arrays, strict=True)
        if resolved.arrays[name].list_length is None
    ]
    if not plain:
        ctx.notes.append("no host-memory ABI probe: every array parameter is a list")
        return []
    name, value = plain[0]
    first = ctx.wrapper.describe(value, name)
    host = torch.empty(first.shape, dtype=getattr(torch, first.dtype), device="cpu")
    pinned = torch.empty(first.shape, dtype=getattr(torch, first.dtype), pin_memory=True)
    codes = {name: code for code, name in ctx.wrapper.STATUS.items()}
    cases = {
        "pageable host memory": (host.data_ptr(), codes["DEVICE"]),
        "pinned host memory": (pinned.data_ptr(), codes["DEVICE"]),
    }
    scalars = tuple(resolved.argument(name) for name in ctx.scalar_order)
    prepared = ctx.library.prepare(ctx.operator, port_arrays)
    probes: list[AbiProbe] = []
    for case, (address, expected) in cases.items():
        moved = ctx.wrapper.TensorDescriptor(address, first.dtype, first.shape, first.strides)
        arguments = list(prepared.arguments)
        arguments[prepared.positions[name]] = ctx.library.descriptor(moved)
        stream = ctx.library.ffi.cast("void *", torch.cuda.current_stream().cuda_stream)
        returned = int(prepared.function(*arguments, *scalars, stream))
        probes.append(AbiProbe(case=case, expected=expected, returned=returned))
    torch.cuda.synchronize()
    return probes


# --- perf -----------------------------------------------------------------------------


@dataclass
class PerfOutcome:
    rows: list[PerfRow] = field(default_factory=list)
    details: list[PerfDetail] = field(default_factory=list)
    overhead: list[HostOverhead] = field(default_factory=list)
    flush_bytes: int = 0
    geomean_interval: tuple[float, float] | None = None


def sampling_policy(manifest: BundleManifest) -> SamplingPolicy:
    """The manifest's rounds: perf_repetitions at least, up to perf_max_repetitions
    while a compared median's 95 % interval is wider than ±0.5 %."""
    minimum = manifest.perf_repetitions
    return SamplingPolicy(minimum=minimum, cap=manifest.perf_max_repetitions or minimum)


def timed_configs(spec: PortSpec, manifest: BundleManifest) -> list[ResolvedConfig]:
    """The configurations the perf run times: every one when the bundle says so, else
    the spec's perf set (its test configurations when it has none)."""
    perf = [spec.resolve(c, "perf") for c in spec.perf_configs]
    tests = [spec.resolve(c, "test") for c in spec.test_configs]
    if manifest.time_all_configs:
        return tests + perf
    return perf or tests


def run_perf(ctx: GpuContext, configs: list[ResolvedConfig]) -> PerfOutcome:
    torch = ctx.torch
    manifest = ctx.bundle.manifest
    policy = sampling_policy(manifest)
    flush = l2_flush(torch, ctx.device, ctx.flush_method)
    if flush.method != "kernel":
        ctx.notes.append(
            f"L2 flush before each timed call: {flush.method} (a diagnostic run; the "
            "protocol's flush is the fill kernel)"
        )
    timer = KernelTimer(synchronize=torch.cuda.synchronize)
    timer.start()
    measured: list[tuple[ResolvedConfig, list[Contender], int, SamplingDecision]] = []
    for resolved in configs:
        started = time.monotonic()
        arrays = case_arrays(ctx, resolved, manifest.seeds[0])
        contenders = timed_contenders(ctx, resolved, arrays)
        rounds, decision = measure_config(
            torch, timer, resolved.name, contenders, flush, policy, manifest.perf_warmup
        )
        seconds = time.monotonic() - started
        print(f"{ctx.operator}: {resolved.name}: {rounds} rounds in {seconds:.1f} s", flush=True)
        if decision.cap_hit:
            widths = ", ".join(f"{k} ±{v * 100:.2f} %" for k, v in decision.half_widths.items())
            ctx.notes.append(f"{resolved.name}: stopped at the cap of {rounds} rounds ({widths})")
        measured.append((resolved, contenders, rounds, decision))
    timer.stop()
    outcome = PerfOutcome(flush_bytes=flush.bytes)
    for resolved, contenders, rounds, decision in measured:
        summaries = config_summaries(timer, resolved.name, [c.label for c in contenders])
        buffers = {c.label: c.buffers for c in contenders}
        detail = perf_detail(resolved.name, summaries, buffers, rounds, decision, policy)
        if detail is None:
            ctx.notes.append(f"{resolved.name}: no kernel activity recorded for port or reference")
            continue
        outcome.details.append(detail)
        outcome.rows.append(
            PerfRow(
                config_id=resolved.name,
                variant=resolved.variant,
                dtype=resolved.dtype,
                shapes={name: list(a.shape) for name, a in resolved.arrays.items()},
                port_us=detail.port.median_us,
                baseline_us=detail.reference.median_us,
                baseline_backend=ReferenceBackend.CUTILE_PYTHON,
                repetitions=rounds,
                port_launches=round(detail.port.launches_per_call),
                baseline_launches=round(detail.reference.launches_per_call),
                ratio_interval=detail.ratio_interval,
                aa_band=detail.aa_band,
                cap_hit=detail.cap_hit,
            )
        )
    outcome.geomean_interval = geomean_band(
        [(d.port, d.reference) for d in outcome.details],
        confidence=policy.confidence,
        resamples=policy.resamples,
        seed=policy.seed,
    )
    return outcome


def timed_contenders(
    ctx: GpuContext, resolved: ResolvedConfig, arrays: CaseArrays
) -> list[Contender]:
    """The port, the cuTile Python kernel, the kernel again as the A/A control (control /
    reference is the protocol's noise), and torch eager when the bundle names it; the
    compared sides on one set of buffers (`CaseArrays.shared_outputs`), each with the
    addresses its call is given. Each compared side rotates through
    `ctx.placements` modules of its own (`library_in_module`, `reference_in_module`:
    the control's are not the reference's), so a median covers where code lands as
    it covers noise, and the A/A band is the same code in other modules."""
    timed = arrays.shared_outputs()
    port_buffers = buffer_addresses(ctx.array_order, timed.port_arrays(ctx.array_order))
    kernel_buffers = buffer_addresses(
        ctx.bundle.manifest.kernel_parameters, tuple(_kernel_arguments(ctx, resolved, timed))
    )

    count = ctx.placements
    port_calls = [
        partial(launch_port, ctx, timed, resolved, library_in_module(ctx, copy))
        for copy in range(count)
    ]
    kernel_calls = [
        partial(
            launch_reference_kernel, ctx, resolved, timed, reference_in_module(ctx, resolved, copy)
        )
        for copy in range(2 * count)
    ]
    contenders = [
        Contender("port", port_calls[0], port_buffers, tuple(port_calls[1:])),
        Contender("reference", kernel_calls[0], kernel_buffers, tuple(kernel_calls[1:count])),
        Contender("control", kernel_calls[count], kernel_buffers, tuple(kernel_calls[count + 1 :])),
    ]
    if ctx.torch_equivalent is not None:
        kwargs = reference_arguments(ctx, resolved, timed)

        def eager() -> None:
            ctx.torch_equivalent(**kwargs)

        eager_buffers = buffer_addresses(list(kwargs), tuple(kwargs.values()))
        contenders.append(Contender("torch", eager, eager_buffers))
    return contenders


def _host_overhead(ctx: GpuContext, resolved: ResolvedConfig) -> HostOverhead:
    """Each side called as its user calls it, the arguments built once, as a caller
    holds them: `library.call(op, arrays, scalars)` (the wrapper finds the current
    stream), and `ct.launch(torch.cuda.current_stream(), grid, kernel, args)` with the
    kernel's hints set once. Building them per call (the pydantic lookups of the
    correctness runs) would charge the harness's own Python to whichever side."""
    arrays = case_arrays(ctx, resolved, 0)
    port_arrays = arrays.port_arrays(ctx.array_order)
    scalars = tuple(resolved.argument(name) for name in ctx.scalar_order)
    # Built once; a list's table is allocated here and rewritten by each call.
    prepared = ctx.library.prepare(ctx.operator, port_arrays)
    kernel = hinted_kernel(ctx, resolved)
    kernel_arguments = tuple(_kernel_arguments(ctx, resolved, arrays))
    grid = resolved.grid
    current_stream, launch, library = ctx.torch.cuda.current_stream, ctx.ct.launch, ctx.library

    def wrapper_call() -> None:
        library.call(ctx.operator, port_arrays, scalars)

    def cffi_call() -> None:
        stream = library.ffi.cast("void *", current_stream().cuda_stream)
        prepared.function(*prepared.arguments, *scalars, stream)

    def ct_launch() -> None:
        launch(current_stream(), grid, kernel, kernel_arguments)

    stream = library.ffi.cast("void *", current_stream().cuda_stream)

    def key_alone() -> None:
        library._tensor_layout(ctx.operator, port_arrays)

    def c_call_alone() -> None:
        prepared.function(*prepared.arguments, *scalars, stream)

    parts = {"port_key_us": key_alone, "port_c_call_us": c_call_alone}
    measured = host_overhead(
        ctx.torch, resolved.name, HOST_OVERHEAD_CALLS, wrapper_call, cffi_call, ct_launch, parts
    )
    measured.notes.append(f"repeated-call key read by: {library.tensor_facts}")
    return measured


# --- reports ----------------------------------------------------------------------------


@dataclass
class RunOutcome:
    correctness: CorrectnessReport
    perf: PerfReport
    run: GpuRunReport

    @property
    def exit_code(self) -> int:
        if not self.correctness.ran_on_gpu:
            return EXIT_BLOCKED
        return (
            EXIT_ALL_PASS
            if self.correctness.verdict is CorrectnessVerdict.ALL_PASS
            else EXIT_FAILED
        )


def _meta(manifest: BundleManifest) -> dict[str, Any]:
    return {"run_id": manifest.run_id, "attempt": manifest.attempt}


def blocked_outcome(
    manifest: BundleManifest, environment: GpuEnvironment, started: float
) -> RunOutcome:
    why = "; ".join(environment.missing)
    statement = f"Nothing was run on a GPU: {why}."
    correctness = CorrectnessReport(
        **_meta(manifest),
        verdict=CorrectnessVerdict.BLOCKED,
        ran_on_gpu=False,
        summary=statement + " Correctness is unproven (class env).",
    )
    perf = PerfReport(
        **_meta(manifest),
        verdict=PerfVerdict.BLOCKED,
        summary=statement + " No timing was taken (class env).",
        **PerfReport.geomean_fields([]),
    )
    run = GpuRunReport(
        operator=manifest.operator,
        ran_on_gpu=False,
        statement=statement,
        environment=environment,
        correctness_verdict=correctness.verdict.value,
        perf_verdict=perf.verdict.value,
        geomean_line=perf.geomean_line,
        elapsed_s=time.monotonic() - started,
    )
    return RunOutcome(correctness, perf, run)


PERF_PENDING_NOTE = (
    "device time: not measured (the run ended while timing it: its time limit, or a crash); "
    "correctness above is complete"
)
HOST_PENDING_NOTE = (
    "host cost per call: not measured (the run ended while measuring it; a CUDA graph "
    "capture that breaks the context ends the process)"
)


def gpu_outcome(
    ctx: GpuContext,
    perf_anyway: bool,
    started: float,
    checkpoint: Callable[[RunOutcome], None] = lambda _: None,
) -> RunOutcome:
    """Correctness, then device time, then host cost per call. The reports are handed
    to `checkpoint` before each later phase: a run stopped at its time limit while
    timing keeps its correctness, and capturing a launch into a CUDA graph can break
    the CUDA context past recovery (the process aborts), and what the device-time
    phases found must survive that."""
    phases = PhaseClock(ctx.operator)
    results = phases.time("correctness", lambda: run_correctness(ctx))
    cases = [r.case for r in results]
    failed = sorted({c.config_id for c in cases if not c.passed})
    all_pass = bool(cases) and not failed
    gpu = ctx.environment.gpu or "unknown GPU"
    correctness = CorrectnessReport(
        **_meta(ctx.bundle.manifest),
        verdict=CorrectnessVerdict.ALL_PASS if all_pass else CorrectnessVerdict.FAIL,
        ran_on_gpu=True,
        gpu=gpu,
        cases=cases,
        summary=f"{len(cases)} cases on {gpu}"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
    )
    supported = [ctx.spec.resolve(c, p) for c, p in ctx.spec.all_configs() if c.name not in failed]
    probes: list[AbiProbe] = []
    if supported:
        probes = _guarded(ctx, "the ABI probes", lambda: abi_probes(ctx, supported[0]), [])
    timed = [r for r in timed_configs(ctx.spec, ctx.bundle.manifest) if r.name not in failed]

    def run_report(measured: PerfOutcome, perf: PerfReport, notes: list[str]) -> GpuRunReport:
        return GpuRunReport(
            operator=ctx.operator,
            ran_on_gpu=True,
            statement=(
                f"Ran on {gpu}: {len(cases)} correctness cases, "
                f"{len(measured.details)} timed configurations."
            ),
            environment=ctx.environment,
            correctness_verdict=correctness.verdict.value,
            perf_verdict=perf.verdict.value,
            cases=[r.detail for r in results],
            perf=measured.details,
            host_overhead=measured.overhead,
            abi_probes=probes,
            notes=notes,
            geomean_line=geomean_line(geomean_ratio(measured.rows), len(measured.rows)),
            elapsed_s=time.monotonic() - started,
            phase_s=dict(phases.seconds),
        )

    measured = PerfOutcome()
    if all_pass or perf_anyway:
        # Correctness survives a run stopped while timing (a time limit, a crash).
        untimed = _perf_report(ctx, measured, all_pass)
        notes = [*ctx.notes, PERF_PENDING_NOTE]
        checkpoint(RunOutcome(correctness, untimed, run_report(measured, untimed, notes)))

        def timed_perf() -> PerfOutcome:
            return _guarded(ctx, "the perf run", lambda: run_perf(ctx, timed), PerfOutcome())

        measured = phases.time("perf", timed_perf)
    perf = _perf_report(ctx, measured, all_pass)

    if measured.details:
        notes = [*ctx.notes, HOST_PENDING_NOTE]
        checkpoint(RunOutcome(correctness, perf, run_report(measured, perf, notes)))
        first = next(r for r in timed if r.name == measured.details[0].config_id)
        none: list[HostOverhead] = []
        found = phases.time(
            "host",
            lambda: _guarded(
                ctx, "the host cost per call", lambda: [_host_overhead(ctx, first)], none
            ),
        )
        measured.overhead.extend(found)
    return RunOutcome(correctness, perf, run_report(measured, perf, ctx.notes))


class PhaseClock:
    """Wall seconds per phase of a run, each printed as it ends (a long run shows
    its progress, and the reports say where the GPU time went)."""

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self.seconds: dict[str, float] = {}

    def time(self, phase: str, run: Callable[[], T]) -> T:
        started = time.monotonic()
        try:
            return run()
        finally:
            self.seconds[phase] = round(time.monotonic() - started, 2)
            print(f"{self.operator}: {phase} took {self.seconds[phase]:.1f} s", flush=True)


def _guarded(ctx: GpuContext, what: str, run: Callable[[], T], fallback: T) -> T:
    """Runs one phase; a failure is noted in the reports instead of ending the run,
    so the phases before it still reach the reports."""
    try:
        return run()
    except Exception as exc:  # noted, see above
        ctx.notes.append(f"{what} failed: {type(exc).__name__}: {exc}")
        return fallback


def _perf_report(ctx: GpuContext, measured: PerfOutcome, all_pass: bool) -> PerfReport:
    manifest = ctx.bundle.manifest
    if not all_pass or not measured.rows:
        why = (
            "correctness did not pass (only ALL_PASS unlocks benchmarking)"
            if not all_pass
            else "no configuration was timed"
        )
        return PerfReport(
            **_meta(manifest),
            verdict=PerfVerdict.BLOCKED,
            summary=f"Perf not judged: {why}; diagnostic timings, if any, are in gpu_run.json.",
            **PerfReport.geomean_fields([]),
        )
    env = ctx.environment
    clocks = ", ".join(f"{k} {v}" for k, v in env.clocks.items()) or "not reported"
    toolchain = {**env.versions, **manifest.built_on}
    return PerfReport(
        **_meta(manifest),
        verdict=PerfReport.verdict_for(measured.rows),
        summary=_perf_summary(measured),
        l2_flush_bytes=measured.flush_bytes,
        warmup_iterations=manifest.perf_warmup,
        interleaved=True,
        rows=measured.rows,
        geomean_interval=measured.geomean_interval,
        environment=MeasurementEnvironment(
            gpu=env.gpu or "unknown",
            driver=env.driver or "unknown",
            clocks=clocks,
            toolchain=toolchain,
        ),
        notes=ctx.notes,
        **PerfReport.geomean_fields(measured.rows),
    )


def _perf_summary(measured: PerfOutcome) -> str:
    """The geomean's interval, and the configurations that go to stage F."""
    parts = []
    if measured.geomean_interval is not None:
        low, high = measured.geomean_interval
        parts.append(f"geomean 95 % interval {low:.4f} to {high:.4f}")
    outside = [row.config_id for row in measured.rows if row.outside_aa_band]
    if outside:
        parts.append(f"outside their A/A band, for stage F: {', '.join(outside)}")
    return "; ".join(parts)


def write_outcome(outcome: RunOutcome, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "correctness.json": outcome.correctness.model_dump_json(indent=2),
        "perf.json": outcome.perf.model_dump_json(indent=2),
        GpuRunReport.FILE_NAME: outcome.run.model_dump_json(indent=2),
        "summary.md": summary_markdown(outcome),
    }
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text + "\n", encoding="utf-8")
        written.append(path)
    return written


def summary_markdown(outcome: RunOutcome) -> str:
    run = outcome.run
    correctness = outcome.correctness
    lines = [
        f"# GPU run of `{run.operator}`",
        "",
        run.statement,
        "",
        f"- correctness: **{correctness.verdict.value}**: "
        f"{correctness.summary or 'all cases passed'}",
        f"- perf: **{outcome.perf.verdict.value}**: {outcome.perf.summary or run.geomean_line}",
        f"- {run.geomean_line}",
    ]
    env = run.environment
    if env.gpu:
        lines.append(
            f"- GPU: {env.gpu} (cc {env.compute_capability}), driver {env.driver}, "
            f"clocks {env.clocks}"
        )
    lines += _case_table(correctness) + _perf_table(run) + _overhead_lines(run)
    return "\n".join(lines)


def _case_table(correctness: CorrectnessReport) -> list[str]:
    if not correctness.cases:
        return []
    lines = [
        "",
        "| config | dtype | seed | passed | max abs | max rel | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in correctness.cases:
        errors = f"{_number(case.max_abs_error)} | {_number(case.max_rel_error)}"
        lines.append(
            f"| {case.config_id} | {case.dtype} | {case.seed} | {case.passed} | {errors} | "
            f"{case.message[:120]} |"
        )
    return lines


def _perf_table(run: GpuRunReport) -> list[str]:
    if not run.perf:
        return []
    lines = [
        "",
        "| config | port µs | cuTile Python µs | torch µs | port/ref (95 %) | control/ref "
        "(A/A band) | modules per side: reference's code, port's code (module medians "
        "/ ref) | rounds | launches port/ref |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in run.perf:
        eager = f"{row.torch.median_us:.2f}" if row.torch else "-"
        control = f"{row.control_ratio:.4f}" if row.control_ratio is not None else "-"
        control += band_text(row.aa_band)
        ranges = ", ".join(
            "-" if found is None else f"{found[0]:.4f} to {found[1]:.4f}"
            for found in (row.reference_code_range, row.port_code_range)
        )
        modules = f"{row.placements}: {ranges}"
        ratio = f"{row.ratio:.4f}{band_text(row.ratio_interval)}"
        ratio += " **outside the A/A band: stage F**" if row.outside_aa_band else ""
        rounds = "-" if row.rounds is None else str(row.rounds)
        rounds += " (cap)" if row.cap_hit else ""
        launches = f"{row.port.launches_per_call:g}/{row.reference.launches_per_call:g}"
        lines.append(
            f"| {row.config_id} | {row.port.median_us:.2f} | {row.reference.median_us:.2f} | "
            f"{eager} | {ratio} | {control} | {modules} | {rounds} | {launches} |"
        )
    return lines


def _overhead_lines(run: GpuRunReport) -> list[str]:
    lines: list[str] = []
    for item in run.host_overhead:
        lines += [
            "",
            f"Host wall-clock per call ({item.config_id}, {item.calls} calls): "
            f"wrapper {_number(item.port_wrapper_us)} µs, "
            f"bare cffi {_number(item.port_cffi_us)} µs, "
            f"ct.launch {_number(item.reference_launch_us)} µs; the wrapper's parts: "
            f"key {_number(item.port_key_us)} µs, C call {_number(item.port_c_call_us)} µs; "
            "graph replay: "
            f"port {_number(item.port_graph_replay_us)} µs, "
            f"reference {_number(item.reference_graph_replay_us)} µs.",
        ]
        lines += [f"- {note}" for note in item.notes]
    return lines


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def run_bundle(
    root: Path,
    out: Path,
    perf_anyway: bool = False,
    keep_cubins: bool = False,
    flush_method: str = "kernel",
    placements: int = DEFAULT_PLACEMENTS,
) -> RunOutcome:
    started = time.monotonic()
    bundle = load_bundle(root)
    if keep_cubins:  # before either JIT compiles
        keep_compiles(out)
    environment, context = probe_environment(bundle)
    if context is not None:
        context.flush_method = flush_method
        context.placements = placements
    if context is not None and not keep_cubins:  # kept cubins need tileiras to run
        _guarded(context, "the disk cache of compiled kernels", partial(_cache, context), None)
    digest = hashlib.sha256((root / MANIFEST_FILE).read_bytes()).hexdigest()

    def write(outcome: RunOutcome) -> None:
        outcome.run = outcome.run.model_copy(update={"bundle_sha256": digest})
        write_outcome(outcome, out)

    if context is None:
        outcome = blocked_outcome(bundle.manifest, environment, started)
    else:
        outcome = gpu_outcome(context, perf_anyway, started, write)
    write(outcome)
    return outcome


def _cache(ctx: GpuContext) -> None:
    ctx.library.enable_disk_cache()
    ctx.disk_cache = True


def warm_both_jits(root: Path) -> int:
    """Launches the cuTile Python kernel and the port once per configuration and writes
    nothing: each JIT compiles every specialisation into its disk cache (cuTile
    Python's own; cutile's per-user cache, `enable_disk_cache`), so that a later run
    of the bundle on this host times without compiling. Several bundles can warm at
    once (the compiles run on the CPU); they must not while one is timed."""
    bundle = load_bundle(root)
    environment, ctx = probe_environment(bundle)
    if ctx is None:
        print(f"gpu-run: no usable GPU to warm on ({', '.join(environment.missing)})")
        return EXIT_BLOCKED
    ctx.library.enable_disk_cache()
    failures = 0
    for config, purpose in ctx.spec.all_configs():
        resolved = ctx.spec.resolve(config, purpose)
        started = time.monotonic()
        arrays = case_arrays(ctx, resolved, bundle.manifest.seeds[0])
        launches: dict[str, Callable[[], None]] = {
            "reference": partial(launch_reference_kernel, ctx, resolved, arrays),
            "port": partial(launch_port, ctx, arrays, resolved),
        }
        for side, launch in launches.items():
            try:
                launch()
                ctx.torch.cuda.synchronize()
            except Exception as exc:  # the timed run meets it again and reports it
                failures += 1
                print(f"{resolved.name} ({side}): {type(exc).__name__}: {exc}")
        print(f"{resolved.name}: {time.monotonic() - started:.1f} s")
    return EXIT_FAILED if failures else EXIT_ALL_PASS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, help="the bundle directory")
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="only launch the cuTile Python kernel and the port once per configuration, "
        "filling both JITs' disk caches for a later run on this host; writes no reports",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where reports go (default BUNDLE/results)"
    )
    parser.add_argument(
        "--perf-anyway",
        action="store_true",
        help="time the configurations that passed even if others failed (diagnosis only: "
        "the perf verdict stays BLOCKED)",
    )
    parser.add_argument(
        "--keep-cubins",
        action="store_true",
        help="keep the cubins both JITs compile under OUT/cubins (cuTile Python's cache; "
        "what tileiras wrote for cutile-rs), for `tileport investigate`; the reference "
        "compiles again instead of using the host's warm cache",
    )
    parser.add_argument(
        "--l2-flush",
        choices=L2_FLUSH_METHODS,
        default="kernel",
        help="how the L2 is flushed before each timed call: the fill kernel (default, "
        "the protocol's) or a device-to-device copy (copy engines, no SM code between "
        "the calls: a diagnostic of what the fill kernel's own code does)",
    )
    parser.add_argument(
        "--placements",
        type=_placements,
        default=DEFAULT_PLACEMENTS,
        metavar="N",
        help="the modules each timed side rotates through, round by round: its code "
        f"loaded N times, the control's apart from the reference's (default "
        f"{DEFAULT_PLACEMENTS}; 1: one module per side, where a configuration's ratio also "
        "measures where two modules landed)",
    )
    parser.add_argument(
        "--upload",
        metavar="URL",
        help="send the results to the service that holds the run "
        "(its /v1/conversions/ID/gpu-results URL)",
    )
    parser.add_argument(
        "--token", default=None, help=f"the service's API token (default: ${TOKEN_ENV})"
    )


def _placements(text: str) -> int:
    count = int(text)
    if not 1 <= count <= MAX_PLACEMENTS:
        raise argparse.ArgumentTypeError(f"{count}: between 1 and {MAX_PLACEMENTS} modules")
    return count


def run_from_args(args: argparse.Namespace) -> int:
    out = args.out or args.bundle / "results"
    try:
        if args.warm_only:
            return warm_both_jits(args.bundle)
        outcome = run_bundle(
            args.bundle, out, args.perf_anyway, args.keep_cubins, args.l2_flush, args.placements
        )
    except BundleError as exc:
        print(f"gpu-run: bad bundle: {exc}", file=sys.stderr)
        return EXIT_BAD_BUNDLE
    print(summary_markdown(outcome))
    print(f"\nreports written to {out}")
    if args.upload:
        token = args.token or os.environ.get(TOKEN_ENV, "")
        try:
            answer = upload_results(out, args.upload, token)
        except UploadError as exc:
            print(f"gpu-run: upload failed: {exc}", file=sys.stderr)
            return EXIT_UPLOAD_FAILED
        print(f"uploaded to {args.upload}: {answer}")
    return outcome.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-run", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
