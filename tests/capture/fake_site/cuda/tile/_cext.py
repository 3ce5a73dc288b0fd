"""`launch` and the parameter constraints, shaped like cuTile's C extension."""

from __future__ import annotations

from typing import Any

from cuda.tile.compilation import (
    ArrayConstraint,
    CallingConvention,
    KernelSignature,
    ScalarConstraint,
)

_cache: dict[tuple[int, str], bool] = {}


def get_parameter_constraints_from_pyargs(
    kernel: Any, args: tuple[Any, ...], convention: CallingConvention
) -> tuple[Any, ...]:
    constraints: list[Any] = []
    for value in args:
        if hasattr(value, "data_ptr"):
            constant = tuple(
                1 if extent == 1 and convention.code == "t2" else None for extent in value.shape
            )
            constraints.append(ArrayConstraint(str(value.dtype), len(value.shape), constant))
        else:
            constraints.append(ScalarConstraint(type(value).__name__))
    return tuple(constraints)


def launch(stream: Any, grid: Any, kernel: Any, kernel_args: tuple[Any, ...], /) -> None:
    v2 = CallingConvention.cutile_python_v2()
    constraints = get_parameter_constraints_from_pyargs(kernel, kernel_args, v2)
    needs_v2 = any(
        isinstance(c, ArrayConstraint) and any(x is not None for x in c.shape_constant)
        for c in constraints
    )
    convention = v2 if needs_v2 else CallingConvention.cutile_python_v1()
    signature = KernelSignature(
        get_parameter_constraints_from_pyargs(kernel, kernel_args, convention), convention
    )
    key = (id(kernel), repr(signature.parameters))
    if key not in _cache:
        kernel._compile(signature, None)
        _cache[key] = True
    kernel._pyfunc(*kernel_args)
