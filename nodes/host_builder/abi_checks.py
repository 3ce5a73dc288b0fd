"""The ABI checks of stage D, for any operator, against the built library.

Run through cffi on the build machine (no GPU): every error path must return
its own status without touching a GPU, and the library's own launch plan
(`cutile_<op>_plan`) must equal the one the port spec gives, for every
configuration the port takes. Descriptors carry fake, aligned device
addresses: nothing reaches the device check except the host-pointer cases,
which must say DEVICE (no driver here; not device memory on a GPU host).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodes.host_builder.abi import DType, Status
from nodes.host_builder.binding import OperatorBinding, plan_for
from schemas.port_spec import ITEMSIZE, PortSpec, ResolvedConfig
from schemas.reports import AbiCheck, CheckResult

FAKE_BASE = 0x7F00_0000_0000
FAKE_STEP = 0x1000_0000


@dataclass(frozen=True)
class Probe:
    case: str
    expected: Status
    descriptors: list[Any]


def _supported(binding: OperatorBinding, resolved: ResolvedConfig) -> bool:
    variant = next(v for v in binding.variants if v.name == resolved.variant)
    return all(
        resolved.arrays[name].dtype in {d.spec_name for d in dtypes}
        for name, dtypes in variant.allowed_dtypes.items()
    )


def supported_configs(spec: PortSpec, binding: OperatorBinding) -> list[ResolvedConfig]:
    """Every test and perf configuration whose dtypes the port takes."""
    resolved = [spec.resolve(config, purpose) for config, purpose in spec.all_configs()]
    return [r for r in resolved if _supported(binding, r)]


class AbiProber:
    """Builds descriptors for one configuration and calls the operator's entries."""

    def __init__(self, library: Any, binding: OperatorBinding) -> None:
        self.library = library
        self.binding = binding
        self.ffi = library.ffi
        self.lib = library.lib
        self._host_buffer: Any = None  # kept alive while probes point into it

    def descriptors(self, resolved: ResolvedConfig) -> list[Any]:
        built = []
        for index, array in enumerate(self.binding.arrays):
            facts = resolved.arrays[array.name]
            offset = facts.storage_offset * ITEMSIZE[facts.dtype]
            built.append(
                self._tensor(
                    FAKE_BASE + index * FAKE_STEP + offset,
                    int(DType.from_spec_name(facts.dtype)),
                    facts.shape,
                    facts.strides,
                )
            )
        return built

    def _tensor(self, data: int, dtype: int, shape: list[int], strides: list[int]) -> Any:
        cdata = self.ffi.new("tileport_tensor_t *")
        cdata.data = data
        cdata.dtype = dtype
        cdata.ndim = len(shape)
        for dim, (extent, stride) in enumerate(zip(shape, strides, strict=True)):
            cdata.shape[dim] = extent
            cdata.strides[dim] = stride
        return cdata

    def _scalars(self, resolved: ResolvedConfig) -> list[int | float]:
        return [resolved.scalars[s.name] for s in self.binding.scalars]

    def launch(self, resolved: ResolvedConfig, descriptors: list[Any]) -> int:
        function = getattr(self.lib, self.binding.abi.symbol)
        return int(function(*descriptors, *self._scalars(resolved), self.ffi.NULL))

    def plan(self, resolved: ResolvedConfig, descriptors: list[Any], num_sms: int) -> Any:
        plan = self.ffi.new("tileport_plan_t *")
        function = getattr(self.lib, self.binding.abi.plan_symbol)
        status = int(function(*descriptors, *self._scalars(resolved), num_sms, plan))
        return status, plan

    def last_error(self) -> str:
        """The message of this thread's last failed call into the library."""
        buffer = self.ffi.new("char[]", 4096)
        self.lib.tileport_last_error(buffer, 4096)
        return str(self.ffi.string(buffer).decode(errors="replace"))

    def _variant_of(self, descriptors: list[Any], changes: dict[str, int]) -> list[Any]:
        first = descriptors[0]
        shape = list(first.shape)[: first.ndim]
        strides = list(first.strides)[: first.ndim]
        fields = {"data": first.data, "dtype": first.dtype, "ndim": first.ndim, **changes}
        changed = self._tensor(fields["data"], fields["dtype"], shape, strides)
        changed.ndim = fields["ndim"]
        return [changed, *descriptors[1:]]

    def error_probes(self, resolved: ResolvedConfig) -> list[Probe]:
        good = self.descriptors(resolved)
        host = self.ffi.new("char[]", 1 << 16)
        host_address = (int(self.ffi.cast("uintptr_t", host)) + 255) // 256 * 256
        self._host_buffer = host
        negative = self._variant_of(good, {})
        negative[0].strides[0] = -1
        return [
            Probe("null descriptor", Status.NULL_DESCRIPTOR, [self.ffi.NULL, *good[1:]]),
            Probe(
                "unknown dtype code 0", Status.UNKNOWN_DTYPE, self._variant_of(good, {"dtype": 0})
            ),
            Probe(
                "unknown dtype code 99", Status.UNKNOWN_DTYPE, self._variant_of(good, {"dtype": 99})
            ),
            Probe(
                "wrong rank",
                Status.BAD_RANK,
                self._variant_of(good, {"ndim": int(good[0].ndim) + 1}),
            ),
            Probe("negative stride", Status.BAD_STRIDE, negative),
            Probe("null data pointer", Status.DEVICE, self._variant_of(good, {"data": 0})),
            Probe("host pointer", Status.DEVICE, self._variant_of(good, {"data": host_address})),
        ]

    def run_error_probes(self, resolved: ResolvedConfig) -> list[AbiCheck]:
        checks = [
            AbiCheck(
                case=probe.case,
                expected_code=int(probe.expected),
                returned_code=self.launch(resolved, probe.descriptors),
            )
            for probe in self.error_probes(resolved)
        ]
        checks.append(
            AbiCheck(
                case="panic caught at the boundary",
                expected_code=int(Status.PANIC),
                returned_code=int(self.lib.tileport_selftest_panic()),
            )
        )
        return checks

    def plan_checks(self, spec: PortSpec, num_sms: int = 132) -> list[CheckResult]:
        """The library's plan equals the spec's, for every configuration the port takes."""
        results: list[CheckResult] = []
        for resolved in supported_configs(spec, self.binding):
            expected = plan_for(self.binding, resolved)
            status, plan = self.plan(resolved, self.descriptors(resolved), num_sms)
            got = (
                int(plan.variant),
                (int(plan.grid[0]), int(plan.grid[1]), int(plan.grid[2])),
                tuple(int(plan.generics[i]) for i in range(int(plan.num_generics))),
            )
            want = (expected.variant, expected.grid, expected.generics)
            passed = status == Status.OK and got == want
            detail = f"library {got} (status {status}), spec {want}"
            if status != Status.OK:
                detail += f": {self.last_error()}"
            results.append(CheckResult(name=f"plan {resolved.name}", passed=passed, detail=detail))
        return results
