"""Reference export: a cuTile Python kernel's Tile IR, bytecode and cubins, on a
machine with no GPU.

For each variant of a port spec, the facts a cuTile launch would derive from
the variant's representative test configuration (shape and stride
divisibility, unit strides, base-address alignment) are turned into a
`Specialisation`, and cuTile's ahead-of-time compiler exports it at bytecode
version 13.3. The kernel source is untrusted: it is imported and compiled in a
child process (`toolchain._export_child`) inside the sandbox
(`toolchain.sandbox`: the toolchain and the kernel's sources read-only, only a
private working directory writable, no network, an environment holding only
the toolchain's variables, limits on time, address space and processes). What
it leaves there is read back as plain files of that directory only.

    python -m toolchain.reference_export SPEC --out DIR [--target sm_90]
    python -m toolchain.reference_export --bench examples/kernels
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from schemas.port_spec import (
    ITEMSIZE,
    EntrySymbol,
    PortSpec,
    PortSpecError,
    ResolvedArray,
    ResolvedConfig,
    load_port_spec,
    spec_relative,
)
from schemas.reference_export import (
    ArrayArg,
    ArrayFacts,
    ArrayListArg,
    ConstantArg,
    ExportError,
    ExportRecord,
    ExportRequest,
    ExportResponse,
    ParamArg,
    ScalarArg,
    Specialisation,
)
from toolchain._export_child import RESPONSE_FILE
from toolchain.bytecode_dump import DumpError, import_dump
from toolchain.env import REPO_ROOT, find_toolchain, toolchain_env
from toolchain.sandbox import Limits, Sandbox, SandboxUnavailable, open_output

BYTECODE_VERSION = "13.3"  # what cutile-rs writes; both sides must agree
CUBIN_TARGETS = ("sm_90", "sm_100")
RECORD_FILE = "export.json"
STDOUT_LOG, STDERR_LOG = "stdout.log", "stderr.log"
MAX_RESPONSE_BYTES = 64 << 20

# What a cuTile launch records about an array argument (checked against real
# launches on an H200, tests/reference/data/launch_facts.json): each extent
# and each non-unit stride is either known divisible by 16 (elements for
# extents, bytes for strides) or nothing is known; the base address likewise
# by 16 bytes. A unit stride becomes a constant; a zero stride on a dimension
# longer than one means the array may alias itself. An extent of 1 becomes a
# shape constant, which a launch compiles under calling convention v2 (the
# other launches under v1): 480 of TileGym's 481 recorded launches reproduce
# their entry symbols so, the other did not compile.
ALIGNMENT = 16


class ReferenceExportError(Exception):
    """The export failed; `error` says why and where."""

    def __init__(self, error: ExportError) -> None:
        super().__init__(error.one_line())
        self.error = error


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 300.0
    address_space_bytes: int = 4 << 30
    processes: int = 256


# -- launch facts ------------------------------------------------------------------


def _stride_divisor(stride: int, itemsize: int) -> int:
    """16 bytes counted in elements when the stride (in bytes) is a multiple of 16."""
    if stride == 1 or (stride * itemsize) % ALIGNMENT:
        return 1
    return max(ALIGNMENT // itemsize, 1)


def launch_facts(array: ResolvedArray) -> ArrayFacts:
    """The facts a cuTile launch derives from an argument of this shape and layout."""
    itemsize = ITEMSIZE[array.dtype]
    base_aligned = (array.storage_offset * itemsize) % ALIGNMENT == 0
    return ArrayFacts(
        dtype=array.dtype,
        ndim=len(array.shape),
        index_dtype="int32",  # cuTile's default; only an ArrayAnnotation asks for int64
        shape_divisible_by=[ALIGNMENT if d % ALIGNMENT == 0 else 1 for d in array.shape],
        stride_divisible_by=[_stride_divisor(s, itemsize) for s in array.strides],
        stride_constant=[1 if s == 1 else None for s in array.strides],
        shape_constant=[1 if d == 1 else None for d in array.shape] if 1 in array.shape else None,
        stride_lower_bound_incl=0,
        base_addr_divisible_by=ALIGNMENT if base_aligned else 1,
        may_alias_internally=any(
            s == 0 and d > 1 for d, s in zip(array.shape, array.strides, strict=True)
        ),
        example_shape=list(array.shape),
        example_strides=list(array.strides),
    )


def specialise(resolved: ResolvedConfig) -> Specialisation:
    """The specialisation a launch with this configuration compiles."""
    params: dict[str, ParamArg] = {}
    for name, array in resolved.arrays.items():
        facts = launch_facts(array)
        params[name] = (
            ArrayArg(facts=facts)
            if array.list_length is None
            else ArrayListArg(element=facts, example_length=array.list_length)
        )
    for name in resolved.scalars:
        params[name] = ScalarArg(dtype=resolved.scalar_dtypes[name])
    for name, value in resolved.constants.items():
        params[name] = ConstantArg(value=value)
    return Specialisation(
        variant=resolved.variant,
        params=params,
        hints=resolved.hints,
        config=resolved.name,
        grid=resolved.grid,
    )


def mangled_symbol(kernel: str, parameters: Sequence[str], specialisation: Specialisation) -> str:
    """The entry symbol cuTile gives `kernel` compiled for `specialisation` (its
    parameters in `parameters` order), computed here without the kernel's source."""
    from cuda.tile.compilation import KernelSignature

    from toolchain._export_child import _constraint, calling_convention

    params = [_constraint(specialisation.params[name]) for name in parameters]
    signature = KernelSignature(params, calling_convention=calling_convention(specialisation))
    return str(signature.with_mangled_symbol(kernel).symbol)


def specialisations(spec: PortSpec, variants: Sequence[str] | None = None) -> list[Specialisation]:
    """One specialisation per variant, from its representative test configuration."""
    known = [v.name for v in spec.variants]
    unknown = sorted(set(variants or []) - set(known))
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; the spec has {known}")
    chosen = [v for v in spec.variants if variants is None or v.name in variants]
    return [specialise(spec.representative(v)) for v in chosen]


# -- the sandbox -------------------------------------------------------------------


@lru_cache(maxsize=1)
def tileiras_version() -> str:
    tool = find_toolchain().tool("tileiras")
    try:
        done = subprocess.run(
            [str(tool), "--version"], capture_output=True, text=True, env=toolchain_env()
        )
    except OSError:
        return "unknown"
    lines = [line for line in done.stdout.splitlines() if "release" in line]
    return lines[0].strip() if lines else "unknown"


def _sandbox_env(work: Path) -> dict[str, str]:
    base = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work),
        "TMPDIR": str(work / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "CUDA_TILE_TEMP_DIR": str(work / "tmp" / "cutile"),
        "CUDA_TILE_CACHE_DIR": "off",  # every export compiles; timings stay honest
    }
    return toolchain_env(base)


def _tail(work: Path, name: str, limit: int = 400) -> str:
    """The last line of a log the child wrote (nothing if it is no longer a plain file)."""
    try:
        with open_output(work, name) as log:
            log.seek(max(os.fstat(log.fileno()).st_size - 64 * 1024, 0))
            text = log.read().decode(errors="replace")
    except (OSError, ValueError):
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][-limit:] if lines else ""


def _died(returncode: int, work: Path) -> ExportError:
    last = _tail(work, STDERR_LOG)
    if "MemoryError" in last or "bad_alloc" in last or "out of memory" in last.lower():
        return ExportError(kind="memory_limit", message=f"the export ran out of memory: {last}")
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return ExportError(kind="crash", message=f"the export process died with {name}")
    detail = f": {last}" if last else ""
    return ExportError(kind="crash", message=f"the export process exited {returncode}{detail}")


def export_sandbox(request: ExportRequest, work: Path, limits: SandboxLimits) -> Sandbox:
    """What the export child sees: the packages it imports and the kernel's sources,
    read-only; `work` writable."""
    sources = {Path(request.source).parent}
    if request.source_root is not None:
        sources.add(Path(request.source_root))
    return Sandbox(
        scratch=work,
        env=_sandbox_env(work),
        read_only=[REPO_ROOT / "toolchain", REPO_ROOT / "schemas", *sorted(sources)],
        limits=Limits(address_space_bytes=limits.address_space_bytes, processes=limits.processes),
    )


def _run_child(request: ExportRequest, work: Path, limits: SandboxLimits) -> ExportResponse:
    (work / "tmp").mkdir()
    try:
        launch = export_sandbox(request, work, limits).launch(
            [sys.executable, "-s", "-m", "toolchain._export_child"]
        )
    except SandboxUnavailable as exc:
        return ExportResponse(error=ExportError(kind="sandbox_unavailable", message=str(exc)))
    with (work / STDOUT_LOG).open("wb") as out, (work / STDERR_LOG).open("wb") as err:
        child = subprocess.Popen(
            launch.argv,
            cwd=work,
            env=launch.env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            start_new_session=True,  # one process group: a timeout kills tileiras too
        )
        try:
            child.communicate(request.model_dump_json().encode(), timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            message = f"the export took longer than {limits.timeout_s:g} s and was stopped"
            return ExportResponse(error=ExportError(kind="timeout", message=message))
    try:
        with open_output(work, RESPONSE_FILE) as response:
            text = response.read(MAX_RESPONSE_BYTES + 1)
    except FileNotFoundError:
        return ExportResponse(error=_died(child.returncode, work))
    except (OSError, ValueError) as exc:
        message = f"the export process left no readable response: {exc}"
        return ExportResponse(error=ExportError(kind="crash", message=message))
    try:
        return ExportResponse.model_validate_json(text[:MAX_RESPONSE_BYTES])
    except ValidationError:
        message = "the export process wrote an invalid response"
        return ExportResponse(error=ExportError(kind="crash", message=message))


def _relocate(error: ExportError, resolved_source: Path, shown_source: str) -> ExportError:
    """Report the source file by the name the caller used."""
    if error.file is not None and Path(error.file) == resolved_source:
        return error.model_copy(update={"file": shown_source})
    return error


def export_reference(
    source: Path,
    kernel: str,
    specs: Sequence[Specialisation],
    out_dir: Path,
    *,
    target: str = "sm_90",
    cubin_targets: Sequence[str] = CUBIN_TARGETS,
    entry_symbol: EntrySymbol | None = None,
    bytecode_version: str = BYTECODE_VERSION,
    limits: SandboxLimits | None = None,
    source_root: Path | None = None,
    module: str | None = None,
) -> ExportRecord:
    """Export each specialisation of `kernel` in `source` into `out_dir`.

    With `source_root` and `module` the kernel is sliced out of that module of an
    unmodified library (`toolchain.kernel_slice`); else `source` is a module of its
    own folder. Writes `<variant>.bytecode`, `<variant>.mlir`, `<variant>.loc.mlir`,
    `<variant>.<target>.cubin` per cubin target, and `export.json`. Raises
    ReferenceExportError with a structured error on any failure."""
    resolved_source = source.resolve()
    if not resolved_source.is_file():
        raise ReferenceExportError(
            ExportError(kind="import_error", message="no such file", file=str(source))
        )
    request = ExportRequest(
        source=str(resolved_source),
        source_root=str(source_root.resolve()) if source_root is not None else None,
        module=module,
        kernel=kernel,
        specialisations=list(specs),
        target=target,
        cubin_targets=list(cubin_targets),
        bytecode_version=bytecode_version,
        entry_symbol=entry_symbol or EntrySymbol(),
        tileirdisasm=str(find_toolchain().tool("tileirdisasm")),
    )
    limits = limits or SandboxLimits()
    work = Path(tempfile.mkdtemp(prefix="tileport-export-"))
    try:
        start = time.perf_counter()
        response = _run_child(request, work, limits)
        process_s = time.perf_counter() - start
        if response.error is not None or response.record is None:
            error = response.error or ExportError(kind="crash", message="empty response")
            raise ReferenceExportError(_relocate(error, resolved_source, str(source)))
        record = response.record.model_copy(
            update={
                "source": str(source),
                "tileiras_version": tileiras_version(),
                "process_s": process_s,
            }
        )
        _collect(record, work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return record


def _collect(record: ExportRecord, work: Path, out_dir: Path) -> None:
    """Copy the files the record names: plain files of `work`, never what a link
    or a name with a directory in it would reach."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for variant in record.variants:
        for name in [variant.bytecode, variant.mlir, variant.loc_mlir, *variant.cubins.values()]:
            try:
                with open_output(work, name) as source, (out_dir / name).open("wb") as target:
                    shutil.copyfileobj(source, target)
            except (OSError, ValueError) as exc:
                message = f"the export process did not leave {name!r} as a plain file: {exc}"
                raise ReferenceExportError(ExportError(kind="crash", message=message)) from None
    (out_dir / RECORD_FILE).write_text(record.model_dump_json(indent=2) + "\n")


def export_from_spec(
    spec_path: Path,
    out_dir: Path,
    *,
    source: Path | None = None,
    kernel: str | None = None,
    target: str = "sm_90",
    variants: Sequence[str] | None = None,
    cubin_targets: Sequence[str] = CUBIN_TARGETS,
    limits: SandboxLimits | None = None,
) -> ExportRecord:
    """Export every variant (or the named ones) of a port spec.

    `source` and `kernel` default to the spec's; giving them exports another
    file (a mutated copy, say) under the same spec. This is what
    `tileport ir export SOURCE::KERNEL --spec SPEC --target T --out DIR` runs.
    Variants that name a bytecode dump are taken from it, unless `source` is given."""
    try:
        spec = load_port_spec(spec_path)
        specs = specialisations(spec, variants)
    except PortSpecError as exc:
        message = "; ".join(f"{field}: {problem}" for field, problem in exc.problems)
        error = ExportError(kind="spec_error", message=message, file=str(spec_path))
        raise ReferenceExportError(error) from None
    except ValueError as exc:
        error = ExportError(kind="spec_error", message=str(exc), file=str(spec_path))
        raise ReferenceExportError(error) from None
    return export_with_dumps(
        source if source is not None else spec_relative(spec_path, spec.source),
        kernel or spec.kernel,
        specs,
        out_dir,
        dumps=variant_dumps(spec_path, spec) if source is None else {},
        target=target,
        cubin_targets=cubin_targets,
        entry_symbol=spec.entry_symbol,
        limits=limits,
        **library_module(spec_path, spec, source),
    )


def library_module(spec_path: Path, spec: PortSpec, source: Path | None = None) -> dict[str, Any]:
    """`source_root` and `module` arguments of `export_reference` for a spec's kernel:
    none when the spec names a plain file, or when another file is exported under it."""
    if source is not None or spec.module is None or spec.source_root is None:
        return {}
    return {"source_root": spec_relative(spec_path, spec.source_root), "module": spec.module}


def variant_dumps(spec_path: Path, spec: PortSpec) -> dict[str, Path]:
    """The Tile IR bytecode dumps the spec's variants name (`reference_bytecode`),
    below the spec's folder, by variant name (not resolved: a link stays a link, which
    `bytecode_dump` refuses)."""
    return {
        variant.name: spec_path.parent / variant.reference_bytecode
        for variant in spec.variants
        if variant.reference_bytecode is not None
    }


def export_with_dumps(
    source: Path,
    kernel: str,
    specs: Sequence[Specialisation],
    out_dir: Path,
    *,
    dumps: Mapping[str, Path],
    target: str = "sm_90",
    cubin_targets: Sequence[str] = CUBIN_TARGETS,
    entry_symbol: EntrySymbol | None = None,
    **options: Any,
) -> ExportRecord:
    """`export_reference`, except that each specialisation whose variant is a key of
    `dumps` is taken from that bytecode dump (`toolchain.bytecode_dump`) instead of
    compiled; one export.json describes all of them, in the order of `specs`. The
    source is needed only when something is compiled."""
    compiled = [s for s in specs if s.variant not in dumps]
    started = time.perf_counter()
    record = None
    if compiled:
        record = export_reference(
            source,
            kernel,
            compiled,
            out_dir,
            target=target,
            cubin_targets=cubin_targets,
            entry_symbol=entry_symbol,
            **options,
        )
        if len(compiled) == len(specs):
            return record
    variants = {v.variant: v for v in record.variants} if record is not None else {}
    for specialisation in specs:
        if specialisation.variant not in dumps:
            continue
        try:
            variants[specialisation.variant] = import_dump(
                dumps[specialisation.variant],
                specialisation,
                out_dir,
                cubin_targets=cubin_targets,
                entry_symbol=entry_symbol or EntrySymbol(),
            )
        except DumpError as exc:
            raise ReferenceExportError(exc.error) from None
    base = record or ExportRecord(
        kernel=kernel,
        source=str(source),
        target=target,
        bytecode_version=BYTECODE_VERSION,
        cuda_tile_version="unknown (bytecode dump)",
        tileiras_version=tileiras_version(),
        import_s=0.0,
        process_s=time.perf_counter() - started,
        variants=[],
    )
    merged = base.model_copy(update={"variants": [variants[s.variant] for s in specs]})
    (out_dir / RECORD_FILE).write_text(merged.model_dump_json(indent=2) + "\n")
    return merged


# -- command line ------------------------------------------------------------------


@dataclass(frozen=True)
class BenchRow:
    kernel: str
    variants: int
    wall_s: float
    process_s: float
    import_s: float
    bytecode_s: float
    mlir_s: float
    cubin_s: dict[str, float]


def bench_spec(spec_path: Path, repeat: int) -> BenchRow:
    """Median timings over `repeat` exports of every variant (summed over variants)."""
    rows: list[BenchRow] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="tileport-bench-") as out:
            start = time.perf_counter()
            record = export_from_spec(spec_path, Path(out))
            wall = time.perf_counter() - start
        rows.append(
            BenchRow(
                kernel=spec_path.name.removesuffix(".port.yaml"),
                variants=len(record.variants),
                wall_s=wall,
                process_s=record.process_s,
                import_s=record.import_s,
                bytecode_s=sum(v.timings.bytecode_s for v in record.variants),
                mlir_s=sum(v.timings.mlir_s for v in record.variants),
                cubin_s={
                    t: sum(v.timings.cubin_s[t] for v in record.variants) for t in CUBIN_TARGETS
                },
            )
        )
    return BenchRow(
        kernel=rows[0].kernel,
        variants=rows[0].variants,
        wall_s=statistics.median(r.wall_s for r in rows),
        process_s=statistics.median(r.process_s for r in rows),
        import_s=statistics.median(r.import_s for r in rows),
        bytecode_s=statistics.median(r.bytecode_s for r in rows),
        mlir_s=statistics.median(r.mlir_s for r in rows),
        cubin_s={t: statistics.median(r.cubin_s[t] for r in rows) for t in CUBIN_TARGETS},
    )


def bench_table(rows: Sequence[BenchRow]) -> str:
    header = (
        "| kernel | variants | import | bytecode | mlir | cubin sm_90 | cubin sm_100 "
        "| process | wall |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [header]
    for r in [*rows, _total(rows)]:
        lines.append(
            f"| {r.kernel} | {r.variants} | {r.import_s:.2f} | {r.bytecode_s:.2f} "
            f"| {r.mlir_s:.2f} | {r.cubin_s['sm_90']:.2f} | {r.cubin_s['sm_100']:.2f} "
            f"| {r.process_s:.2f} | {r.wall_s:.2f} |"
        )
    return "\n".join(lines)


def _total(rows: Sequence[BenchRow]) -> BenchRow:
    return BenchRow(
        kernel="**all**",
        variants=sum(r.variants for r in rows),
        wall_s=sum(r.wall_s for r in rows),
        process_s=sum(r.process_s for r in rows),
        import_s=sum(r.import_s for r in rows),
        bytecode_s=sum(r.bytecode_s for r in rows),
        mlir_s=sum(r.mlir_s for r in rows),
        cubin_s={t: sum(r.cubin_s[t] for r in rows) for t in CUBIN_TARGETS},
    )


def _bench(directory: Path, repeat: int) -> int:
    specs = sorted(directory.glob("*.port.yaml"))
    if not specs:
        print(f"no *.port.yaml in {directory}", file=sys.stderr)
        return 1
    rows = []
    for spec in specs:
        try:
            rows.append(bench_spec(spec, repeat))
        except ReferenceExportError as exc:
            print(f"{spec}: {exc.error.one_line()}", file=sys.stderr)
            return 1
    print(
        f"Reference export times in seconds, median of {repeat} run(s) per kernel, summed "
        "over each kernel's variants. process: the sandboxed export process from start to "
        "end; wall: the whole call.\n"
    )
    print(bench_table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolchain.reference_export",
        description="Export a cuTile Python kernel's reference Tile IR per variant of its "
        "port spec (no GPU needed), or time the export over a directory of specs.",
    )
    parser.add_argument("spec", nargs="?", type=Path, help="a <name>.port.yaml")
    parser.add_argument("--out", type=Path, help="output directory")
    parser.add_argument("--target", default="sm_90", help="GPU the bytecode is made for")
    parser.add_argument("--variant", action="append", help="export only this variant")
    parser.add_argument("--bench", type=Path, metavar="DIR", help="time every spec in DIR")
    parser.add_argument("--repeat", type=int, default=3, help="runs per kernel for --bench")
    args = parser.parse_args(argv)
    if args.bench is not None:
        return _bench(args.bench, args.repeat)
    if args.spec is None or args.out is None:
        parser.error("give SPEC and --out DIR, or --bench DIR")
    try:
        record = export_from_spec(args.spec, args.out, target=args.target, variants=args.variant)
    except ReferenceExportError as exc:
        print(exc.error.one_line(), file=sys.stderr)
        if exc.error.source_line:
            print(f"    {exc.error.source_line}", file=sys.stderr)
        return 1
    for variant in record.variants:
        print(f"{variant.variant}: {variant.symbol}")
    print(f"wrote {len(record.variants)} variant(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
