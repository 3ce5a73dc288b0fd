"""The sandboxed side of the reference export: imports an untrusted kernel source
and exports it with cuTile's AOT compiler.

Run only by `toolchain.reference_export`, as `python -m toolchain._export_child`
in the sandbox (`toolchain.sandbox`, which sets its resource limits), in a
private working directory, with the request on stdin. It writes `response.json` (an
`ExportResponse`) and the artefacts into that directory. Every failure of the
user's code is turned into an `ExportError` with file and line; nothing here
prints a traceback.
"""

from __future__ import annotations

import inspect
import linecache
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.port_spec import EntrySymbol
from schemas.reference_export import (
    ArrayArg,
    ArrayFacts,
    ArrayListArg,
    ConstantArg,
    ErrorKind,
    ExportError,
    ExportRecord,
    ExportRequest,
    ExportResponse,
    ScalarArg,
    Specialisation,
    VariantExport,
    VariantTimings,
)
from toolchain.kernel_slice import SliceError, load_kernel
from toolchain.source_tree import SourceTreeError

RESPONSE_FILE = "response.json"


class ChildFailure(Exception):
    """Carries a structured error out of the export steps."""

    def __init__(self, error: ExportError) -> None:
        super().__init__(error.message)
        self.error = error


def _source_line(file: str | None, line: int | None) -> str | None:
    if file is None or line is None:
        return None
    text = linecache.getline(file, line).strip()
    return text or None


def _error(
    kind: ErrorKind,
    message: str,
    file: str | None = None,
    line: int | None = None,
    column: int | None = None,
    variant: str | None = None,
) -> ExportError:
    return ExportError(
        kind=kind,
        message=message,
        file=file,
        line=line,
        column=column,
        variant=variant,
        source_line=_source_line(file, line),
    )


def _user_frame(exc: BaseException, source: str) -> tuple[str | None, int | None]:
    """The innermost traceback frame inside the user's source, else the innermost at all."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if frame.filename == source:
            return frame.filename, frame.lineno
    return (None, None) if not frames else (frames[-1].filename, frames[-1].lineno)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _source_error(exc: SourceTreeError | SliceError, kind: ErrorKind) -> ChildFailure:
    file = str(exc.file) if exc.file is not None else None
    return ChildFailure(_error(kind, exc.message, file, exc.line))


def load_user_kernel(request: ExportRequest) -> Any:
    """The kernel object, sliced out of its unmodified module (`toolchain.kernel_slice`)."""
    import cuda.tile as ct

    source = Path(request.source)
    root = Path(request.source_root) if request.source_root else source.parent
    module = request.module or source.stem
    try:
        _, kernel = load_kernel(root, module, request.kernel)
    except SourceTreeError as exc:
        syntax = exc.message.startswith("syntax error")
        kind: ErrorKind = "syntax_error" if syntax else "kernel_not_found"
        if exc.file is None and not syntax:
            kind = "import_error"
        raise _source_error(exc, kind) from None
    except SliceError as exc:
        raise _source_error(exc, "import_error") from None
    except MemoryError as exc:
        file, line = _user_frame(exc, request.source)
        message = "out of memory while importing the module (address-space limit)"
        raise ChildFailure(_error("memory_limit", message, file, line)) from None
    if not isinstance(kernel, ct.kernel):
        message = f"{request.kernel!r} is a {type(kernel).__name__}, not a @ct.kernel function"
        raise ChildFailure(_error("kernel_not_found", message, request.source))
    return kernel


def _kernel_location(kernel: Any) -> tuple[str, int]:
    """The file and the `def` line of the kernel (its code starts at the decorator)."""
    code = kernel._pyfunc.__code__
    line = code.co_firstlineno
    while linecache.getline(code.co_filename, line).lstrip().startswith("@"):
        line += 1
    return code.co_filename, line


def _check_parameters(kernel: Any, spec: Specialisation) -> list[str]:
    names = list(inspect.signature(kernel._pyfunc).parameters)
    missing = [n for n in names if n not in spec.params]
    extra = [n for n in spec.params if n not in names]
    if missing or extra:
        file, line = _kernel_location(kernel)
        parts = []
        if missing:
            parts.append(f"kernel parameter(s) {missing} have no specialisation")
        if extra:
            parts.append(f"specialised parameter(s) {extra} are not kernel parameters")
        message = "; ".join(parts) + f" (kernel parameters: {names})"
        raise ChildFailure(_error("signature_mismatch", message, file, line, None, spec.variant))
    return names


def _ct_dtype(name: str) -> Any:
    import cuda.tile as ct

    return ct.bool_ if name == "bool" else getattr(ct, name)


def _array_constraint(facts: ArrayFacts) -> Any:
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(
        _ct_dtype(facts.dtype),
        facts.ndim,
        index_dtype=_ct_dtype(facts.index_dtype),
        stride_lower_bound_incl=facts.stride_lower_bound_incl,
        alias_groups=facts.alias_groups,
        may_alias_internally=facts.may_alias_internally,
        stride_constant=facts.stride_constant,
        stride_divisible_by=facts.stride_divisible_by,
        shape_constant=facts.shape_constant,
        shape_divisible_by=facts.shape_divisible_by,
        base_addr_divisible_by=facts.base_addr_divisible_by,
    )


def _constraint(arg: ArrayArg | ArrayListArg | ScalarArg | ConstantArg) -> Any:
    from cuda.tile.compilation import ListConstraint, ScalarConstraint

    match arg:
        case ArrayArg(facts=facts):
            return _array_constraint(facts)
        case ArrayListArg(element=element, elements_may_alias=may_alias):
            return ListConstraint(
                _array_constraint(element), alias_groups=[], elements_may_alias=may_alias
            )
        case ScalarArg(dtype=dtype):
            return ScalarConstraint(_ct_dtype(dtype))
        case ConstantArg(value=value):
            return value
    raise AssertionError(f"unhandled parameter kind {arg!r}")


def calling_convention(spec: Specialisation) -> Any:
    """v2 where some extent is a compile-time constant (v1 cannot state one), else v1."""
    from cuda.tile.compilation import CallingConvention

    def has_shape_constant(arg: object) -> bool:
        facts = arg.facts if isinstance(arg, ArrayArg) else getattr(arg, "element", None)
        return isinstance(facts, ArrayFacts) and any(
            c is not None for c in facts.shape_constant or []
        )

    if any(has_shape_constant(arg) for arg in spec.params.values()):
        return CallingConvention.cutile_python_v2()
    return CallingConvention.cutile_python_v1()


def _demangled(kernel: Any, spec: Specialisation) -> Any:
    from cuda.tile.compilation import demangle_kernel_name

    assert spec.demangle is not None
    try:
        _, signature = demangle_kernel_name(spec.demangle)
    except (TypeError, ValueError) as exc:
        message = f"cannot demangle {spec.demangle!r}: {_describe(exc)}"
        raise ChildFailure(_error("spec_error", message, variant=spec.variant)) from None
    return signature.with_symbol(spec.demangle)


def kernel_signature(kernel: Any, spec: Specialisation, entry_symbol: EntrySymbol) -> Any:
    """The `KernelSignature` (symbol included) that compiles `kernel` for `spec`."""
    from cuda.tile.compilation import KernelSignature

    if spec.demangle is not None:
        return _demangled(kernel, spec)
    names = _check_parameters(kernel, spec)
    try:
        params = [_constraint(spec.params[n]) for n in names]
        signature = KernelSignature(params, calling_convention=calling_convention(spec))
    except (TypeError, ValueError) as exc:
        file, line = _kernel_location(kernel)
        message = f"the specialisation does not fit the kernel: {_describe(exc)}"
        raise ChildFailure(
            _error("signature_mismatch", message, file, line, None, spec.variant)
        ) from None
    if entry_symbol.naming == "fixed":
        return signature.with_symbol(entry_symbol.symbol)
    return signature.with_mangled_symbol(kernel._pyfunc.__name__)


def _compile_failure(exc: BaseException, source: str, variant: str) -> ChildFailure:
    import cuda.tile as ct

    if isinstance(exc, ct.TileCompilerTimeoutError):
        return ChildFailure(_error("timeout", "tileiras timed out", variant=variant))
    if isinstance(exc, ct.TileCompilerExecutionError):
        message = getattr(exc, "message", None) or _describe(exc)
        return ChildFailure(_error("toolchain_error", message, variant=variant))
    if isinstance(exc, ct.TileError):
        # The front end wraps unexpected errors (a failed broadcast, say) as internal
        # errors; located in the user's source, they are the user's compile errors.
        loc = exc.loc
        message = f"{type(exc).__name__}: {exc.message}"
        if loc.is_unknown():
            internal = isinstance(exc, ct.TileInternalError)
            kind: ErrorKind = "toolchain_error" if internal else "compile_error"
            return ChildFailure(_error(kind, message, variant=variant))
        return ChildFailure(
            _error("compile_error", message, loc.filename, loc.line, loc.col + 1, variant)
        )
    if isinstance(exc, MemoryError):
        file, line = _user_frame(exc, source)
        message = "out of memory while compiling (address-space limit)"
        return ChildFailure(_error("memory_limit", message, file, line, variant=variant))
    file, line = _user_frame(exc, source)
    return ChildFailure(_error("compile_error", _describe(exc), file, line, variant=variant))


def _timed(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def _disassemble(tileirdisasm: str, bytecode: Path, out: Path, with_locations: bool) -> None:
    args = [tileirdisasm, *(["-g"] if with_locations else []), str(bytecode)]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        message = f"tileirdisasm failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        raise ChildFailure(_error("toolchain_error", message))
    out.write_text(done.stdout, encoding="utf-8")


def export_variant(
    kernel: Any, request: ExportRequest, spec: Specialisation, work: Path
) -> VariantExport:
    from cuda.tile.compilation import export_kernel

    signature = kernel_signature(kernel, spec, request.entry_symbol)
    hinted = kernel.replace_hints(**spec.hints.as_kwargs()) if spec.hints else kernel
    names = {
        "bytecode": f"{spec.variant}.bytecode",
        "mlir": f"{spec.variant}.mlir",
        "loc_mlir": f"{spec.variant}.loc.mlir",
    }
    cubins = {t: f"{spec.variant}.{t}.cubin" for t in request.cubin_targets}

    def export(path: str, output_format: str, gpu_code: str) -> None:
        try:
            export_kernel(
                hinted,
                [signature],
                str(work / path),
                output_format=output_format,
                gpu_code=gpu_code,
                bytecode_version=request.bytecode_version,
            )
        except BaseException as exc:
            raise _compile_failure(exc, request.source, spec.variant) from None

    bytecode_s = _timed(lambda: export(names["bytecode"], "tileir_bytecode", request.target))
    bytecode = work / names["bytecode"]
    mlir_s = _timed(
        lambda: _disassemble(request.tileirdisasm, bytecode, work / names["mlir"], False)
    )
    _disassemble(request.tileirdisasm, bytecode, work / names["loc_mlir"], True)
    cubin_s: dict[str, float] = {}
    for target, cubin in cubins.items():
        start = time.perf_counter()
        export(cubin, "cubin", target)
        cubin_s[target] = time.perf_counter() - start
    return VariantExport(
        variant=spec.variant,
        symbol=signature.symbol,
        cubins=cubins,
        timings=VariantTimings(bytecode_s=bytecode_s, mlir_s=mlir_s, cubin_s=cubin_s),
        specialisation=spec,
        **names,
    )


def run(request: ExportRequest, work: Path) -> ExportRecord:
    start = time.perf_counter()
    import cuda.tile as ct  # timed with the kernel module: both are paid per export

    kernel = load_user_kernel(request)
    import_s = time.perf_counter() - start
    variants = [export_variant(kernel, request, s, work) for s in request.specialisations]
    return ExportRecord(
        kernel=request.kernel,
        source=request.source,
        target=request.target,
        bytecode_version=request.bytecode_version,
        cuda_tile_version=ct.__version__,
        tileiras_version="",
        import_s=import_s,
        variants=variants,
    )


def main() -> int:
    work = Path.cwd()
    request = ExportRequest.model_validate_json(sys.stdin.read())
    try:
        response = ExportResponse(record=run(request, work))
    except ChildFailure as failure:
        response = ExportResponse(error=failure.error)
    except MemoryError:
        message = "out of memory (address-space limit)"
        response = ExportResponse(error=_error("memory_limit", message))
    (work / RESPONSE_FILE).write_text(response.model_dump_json(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
