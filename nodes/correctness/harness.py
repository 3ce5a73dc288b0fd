"""Arrays for one configuration, and the comparison of outputs with the reference.

Runs on the GPU host (torch is imported by the caller and passed in). Inputs
are drawn fresh per seed as the spec's `init` says, except those whose values
the configuration fixes (`values`: recorded indices such as a permutation),
which both sides receive exactly as given; every output is poisoned
(NaN for floats, the dtype's maximum for integers) before a launch, so an
element the kernel never writes shows up as non-finite or wrong. Arrays with
explicit strides or storage offsets are views into a larger allocation, as a
sliced tensor would be. A list of arrays is a Python list of `list_length`
such tensors: an input's each drawn on its own, an output's each poisoned, and
compared element by element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.port_spec import PortSpec, ResolvedArray, ResolvedConfig
from schemas.spec_expr import evaluate

TINY = 1e-30


@dataclass
class CaseArrays:
    """The arrays of one configuration under one seed: inputs shared, outputs per side."""

    inputs: dict[str, Any]
    port_outputs: dict[str, Any]
    kernel_outputs: dict[str, Any]
    scalars: dict[str, int | float]

    def port_arrays(self, order: list[str]) -> tuple[Any, ...]:
        return tuple(self.port_outputs.get(name, self.inputs.get(name)) for name in order)

    def kernel_arrays(self, order: list[str]) -> tuple[Any, ...]:
        return tuple(self.kernel_outputs.get(name, self.inputs.get(name)) for name in order)

    def shared_outputs(self) -> CaseArrays:
        """These arrays with the reference kernel writing the port's outputs, for timing.

        Correctness needs an output per side, to compare them; timing must not have
        one: where the output lies moves a memory-bound kernel's device time by
        several percent, so with an output per side a perf ratio would measure the
        two allocations as well as the two kernels. One set of buffers for every
        contender takes placement out of the comparison altogether, where rotating
        two sets between the contenders would only average it in, each median then
        falling between two modes."""
        return CaseArrays(self.inputs, self.port_outputs, self.port_outputs, self.scalars)


def buffer_addresses(names: list[str], values: tuple[Any, ...]) -> dict[str, list[int]]:
    """Each array's data_ptr by name (a list: one per element), as a launch receives
    them; scalars and constants are not buffers and are left out."""
    found: dict[str, list[int]] = {}
    for name, value in zip(names, values, strict=True):
        members = value if isinstance(value, list | tuple) else [value]
        if all(hasattr(member, "data_ptr") for member in members):
            found[name] = [int(member.data_ptr()) for member in members]
    return found


def torch_dtype(torch: Any, name: str) -> Any:
    return getattr(torch, name)


def _strided(torch: Any, array: ResolvedArray, device: Any) -> Any:
    """An empty tensor with the array's shape, strides and storage offset."""
    span = 1 + sum(
        (extent - 1) * stride for extent, stride in zip(array.shape, array.strides, strict=True)
    )
    span = span if all(extent > 0 for extent in array.shape) else 0
    base = torch.empty(
        array.storage_offset + span, dtype=torch_dtype(torch, array.dtype), device=device
    )
    return base.as_strided(array.shape, array.strides, array.storage_offset)


def _fill(
    torch: Any,
    tensor: Any,
    spec: PortSpec,
    name: str,
    dtype: str,
    env: dict[str, Any],
    generator: Any,
) -> None:
    init = spec.arrays[name].default_init(dtype)
    low = _bound(init.low, env)
    high = _bound(init.high, env)
    if init.kind == "zeros":
        tensor.zero_()
    elif init.kind == "ones":
        tensor.fill_(1)
    elif init.kind == "arange":
        values = torch.arange(tensor.numel(), device=tensor.device).reshape(tensor.shape)
        tensor.copy_(values.to(tensor.dtype))
    elif init.kind == "randint":
        values = torch.randint(
            int(low), int(high), tuple(tensor.shape), generator=generator, device=tensor.device
        )
        tensor.copy_(values.to(tensor.dtype))
    elif init.kind == "uniform":
        values = torch.rand(tuple(tensor.shape), generator=generator, device=tensor.device)
        tensor.copy_((values * (high - low) + low).to(tensor.dtype))
    elif init.kind == "partition":
        tensor.copy_(_partition(torch, tensor, int(high), generator))
    else:
        values = torch.randn(tuple(tensor.shape), generator=generator, device=tensor.device)
        tensor.copy_(values.to(tensor.dtype))


def _partition(torch: Any, tensor: Any, total: int, generator: Any) -> Any:
    """Offsets 0 = o[0] <= ... <= o[-1] = total, the cuts drawn at random."""
    if tensor.numel() < 2:
        raise ValueError(f"a partition needs at least two offsets, got shape {tuple(tensor.shape)}")
    cuts = torch.randint(
        0, total + 1, (tensor.numel() - 2,), generator=generator, device=tensor.device
    )
    ends = torch.tensor([0, total], device=tensor.device)
    values = torch.cat([ends[:1], cuts.sort().values, ends[1:]])
    return values.reshape(tuple(tensor.shape)).to(tensor.dtype)


def _bound(value: int | float | str | None, env: dict[str, Any]) -> float:
    if value is None:
        return 0.0
    if isinstance(value, str):
        result = evaluate(value, env)
        assert isinstance(result, int | float)
        return float(result)
    return float(value)


def poison(torch: Any, tensor: Any) -> None:
    if tensor.dtype.is_floating_point:
        tensor.fill_(math.nan)
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).max)


def make_arrays(
    torch: Any,
    spec: PortSpec,
    resolved: ResolvedConfig,
    seed: int,
    device: Any,
    prepare: Callable[[dict[str, Any]], None] | None = None,
) -> CaseArrays:
    """The configuration's arrays under `seed`: inputs drawn as the spec's `init` says,
    or given the configuration's fixed `values` (then handed to `prepare`, which runs
    the configuration's producer launches on them), outputs poisoned, one per side; an
    inout array is copied per side after."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    env: dict[str, Any] = {
        **resolved.dims,
        **resolved.constants,
        **resolved.scalars,
        "dtype": resolved.dtype,
    }
    drawn: dict[str, Any] = {}
    port_outputs: dict[str, Any] = {}
    kernel_outputs: dict[str, Any] = {}
    for name, array in resolved.arrays.items():
        if array.role == "out":
            for side in (port_outputs, kernel_outputs):
                side[name] = _tensors(torch, spec, name, array, env, generator, device, True)
        else:
            fixed = resolved.values.get(name)
            drawn[name] = _tensors(torch, spec, name, array, env, generator, device, False, fixed)
    if prepare is not None:
        prepare(drawn)
    inputs: dict[str, Any] = {}
    for name, value in drawn.items():
        if resolved.arrays[name].role == "inout":
            port_outputs[name] = value
            kernel_outputs[name] = _cloned(value)
            inputs[name] = _cloned(value)  # the reference reads the original values
        else:
            inputs[name] = value
    return CaseArrays(inputs, port_outputs, kernel_outputs, dict(resolved.scalars))


def _tensors(
    torch: Any,
    spec: PortSpec,
    name: str,
    array: ResolvedArray,
    env: dict[str, Any],
    generator: Any,
    device: Any,
    poisoned: bool,
    fixed: list[int] | list[bool] | None = None,
) -> Any:
    """The array's tensor, or a list's `list_length` of them, each poisoned (an output),
    filled with the configuration's `fixed` values (row-major), or drawn on its own as
    the spec's `init` says."""
    elements = []
    for _ in range(1 if array.list_length is None else array.list_length):
        tensor = _strided(torch, array, device)
        if poisoned:
            poison(torch, tensor)
        elif fixed is not None:
            given = torch.tensor(fixed, dtype=torch_dtype(torch, array.dtype), device=device)
            tensor.copy_(given.reshape(tuple(array.shape)))
        else:
            _fill(torch, tensor, spec, name, array.dtype, env, generator)
        elements.append(tensor)
    return elements if array.list_length is not None else elements[0]


def _cloned(value: Any) -> Any:
    return [t.clone() for t in value] if isinstance(value, list) else value.clone()


def is_ragged(resolved: ResolvedConfig) -> bool:
    """Some extent that is not a multiple of 16: padding and tails are exercised."""
    return any(extent % 16 for array in resolved.arrays.values() for extent in array.shape)


@dataclass(frozen=True)
class Comparison:
    passed: bool
    max_abs: float
    max_rel: float
    nonfinite: bool
    message: str


def compare(torch: Any, name: str, out: Any, expected: Any, atol: float, rtol: float) -> Comparison:
    """|out - expected| <= atol + rtol * |expected| where the reference is finite, in
    float64. Where it is not (an element neither kernel writes stays the NaN it was
    poisoned with; an overflow), the output must be the same non-finite value: a
    finite output there, or a non-finite one where the reference is finite, fails
    whatever the tolerance. A list of arrays is compared element by element."""
    if isinstance(out, list | tuple):
        return _compare_list(torch, name, out, expected, atol, rtol)
    got = out.detach().to(torch.float64)
    want = expected.detach().to(torch.float64).expand_as(got)
    finite_want = torch.isfinite(want)
    finite_both = finite_want & torch.isfinite(got)
    same_nonfinite = ~finite_want & ((torch.isnan(want) & torch.isnan(got)) | (want == got))
    disagree = ~finite_both & ~same_nonfinite
    nonfinite = bool(disagree.any())
    error = torch.where(finite_both, (got - want).abs(), torch.zeros_like(got))
    allowed = torch.where(finite_both, atol + rtol * want.abs(), torch.zeros_like(got))
    within = bool((error <= allowed).all()) and not nonfinite
    max_abs = float(error.max()) if error.numel() else 0.0
    scale = torch.where(finite_both, want.abs().clamp_min(TINY), torch.ones_like(got))
    max_rel = float((error / scale).max()) if error.numel() else 0.0
    message = f"{name}: max abs {max_abs:.3e}, max rel {max_rel:.3e}"
    if nonfinite:
        count = int(disagree.sum())
        message += f", {count} element(s) finite on one side only (unwritten or overflowed)"
    return Comparison(within, max_abs, max_rel, nonfinite, message)


def _compare_list(
    torch: Any, name: str, out: Any, expected: Any, atol: float, rtol: float
) -> Comparison:
    if not isinstance(expected, list | tuple) or len(expected) != len(out):
        found = len(expected) if isinstance(expected, list | tuple) else "not a list"
        message = f"{name}: {len(out)} arrays, the reference's {found}"
        return Comparison(False, math.inf, math.inf, False, message)
    parts = [
        compare(torch, f"{name}[{index}]", got, want, atol, rtol)
        for index, (got, want) in enumerate(zip(out, expected, strict=True))
    ]
    failing = [part.message for part in parts if not part.passed]
    max_abs = max((part.max_abs for part in parts), default=0.0)
    max_rel = max((part.max_rel for part in parts), default=0.0)
    message = (
        "; ".join(failing)
        if failing
        else (f"{name} ({len(parts)} arrays): max abs {max_abs:.3e}, max rel {max_rel:.3e}")
    )
    return Comparison(
        passed=not failing,
        max_abs=max_abs,
        max_rel=max_rel,
        nonfinite=any(part.nonfinite for part in parts),
        message=message,
    )


def expected_outputs(result: Any, outputs: list[str]) -> dict[str, Any]:
    """A reference returns one tensor (the single output) or a dict by output name."""
    if isinstance(result, dict):
        missing = [name for name in outputs if name not in result]
        if missing:
            raise ValueError(f"the reference returned no value for {missing}")
        return {name: result[name] for name in outputs}
    if len(outputs) != 1:
        raise ValueError(f"the reference returned one tensor for outputs {outputs}")
    return {outputs[0]: result}
