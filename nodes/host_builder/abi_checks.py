"""The ABI checks of stage D, for any operator, against the built library.

Run through cffi on the build machine (no GPU): every error path must return
its own status without touching a GPU, and the library's own launch plan
(`cutile_<op>_plan`) must equal the one the port spec gives, for every
configuration the port takes. Descriptors carry fake, aligned device
addresses: nothing reaches the device check except the host-pointer cases,
which must say DEVICE (no driver here; not device memory on a GPU host). A list
of arrays is passed as the C ABI takes it: an array of element descriptors,
its length and the descriptor of its (fake) device table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodes.host_builder.abi import DType, Status
from nodes.host_builder.binding import ArrayBinding, BindingError, OperatorBinding, plan_for
from schemas.port_spec import ITEMSIZE, PortSpec, ResolvedArray, ResolvedConfig
from schemas.reports import AbiCheck, CheckResult

FAKE_BASE = 0x7F00_0000_0000
FAKE_STEP = 0x1000_0000
FAKE_ELEMENT_STEP = 0x10_0000
FAKE_TABLE_BASE = 0x7E00_0000_0000

Arguments = list[list[Any]]
"""A call's leading C arguments, per array: one descriptor, or a list's element
array, length and table descriptor."""


@dataclass(frozen=True)
class Probe:
    case: str
    expected: Status
    descriptors: list[Any]


def flat(arguments: Arguments) -> list[Any]:
    return [argument for group in arguments for argument in group]


def _supported(binding: OperatorBinding, resolved: ResolvedConfig) -> bool:
    try:
        variant = binding.variant_for(resolved)
    except BindingError:
        return False
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
        self._host_buffers: list[Any] = []  # kept alive while probes point into them

    def descriptors(self, resolved: ResolvedConfig) -> list[Any]:
        """The call's leading C arguments for a configuration, at fake device addresses."""
        return flat(self.arguments(resolved))

    def arguments(self, resolved: ResolvedConfig) -> Arguments:
        built: Arguments = []
        for index, array in enumerate(self.binding.arrays):
            facts = resolved.arrays[array.name]
            offset = facts.storage_offset * ITEMSIZE[facts.dtype]
            base = FAKE_BASE + index * FAKE_STEP + offset
            if not array.is_list:
                built.append([self._tensor(base, _code(facts), facts.shape, facts.strides)])
                continue
            length = facts.list_length or 0
            elements = self.ffi.new("tileport_tensor_t[]", length)
            for element in range(length):
                data = base + element * FAKE_ELEMENT_STEP
                self._set(elements[element], data, _code(facts), facts.shape, facts.strides)
            built.append([elements, length, self._table(array, length, index)])
        return built

    def _table(self, array: ArrayBinding, rows: int, index: int) -> Any:
        columns = array.table_columns
        data = FAKE_TABLE_BASE + index * FAKE_STEP
        return self._tensor(data, int(DType.INT64), [rows, columns], [columns, 1])

    def _tensor(self, data: int, dtype: int, shape: list[int], strides: list[int]) -> Any:
        cdata = self.ffi.new("tileport_tensor_t *")
        self._set(cdata, data, dtype, shape, strides)
        return cdata

    @staticmethod
    def _set(cdata: Any, data: int, dtype: int, shape: list[int], strides: list[int]) -> None:
        cdata.data = data
        cdata.dtype = dtype
        cdata.ndim = len(shape)
        for dim, (extent, stride) in enumerate(zip(shape, strides, strict=True)):
            cdata.shape[dim] = extent
            cdata.strides[dim] = stride

    def _scalars(self, resolved: ResolvedConfig) -> list[int | float]:
        return [resolved.argument(s.name) for s in self.binding.scalars]

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

    def _changed(self, descriptor: Any, changes: dict[str, int]) -> Any:
        """A copy of a descriptor with some of data, dtype and ndim changed."""
        shape = list(descriptor.shape)[: descriptor.ndim]
        strides = list(descriptor.strides)[: descriptor.ndim]
        fields = {
            "data": descriptor.data,
            "dtype": descriptor.dtype,
            "ndim": descriptor.ndim,
            **changes,
        }
        changed = self._tensor(fields["data"], fields["dtype"], shape, strides)
        changed.ndim = fields["ndim"]
        return changed

    def _with(self, good: Arguments, index: int, group: list[Any]) -> list[Any]:
        """The call's arguments with array `index`'s replaced."""
        return flat([*good[:index], group, *good[index + 1 :]])

    def _host_address(self) -> int:
        host = self.ffi.new("char[]", 1 << 16)
        self._host_buffers.append(host)
        return (int(self.ffi.cast("uintptr_t", host)) + 255) // 256 * 256

    def error_probes(self, resolved: ResolvedConfig) -> list[Probe]:
        good = self.arguments(resolved)
        arrays = self.binding.arrays
        probes: list[Probe] = []
        plain = next((i for i, a in enumerate(arrays) if not a.is_list), None)
        if plain is not None:
            probes += self._array_probes(good, plain)
        listed = next((i for i, a in enumerate(arrays) if a.is_list), None)
        if listed is not None:
            probes += self._list_probes(good, listed, arrays[listed])
        return probes

    def _array_probes(self, good: Arguments, index: int) -> list[Probe]:
        first = good[index][0]

        def changed(**changes: int) -> list[Any]:
            return self._with(good, index, [self._changed(first, changes)])

        negative = self._changed(first, {})
        negative.strides[0] = -1
        return [
            Probe(
                "null descriptor", Status.NULL_DESCRIPTOR, self._with(good, index, [self.ffi.NULL])
            ),
            Probe("unknown dtype code 0", Status.UNKNOWN_DTYPE, changed(dtype=0)),
            Probe("unknown dtype code 99", Status.UNKNOWN_DTYPE, changed(dtype=99)),
            Probe("wrong rank", Status.BAD_RANK, changed(ndim=int(first.ndim) + 1)),
            Probe("negative stride", Status.BAD_STRIDE, self._with(good, index, [negative])),
            Probe("null data pointer", Status.DEVICE, changed(data=0)),
            Probe("host pointer", Status.DEVICE, changed(data=self._host_address())),
        ]

    def _list_probes(self, good: Arguments, index: int, array: ArrayBinding) -> list[Probe]:
        elements, length, table = good[index]

        def group(**parts: Any) -> list[Any]:
            taken = {"elements": elements, "length": length, "table": table, **parts}
            return self._with(good, index, [taken["elements"], taken["length"], taken["table"]])

        rows = [self._changed(elements[i], {}) for i in range(length)]
        wrong_shape = self._table(array, length + 1, index)
        probes = [
            Probe(
                "list: null element array", Status.NULL_DESCRIPTOR, group(elements=self.ffi.NULL)
            ),
            Probe("list: no arrays", Status.BAD_SHAPE, group(length=0)),
            Probe("list: null table", Status.NULL_DESCRIPTOR, group(table=self.ffi.NULL)),
            Probe("list: table of the wrong shape", Status.BAD_SHAPE, group(table=wrong_shape)),
            Probe(
                "list: table not int64",
                Status.UNSUPPORTED_DTYPE,
                group(table=self._changed(table, {"dtype": int(DType.FLOAT32)})),
            ),
            Probe(
                "list: element of the wrong rank",
                Status.BAD_RANK,
                group(elements=self._element_array(rows, 0, ndim=int(rows[0].ndim) + 1)),
            ),
            Probe(
                "list: element in host memory",
                Status.DEVICE,
                group(elements=self._element_array(rows, length - 1, data=self._host_address())),
            ),
        ]
        if length > 1:
            other = DType.FLOAT32 if int(rows[0].dtype) != DType.FLOAT32 else DType.FLOAT16
            probes.append(
                Probe(
                    "list: element dtype differs from the first",
                    Status.UNSUPPORTED_DTYPE,
                    group(elements=self._element_array(rows, 1, dtype=int(other))),
                )
            )
        return probes

    def _element_array(self, rows: list[Any], changed: int, **changes: int) -> Any:
        """A fresh element array: `rows` with element `changed` changed."""
        array = self.ffi.new("tileport_tensor_t[]", len(rows))
        for index, row in enumerate(rows):
            source = self._changed(row, changes) if index == changed else row
            array[index] = source[0]
        return array

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


def _code(facts: ResolvedArray) -> int:
    return int(DType.from_spec_name(facts.dtype))
