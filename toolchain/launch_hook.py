"""Records every `cuda.tile.launch` of the Python process it is loaded into.

`tileport capture` copies this file as `sitecustomize.py` into a folder it puts
first on the child's PYTHONPATH, so every Python process of the command loads it
at start-up (pytest-xdist workers and forks included). It needs the standard
library only, and does nothing unless `TILEPORT_CAPTURE_DIR` names a folder.

When `cuda.tile` is first imported, the hook replaces `launch` on both
`cuda.tile` and `cuda.tile._cext` (code that saved `ct.launch` afterwards, such
as TileGym's experimental wrapper, saves the recorder), and wraps
`kernel._compile` to learn the entry symbol each specialisation compiled to.
Each distinct launch goes as one JSON line to a file of its own process in that
folder; the parent merges them. A launch is described before it is forwarded
(integer tensors' value ranges, and the values of small integer and bool tensors,
are read then, on the launch's stream), then forwarded unchanged; the recorder's
own failures never reach the caller and are reported on stderr once per process.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

DIR_VARIABLE = "TILEPORT_CAPTURE_DIR"
# The capture's --source-root (resolved), when it was given: files are recorded
# relative to it, or absolute outside it.
SOURCE_ROOT_VARIABLE = "TILEPORT_CAPTURE_SOURCE_ROOT"
TARGET_MODULE = "cuda.tile"
INTEGER_DTYPES = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
# An integer or bool tensor of at most this many elements has its values recorded
# (`values`): index arrays whose values mean something (a permutation, sorted unique
# ids, per-expert offsets) are small in a test, and a spec gives them back to the
# kernel as they were. A larger integer tensor keeps its range (`min`, `max`) only,
# and so does a uint64 one (its values travel as int64, which not all of them fit).
MAX_RECORDED_VALUES = 4096
VALUE_DTYPES = (INTEGER_DTYPES - {"uint64"}) | {"bool"}
_READ_DTYPES = INTEGER_DTYPES | VALUE_DTYPES  # a range, values or both are read
# cuTile Python's hint names and the Tile IR attribute each becomes.
HINT_IR_NAMES = {
    "num_ctas": "num_cta_in_cga",
    "occupancy": "occupancy",
    "num_worker_warps": "num_worker_warps_per_cta",
}
_PHASE_SUFFIX = re.compile(r" \((setup|call|teardown)\)$")
_TYPESTR_DTYPES = {
    "b1": "bool",
    "i1": "int8",
    "i2": "int16",
    "i4": "int32",
    "i8": "int64",
    "u1": "uint8",
    "u2": "uint16",
    "u4": "uint32",
    "u8": "uint64",
    "f2": "float16",
    "f4": "float32",
    "f8": "float64",
}


class _Recorder:
    """One process's sink: a file of its own, the launches it already wrote."""

    def __init__(self, folder: str, source_root: str | None) -> None:
        self.folder = folder
        self.source_root = source_root
        self.lock = threading.Lock()
        self.local = threading.local()
        self.seen: set[str] = set()
        self.launches = 0
        self.compiles = 0
        self.failures = 0
        self.pid = os.getpid()
        self.stream: Any = None
        self.symbols: dict[tuple[str, str], str] = {}  # (name, constraints) -> prediction
        self.learned: dict[str, str] = {}  # predicted symbol -> symbol cuTile compiled
        self.places: dict[Any, tuple[str, int]] = {}

    def after_fork(self) -> None:
        self.lock = threading.Lock()
        self.local = threading.local()
        self.pid = os.getpid()
        self.stream = None
        self.launches = 0
        self.compiles = 0

    def emit(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry) + "\n"
        with self.lock:
            if self.stream is None or self.pid != os.getpid():
                self.pid = os.getpid()
                name = f"{time.time_ns():020d}-{self.pid}.jsonl"
                self.stream = open(os.path.join(self.folder, name), "a", encoding="utf-8")  # noqa: SIM115
            self.stream.write(line)
            self.stream.flush()

    def problem(self, what: str, error: BaseException) -> None:
        self.failures += 1
        message = f"{what}: {type(error).__name__}: {error}"
        with contextlib.suppress(Exception):  # the recorder must never break the command
            self.emit({"problem": message})
        if self.failures == 1:
            print(
                f"tileport capture: {message} (later failures are counted, not shown)",
                file=sys.stderr,
            )

    def finish(self) -> None:
        if not self.launches and not self.failures:
            return
        with contextlib.suppress(Exception):
            stats = {"launches": self.launches, "compiles": self.compiles}
            self.emit({"stats": {**stats, "failures": self.failures}})


_recorder: _Recorder | None = None


# -- describing a launch ---------------------------------------------------------


def describe_launch(stream: Any, grid: Any, kernel: Any, args: Sequence[Any]) -> dict[str, Any]:
    """The record of one launch, its symbol still unset."""
    assert _recorder is not None
    function = getattr(kernel, "_pyfunc", kernel)
    params = list(inspect.signature(function).parameters)
    if len(params) != len(args):
        raise ValueError(f"{function.__name__} takes {len(params)} arguments, got {len(args)}")
    described = [_argument(value) for value in args]
    try:
        _read_ranges(stream, args, described)
    except Exception as error:
        _recorder.problem(f"could not read the integer ranges of {function.__name__}", error)
    file, line = _place(function)
    hints, by_target = _hints(kernel)
    dims = [int(d) for d in (grid if isinstance(grid, tuple | list) else (grid,))]
    return {
        "test": _test_id(),
        "kernel": function.__name__,
        "file": file,
        "line": line,
        "grid": dims + [1] * (3 - len(dims)),
        "params": params,
        "args": described,
        "symbol": None,
        "hints": hints,
        "hints_by_target": by_target,
    }


def _test_id() -> str | None:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return None if current is None else _PHASE_SUFFIX.sub("", current)


def _place(function: Any) -> tuple[str, int]:
    """The defining file (`recorded_file`) and the first line of the definition
    (its first decorator's, as Python counts)."""
    assert _recorder is not None
    code = function.__code__
    cached = _recorder.places.get(code)
    if cached is not None:
        return cached
    file = recorded_file(os.path.realpath(code.co_filename), _recorder.source_root)
    place = (file.replace(os.sep, "/"), int(code.co_firstlineno))
    _recorder.places[code] = place
    return place


def recorded_file(path: str, source_root: str | None) -> str:
    """A kernel's file as its record names it: relative to the capture's source root,
    absolute outside it; without a source root, relative to the nearest sys.path
    entry holding it (the script's own folder for a script run from a subfolder)."""
    if source_root is not None:
        inside = path.startswith(source_root.rstrip(os.sep) + os.sep)
        return os.path.relpath(path, source_root) if inside else path
    best = ""
    for entry in sys.path:
        root = os.path.realpath(str(entry) or os.getcwd())
        if path.startswith(root.rstrip(os.sep) + os.sep) and len(root) > len(best):
            best = root
    return os.path.relpath(path, best) if best else path


def _argument(value: Any) -> dict[str, Any]:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return {"kind": "bool", "value": bool(value)}
    if isinstance(value, int) or _is_numpy_scalar(value, "integer"):
        return {"kind": "int", "value": int(value)}
    if isinstance(value, float) or _is_numpy_scalar(value, "floating"):
        return {"kind": "float", "value": float(value)}
    if isinstance(value, list | tuple):
        kind = "list" if isinstance(value, list) else "tuple"
        return {"kind": kind, "items": [_argument(item) for item in value]}
    if hasattr(value, "data_ptr") and hasattr(value, "stride") and hasattr(value, "shape"):
        return _tensor(value)
    interface = getattr(value, "__cuda_array_interface__", None)
    if isinstance(interface, dict):
        return _interface_tensor(interface)
    return {"kind": "other", "type": _qualname(type(value)), "repr": repr(value)[:200]}


def _is_numpy_scalar(value: Any, family: str) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, getattr(numpy, family))


def _qualname(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _tensor(tensor: Any) -> dict[str, Any]:
    pointer = int(tensor.data_ptr())
    contiguous = getattr(tensor, "is_contiguous", None)
    return {
        "kind": "tensor",
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "shape": [int(d) for d in tensor.shape],
        "stride": [int(s) for s in tensor.stride()],
        "align16": pointer % 16 == 0,
        "contig": bool(contiguous()) if callable(contiguous) else False,
    }


def _interface_tensor(interface: dict[str, Any]) -> dict[str, Any]:
    typestr = str(interface["typestr"])
    dtype = _TYPESTR_DTYPES.get(typestr[1:], typestr)
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 1
    shape = [int(d) for d in interface["shape"]]
    packed = _row_major(shape)
    strides = interface.get("strides")
    stride = packed if strides is None else [int(s) // itemsize for s in strides]
    return {
        "kind": "tensor",
        "dtype": dtype,
        "shape": shape,
        "stride": stride,
        "align16": int(interface["data"][0]) % 16 == 0,
        "contig": stride == packed,
    }


def _row_major(shape: list[int]) -> list[int]:
    strides = [0] * len(shape)
    step = 1
    for dim in reversed(range(len(shape))):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return strides


# -- integer tensors' value ranges and small index arrays' values ------------------


def _read_ranges(stream: Any, args: Sequence[Any], described: list[dict[str, Any]]) -> None:
    """Set `min`/`max` on every non-empty integer tensor and `values` on every
    non-empty integer or bool tensor of at most MAX_RECORDED_VALUES elements (lists'
    items too)."""
    wanted: list[tuple[Any, dict[str, Any], bool, bool]] = []

    def collect(value: Any, entry: dict[str, Any]) -> None:
        if entry["kind"] in ("list", "tuple"):
            for item, sub in zip(value, entry["items"], strict=True):
                collect(item, sub)
        elif (
            entry["kind"] == "tensor"
            and entry["dtype"] in _READ_DTYPES
            and all(extent > 0 for extent in entry["shape"])
        ):
            ranged = entry["dtype"] in INTEGER_DTYPES
            valued = (
                entry["dtype"] in VALUE_DTYPES and math.prod(entry["shape"]) <= MAX_RECORDED_VALUES
            )
            if ranged or valued:
                wanted.append((value, entry, ranged, valued))

    for value, entry in zip(args, described, strict=True):
        collect(value, entry)
    if not wanted:
        return
    torch = sys.modules.get("torch")
    reads = [(value, ranged, valued) for value, _, ranged, valued in wanted]
    if torch is not None and all(isinstance(value, torch.Tensor) for value, _, _ in reads):
        found = _torch_reads(torch, stream, reads)
    else:
        found = [_duck_reads(*read) for read in reads]
    for (_, entry, _, _), (bounds, values) in zip(wanted, found, strict=True):
        if bounds is not None:
            entry["min"], entry["max"] = bounds
        if values is not None and len(values) == math.prod(entry["shape"]):
            boolean = entry["dtype"] == "bool"
            entry["values"] = [bool(v) if boolean else int(v) for v in values]


Read = tuple[tuple[int, int] | None, list[Any] | None]


def _torch_reads(torch: Any, stream: Any, reads: list[tuple[Any, bool, bool]]) -> list[Read]:
    """Per tensor its range (one reduction) and, where asked, its values, with one
    copy to the host for all, on the launch's stream; nothing while that stream is
    being captured into a CUDA graph."""
    if isinstance(stream, torch.cuda.Stream):
        context = torch.cuda.stream(stream)
    elif isinstance(stream, int) and stream:
        context = torch.cuda.stream(torch.cuda.ExternalStream(stream))
    else:
        context = torch.cuda.stream(torch.cuda.current_stream())
    with context:
        if torch.cuda.is_current_stream_capturing():
            return [(None, None)] * len(reads)
        parts = []
        for tensor, ranged, valued in reads:
            if ranged:
                parts.append(torch.stack(torch.aminmax(tensor)).to(torch.int64))
            if valued:
                parts.append(tensor.reshape(-1).to(torch.int64))
        flat = torch.cat(parts).tolist()
    found: list[Read] = []
    at = 0
    for tensor, ranged, valued in reads:
        bounds: tuple[int, int] | None = None
        values: list[Any] | None = None
        if ranged:
            bounds = (int(flat[at]), int(flat[at + 1]))
            at += 2
        if valued:
            count = int(tensor.numel())
            values = flat[at : at + count]
            at += count
        found.append((bounds, values))
    return found


def _duck_reads(value: Any, ranged: bool, valued: bool) -> Read:
    """The range and values of an array that is not a torch tensor, through its
    `min`/`max` and `tolist` methods where it has them (nested lists flattened)."""
    bounds: tuple[int, int] | None = None
    low, high = getattr(value, "min", None), getattr(value, "max", None)
    if ranged and callable(low) and callable(high):
        bounds = (int(low()), int(high()))
    to_list = getattr(value, "tolist", None)
    values = _flattened(to_list()) if valued and callable(to_list) else None
    return bounds, values


def _flattened(value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        return [value]
    return [item for part in value for item in _flattened(part)]


# -- hints and the entry symbol ---------------------------------------------------


def _hints(kernel: Any) -> tuple[str | None, dict[str, dict[str, int]] | None]:
    """The kernel's hints per target, as the Tile IR entry prints them
    (`<default = {occupancy = 2}>`) and as a dict of cuTile Python's names."""
    options = getattr(kernel, "_compiler_options", None)
    by_target = getattr(options, "hints_by_target", None)
    if not callable(by_target):
        return None, None
    structured: dict[str, dict[str, int]] = {}
    for target, fields in by_target().items():
        structured[str(target)] = {
            name: int(value)
            for name, value in fields.items()
            if name in HINT_IR_NAMES and value is not None
        }
    printed = ", ".join(
        f"{target} = {{"
        + ", ".join(
            f"{HINT_IR_NAMES[name]} = {value}"
            for name, value in sorted(fields.items(), key=lambda kv: HINT_IR_NAMES[kv[0]])
        )
        + "}"
        for target, fields in structured.items()
    )
    return f"<{printed}>", structured


def _predicted_symbol(kernel: Any, args: Sequence[Any]) -> str | None:
    """The symbol cuTile mangles for these arguments: calling convention v2 when
    a constraint needs it (a constant extent, a tuple), else v1."""
    assert _recorder is not None
    from cuda.tile._cext import get_parameter_constraints_from_pyargs
    from cuda.tile.compilation import CallingConvention, KernelSignature

    name = kernel._pyfunc.__name__
    v2 = CallingConvention.cutile_python_v2()
    constraints = tuple(get_parameter_constraints_from_pyargs(kernel, tuple(args), v2))
    key = (name, repr(constraints))  # constant constraints do not hash
    symbol = _recorder.symbols.get(key)
    if symbol is None:
        if not any(_needs_v2(c) for c in constraints):
            v1 = CallingConvention.cutile_python_v1()
            signature = KernelSignature(
                get_parameter_constraints_from_pyargs(kernel, tuple(args), v1), v1
            )
        else:
            signature = KernelSignature(constraints, v2)
        symbol = str(signature.with_mangled_symbol(name).symbol)
        _recorder.symbols[key] = symbol
    return symbol


def _needs_v2(constraint: Any) -> bool:
    kind = type(constraint).__name__
    if kind == "ArrayConstraint":
        return any(extent is not None for extent in constraint.shape_constant)
    if kind == "ListConstraint":
        return _needs_v2(constraint.element)
    return kind == "TupleConstraint"


# -- the wrappers -----------------------------------------------------------------


def _recording_launch(original: Callable[..., Any]) -> Callable[..., Any]:
    def launch(stream: Any, grid: Any, kernel: Any, kernel_args: Any, /, **options: Any) -> Any:
        recorder = _recorder
        if recorder is None:
            return original(stream, grid, kernel, kernel_args, **options)
        record: dict[str, Any] | None = None
        predicted: str | None = None
        try:
            if not isinstance(kernel_args, tuple | list):
                raise TypeError(f"kernel_args is a {type(kernel_args).__name__}")
            record = describe_launch(stream, grid, kernel, kernel_args)
            try:
                predicted = _predicted_symbol(kernel, kernel_args)
            except Exception as error:
                recorder.problem(f"could not derive the symbol of {record['kernel']}", error)
        except Exception as error:
            recorder.problem(f"could not describe a launch of {_kernel_name(kernel)}", error)
        frame: dict[str, str] = {}
        outer = getattr(recorder.local, "frame", None)
        recorder.local.frame = frame
        try:
            result = original(stream, grid, kernel, kernel_args, **options)
        finally:
            recorder.local.frame = outer
        if record is not None:
            try:
                _finish(recorder, record, predicted, frame.get("symbol"))
            except Exception as error:
                recorder.problem(f"could not write a launch of {record['kernel']}", error)
        return result

    launch.__wrapped__ = original  # type: ignore[attr-defined]
    launch.__name__ = getattr(original, "__name__", "launch")
    launch.__doc__ = getattr(original, "__doc__", None)
    return launch


def _finish(
    recorder: _Recorder, record: dict[str, Any], predicted: str | None, compiled: str | None
) -> None:
    if compiled is not None and predicted is not None and compiled != predicted:
        recorder.learned[predicted] = compiled
        recorder.emit({"symbol_mismatch": {"predicted": predicted, "compiled": compiled}})
    if compiled is not None:
        record["symbol"] = compiled
    elif predicted is not None:
        record["symbol"] = recorder.learned.get(predicted, predicted)
    recorder.launches += 1
    key = json.dumps({k: v for k, v in record.items() if k != "test"}, sort_keys=True)
    if key in recorder.seen:
        return
    recorder.seen.add(key)
    recorder.emit({"launch": record})


def _kernel_name(kernel: Any) -> str:
    return str(getattr(getattr(kernel, "_pyfunc", kernel), "__name__", type(kernel).__name__))


def _recording_compile(original: Callable[..., Any]) -> Callable[..., Any]:
    def _compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        recorder = _recorder
        if recorder is not None:
            recorder.compiles += 1
            frame = getattr(recorder.local, "frame", None)
            if frame is not None and isinstance(result, tuple) and len(result) > 1:
                symbol = result[1]
                if isinstance(symbol, str):
                    frame["symbol"] = symbol
        return result

    _compile.__wrapped__ = original  # type: ignore[attr-defined]
    return _compile


def install(module: ModuleType) -> None:
    """Wrap `launch` in `module` (cuda.tile) and its `_cext`, and `kernel._compile`."""
    current = getattr(module, "launch", None)
    if current is None or getattr(current, "__wrapped__", None) is not None:
        return
    wrapper = _recording_launch(current)
    module.launch = wrapper  # type: ignore[attr-defined]
    cext = sys.modules.get(f"{module.__name__}._cext")
    if cext is not None and getattr(cext, "launch", None) is current:
        cext.launch = wrapper  # type: ignore[attr-defined]
    execution = sys.modules.get(f"{module.__name__}._execution")
    kernel_type = getattr(execution, "kernel", None) if execution is not None else None
    compile_method = getattr(kernel_type, "_compile", None)
    if compile_method is not None and getattr(compile_method, "__wrapped__", None) is None:
        kernel_type._compile = _recording_compile(compile_method)  # type: ignore[union-attr]


# -- waiting for the import -------------------------------------------------------


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.inner.exec_module(module)
        except BaseException as error:
            if _recorder is not None:
                _recorder.emit({"import_failed": f"{type(error).__name__}: {error}"})
            raise
        try:
            install(module)
        except Exception as error:
            if _recorder is not None:
                _recorder.problem("could not wrap cuda.tile.launch", error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `cuda.tile` through the other finders and wraps its loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _start() -> None:
    global _recorder
    folder = os.environ.get(DIR_VARIABLE)
    if not folder or not os.path.isdir(folder):
        return
    _recorder = _Recorder(folder, os.environ.get(SOURCE_ROOT_VARIABLE) or None)
    os.register_at_fork(after_in_child=_recorder.after_fork)
    atexit.register(_recorder.finish)
    if TARGET_MODULE in sys.modules:
        install(sys.modules[TARGET_MODULE])
    else:
        sys.meta_path.insert(0, _Finder())


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize this file shadows, if there is one."""
    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if os.path.realpath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if __name__ in ("sitecustomize", "__main__"):
    try:
        _start()
    except Exception as error:
        print(f"tileport capture: the launch recorder did not start: {error}", file=sys.stderr)
    try:
        _chain_next_sitecustomize()
    except Exception as error:
        print(f"tileport capture: the shadowed sitecustomize failed: {error}", file=sys.stderr)
