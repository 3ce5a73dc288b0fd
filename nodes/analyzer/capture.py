"""Capture real launches on a GPU host: run the operator's entry point with
`cuda.tile.launch` intercepted and record what each launch specialises on.

    launches = capture_launches(lambda: my_operator(x, y))
    spec = to_specialisation(launches[0], variant="row")   # export it anywhere

The interceptor forwards every call to the real `launch` unchanged (the
operator still runs), and puts the original back afterwards, even when the
entry point raises. Only lookups of `launch` on the target module at call time
are seen: code that did `from cuda.tile import launch` before the capture keeps
its own reference (name such modules in `also_patch`).
"""

from __future__ import annotations

import importlib
import inspect
import threading
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from schemas.launch_capture import CapturedArray, CapturedLaunch, CapturedScalar
from schemas.port_spec import ITEMSIZE, DTypeName, Hints, ResolvedArray
from schemas.reference_export import (
    ArrayArg,
    ArrayFacts,
    ArrayListArg,
    ConstantArg,
    ParamArg,
    ScalarArg,
    Specialisation,
)
from toolchain.reference_export import launch_facts

LAUNCH_ATTRIBUTE: Final = "launch"
MAX_ALIGNMENT: Final = 16
HINT_NAMES: Final = ("num_ctas", "occupancy", "num_worker_warps")

# __cuda_array_interface__ typestrs (the byte order character aside).
_TYPESTR_DTYPES: Final[dict[str, DTypeName]] = {
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
_INT32_RANGE: Final = range(-(2**31), 2**31)

_capture_lock = threading.Lock()


class CaptureError(ValueError):
    """A launch argument the capture cannot describe."""


def capture_launches(
    entry: Callable[[], object],
    *,
    target: Any = None,
    also_patch: Sequence[Any] = (),
) -> list[CapturedLaunch]:
    """Run `entry` and return every launch it made through `target.launch`
    (default: the `cuda.tile` module)."""
    module = target if target is not None else importlib.import_module("cuda.tile")
    captured: list[CapturedLaunch] = []
    with _capture_lock, _intercepted([module, *also_patch], captured):
        entry()
    return captured


@contextmanager
def _intercepted(holders: Sequence[Any], into: list[CapturedLaunch]) -> Iterator[None]:
    originals = [getattr(holder, LAUNCH_ATTRIBUTE) for holder in holders]
    try:
        for holder, original in zip(holders, originals, strict=True):
            setattr(holder, LAUNCH_ATTRIBUTE, _recording(original, into))
        yield
    finally:
        for holder, original in zip(holders, originals, strict=True):
            setattr(holder, LAUNCH_ATTRIBUTE, original)


def _recording(original: Callable[..., Any], into: list[CapturedLaunch]) -> Callable[..., Any]:
    def launch(stream: Any, grid: Any, kernel: Any, kernel_args: Any, /, **options: Any) -> Any:
        into.append(describe_launch(grid, kernel, tuple(kernel_args)))
        return original(stream, grid, kernel, kernel_args, **options)

    return launch


def describe_launch(grid: Any, kernel: Any, args: tuple[Any, ...]) -> CapturedLaunch:
    function = getattr(kernel, "_pyfunc", kernel)
    names = list(inspect.signature(function).parameters)
    if len(names) != len(args):
        raise CaptureError(f"{function.__name__} takes {len(names)} arguments, got {len(args)}")
    arrays: dict[str, CapturedArray] = {}
    constants: dict[str, bool | int | float] = {}
    scalars: dict[str, CapturedScalar] = {}
    constant_flags = _constant_parameters(kernel, function, names)
    for name, value in zip(names, args, strict=True):
        if constant_flags[name]:
            constants[name] = _constant(name, value)
        elif isinstance(value, bool | int | float):
            scalars[name] = CapturedScalar(dtype=scalar_dtype(value), value=value)
        else:
            arrays[name] = _array(name, value)
    return CapturedLaunch(
        kernel=function.__name__,
        grid=_grid(grid),
        arrays=arrays,
        constants=constants,
        scalars=scalars,
        hints=_hints(kernel),
        parameters=names,
    )


def _constant_parameters(kernel: Any, function: Any, names: list[str]) -> dict[str, bool]:
    """Which parameters are `ct.Constant`: as cuTile itself parsed them when the
    kernel is a real `@ct.kernel`, else from the resolved type hints."""
    parsed = getattr(getattr(kernel, "_annotated_function", None), "parameter_annotations", None)
    if isinstance(parsed, tuple | list) and len(parsed) == len(names):
        return {
            name: bool(getattr(node, "constant", False))
            for name, node in zip(names, parsed, strict=True)
        }
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    return {name: _is_constant(hints.get(name)) for name in names}


def _is_constant(annotation: Any) -> bool:
    """`ct.Constant[int]` is `Annotated[int, ConstantAnnotation()]`."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(type(meta).__name__ == "ConstantAnnotation" for meta in annotation.__metadata__)


def _constant(name: str, value: Any) -> bool | int | float:
    if isinstance(value, bool | int | float):
        return value
    raise CaptureError(f"constant {name} is a {type(value).__name__}; only scalars are recorded")


def scalar_dtype(value: bool | int | float) -> DTypeName:
    """The type cuTile gives a Python scalar: bool, int32 when it fits, else int64,
    float32 for floats."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int32" if value in _INT32_RANGE else "int64"
    return "float32"


def _grid(grid: Any) -> tuple[int, int, int]:
    dims = [int(d) for d in (grid if isinstance(grid, tuple | list) else (grid,))]
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise CaptureError(f"launch grid {grid!r} is not 1 to 3 positive extents")
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def _hints(kernel: Any) -> dict[str, int]:
    options = getattr(kernel, "_compiler_options", None)
    hints: dict[str, int] = {}
    for name in HINT_NAMES:
        value = getattr(options, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            hints[name] = value
    return hints


def _array(name: str, value: Any) -> CapturedArray:
    if isinstance(value, list | tuple):
        if not value:
            raise CaptureError(f"{name} is an empty list of arrays")
        first = _array(name, value[0])
        return first.model_copy(update={"list_length": len(value)})
    if hasattr(value, "data_ptr") and hasattr(value, "stride"):
        return _torch_like(value)
    interface = getattr(value, "__cuda_array_interface__", None)
    if isinstance(interface, dict):
        return _from_interface(name, interface)
    raise CaptureError(f"{name}: cannot describe a {type(value).__name__} as an array")


def _torch_like(tensor: Any) -> CapturedArray:
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in ITEMSIZE:
        raise CaptureError(f"unsupported tensor dtype {tensor.dtype}")
    return CapturedArray(
        dtype=typing.cast(DTypeName, dtype),
        shape=[int(d) for d in tensor.shape],
        strides=[int(s) for s in tensor.stride()],
        base_addr_divisible_by=alignment(int(tensor.data_ptr())),
    )


def _from_interface(name: str, interface: dict[str, Any]) -> CapturedArray:
    code = str(interface["typestr"])[1:]
    if code not in _TYPESTR_DTYPES:
        raise CaptureError(f"{name}: unsupported typestr {interface['typestr']!r}")
    dtype = _TYPESTR_DTYPES[code]
    itemsize = ITEMSIZE[dtype]
    shape = [int(d) for d in interface["shape"]]
    byte_strides = interface.get("strides")
    if byte_strides is None:
        strides = _row_major(shape)
    else:
        if any(int(s) % itemsize for s in byte_strides):
            raise CaptureError(f"{name}: strides {byte_strides} are not whole elements")
        strides = [int(s) // itemsize for s in byte_strides]
    pointer = int(interface["data"][0])
    return CapturedArray(
        dtype=dtype, shape=shape, strides=strides, base_addr_divisible_by=alignment(pointer)
    )


def _row_major(shape: list[int]) -> list[int]:
    strides = [0] * len(shape)
    step = 1
    for dim in reversed(range(len(shape))):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return strides


def alignment(address: int) -> int:
    """The largest power of two dividing `address`, at most 16 (what a launch records)."""
    if address == 0:
        return MAX_ALIGNMENT
    return min(address & -address, MAX_ALIGNMENT)


# -- back to an export ---------------------------------------------------------------


def to_specialisation(launch: CapturedLaunch, variant: str) -> Specialisation:
    """The specialisation the reference export needs to reproduce this launch's IR."""
    params: dict[str, ParamArg] = {}
    for name, array in launch.arrays.items():
        facts = _facts(array)
        params[name] = (
            ArrayArg(facts=facts)
            if array.list_length is None
            else ArrayListArg(element=facts, example_length=array.list_length)
        )
    for name, scalar in launch.scalars.items():
        match scalar.dtype:
            case "int32" | "float32" | "bool" as dtype:
                params[name] = ScalarArg(dtype=dtype)
            case other:
                raise CaptureError(
                    f"scalar {name} is {other}: the export takes int32, float32, bool"
                )
    for name, value in launch.constants.items():
        params[name] = ConstantArg(value=value)
    hints = Hints(**launch.hints) if launch.hints else None
    return Specialisation(variant=variant, params=params, hints=hints, grid=launch.grid)


def _facts(array: CapturedArray) -> ArrayFacts:
    # The same derivation a spec-driven export uses, then the measured base alignment.
    derived = launch_facts(
        ResolvedArray(dtype=array.dtype, shape=array.shape, strides=array.strides, role="in")
    )
    return derived.model_copy(update={"base_addr_divisible_by": array.base_addr_divisible_by})
