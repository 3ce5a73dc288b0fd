"""CUPTI device time of the kernels a call launches, for the perf protocol.

Activity records of kind CONCURRENT_KERNEL carry each kernel's device start and
end (ns). A measured call runs inside a window: the stream is synchronised, the
CUPTI clock read, the call made, the stream synchronised and the clock read
again; the kernels executing inside the window are the call's. Their summed
durations are its device time, their count its launch count. Work outside
windows (the L2 flush) is never attributed to a call.

Needs `cupti-python` (module `cupti`) and a CUDA device; it is imported only
when a timer starts, so this module loads anywhere.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

BUFFER_BYTES = 8 << 20

# What a kernel record says about how the kernel was launched and what the driver
# gave it (CUpti_ActivityKernel fields): two calls of one cubin that differ here
# were launched differently. Fields an older CUPTI lacks are left out.
LAUNCH_FIELDS = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "cluster_x",
    "cluster_y",
    "cluster_z",
    "cluster_scheduling_policy",
    "registers_per_thread",
    "static_shared_memory",
    "dynamic_shared_memory",
    "local_memory_per_thread",
    "shared_memory_config",
    "shared_memory_executed",
    "is_shared_memory_carveout_requested",
    "shared_memory_carveout_requested",
    "shmem_limit_config",
    "partitioned_global_cache_requested",
    "partitioned_global_cache_executed",
    "launch_type",
)

LaunchAttributes = tuple[tuple[str, int], ...]

# CUPTI takes one pair of activity callbacks per process; the timer and the
# driver trace each add a sink while they run.
_SINKS: list[Callable[[Any], None]] = []
_API: list[Any] = []


def _activity_api() -> Any:
    """The `cupti` module with the process's activity callbacks registered."""
    if _API:
        return _API[0]
    from cupti import cupti  # imported here: only GPU hosts have it

    def on_request() -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def on_complete(activities: list[Any]) -> None:
        for activity in activities:
            for sink in list(_SINKS):
                sink(activity)

    cupti.activity_register_callbacks(on_request, on_complete)
    _API.append(cupti)
    return cupti


def launch_attributes(activity: Any) -> LaunchAttributes:
    """The launch fields (`LAUNCH_FIELDS`) a kernel activity record carries."""
    return tuple(
        (name, int(getattr(activity, name))) for name in LAUNCH_FIELDS if hasattr(activity, name)
    )


@dataclass(frozen=True)
class KernelRecord:
    name: str
    start_ns: int
    end_ns: int
    launch: LaunchAttributes = ()

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Window:
    label: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class CallTiming:
    label: str
    device_ns: int
    launches: int
    kernels: tuple[str, ...]
    launch: tuple[LaunchAttributes, ...] = ()
    """Per kernel, in `kernels` order: its launch attributes."""


@dataclass
class KernelTimer:
    """Collects kernel activity records and attributes them to labelled windows."""

    synchronize: Callable[[], None]
    records: list[KernelRecord] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    _cupti: Any = None

    def start(self) -> None:
        self._cupti = _activity_api()
        _SINKS.append(self._collect)
        self._cupti.activity_enable(self._cupti.ActivityKind.CONCURRENT_KERNEL)

    def _collect(self, activity: Any) -> None:
        if activity.kind == self._cupti.ActivityKind.CONCURRENT_KERNEL:
            self.records.append(
                KernelRecord(
                    str(activity.name),
                    int(activity.start),
                    int(activity.end),
                    launch_attributes(activity),
                )
            )

    def flush(self) -> None:
        """Delivers the records of every kernel finished so far, keeping the timer on:
        the repetitions of a configuration are decided from its samples so far."""
        assert self._cupti is not None, "start() the timer first"
        self.synchronize()
        self._cupti.activity_flush_all(1)

    def stop(self) -> None:
        if self._cupti is None:
            return
        self.synchronize()
        self._cupti.activity_flush_all(1)
        self._cupti.activity_disable(self._cupti.ActivityKind.CONCURRENT_KERNEL)
        _SINKS.remove(self._collect)
        self._cupti = None

    def now_ns(self) -> int:
        assert self._cupti is not None, "start() the timer first"
        return int(self._cupti.get_timestamp())

    @contextmanager
    def window(self, label: str) -> Iterator[None]:
        """Everything the body launches is attributed to `label`."""
        self.synchronize()
        start = self.now_ns()
        yield
        self.synchronize()
        self.windows.append(Window(label, start, self.now_ns()))

    def timings(self) -> list[CallTiming]:
        """One timing per window, in window order (call after `stop`)."""
        return attribute(self.records, self.windows)


def attribute(records: list[KernelRecord], windows: list[Window]) -> list[CallTiming]:
    """Assigns each kernel to the window that contains the middle of its execution
    (robust to a small skew between the host and device clocks: windows are
    separated by synchronisations and the flush, far wider than that skew)."""
    ordered = sorted(records, key=lambda record: (record.start_ns + record.end_ns) / 2)
    middles = [(record.start_ns + record.end_ns) / 2 for record in ordered]
    timings: list[CallTiming] = []
    for window in windows:
        first = bisect.bisect_left(middles, window.start_ns)
        inside = ordered[first : bisect.bisect_right(middles, window.end_ns)]
        timings.append(
            CallTiming(
                label=window.label,
                device_ns=sum(r.duration_ns for r in inside),
                launches=len(inside),
                kernels=tuple(r.name for r in inside),
                launch=tuple(r.launch for r in inside),
            )
        )
    return timings


@dataclass(frozen=True)
class Summary:
    median_us: float
    min_us: float
    launches_per_call: float
    samples: int
    device_us: tuple[float, ...]
    """Every sample, in window order."""
    kernels: tuple[str, ...] = ()
    """The kernels of the label's most frequent launch."""
    launch: tuple[LaunchAttributes, ...] = ()
    """The launch attributes of those kernels, as most of the label's calls had them."""
    placements: tuple[int, ...] = ()
    """Per sample, the module it ran from (its window's `@<placement>`); empty when
    the label was timed from one module."""


def summarise(timings: list[CallTiming], label: str) -> Summary | None:
    """Median and minimum device time (µs) and median launch count of one label's
    windows that launched at least one kernel (`label`, or `label@<placement>` for a
    side timed across modules: pooled), and those windows' device times; None if
    there are none."""
    placed = label + "@"
    mine = [
        t for t in timings if (t.label == label or t.label.startswith(placed)) and t.launches > 0
    ]
    if not mine:
        return None
    device_us = tuple(t.device_ns / 1e3 for t in mine)
    placements = tuple(int(t.label[len(placed) :]) for t in mine if t.label.startswith(placed))
    kernels = Counter(t.kernels for t in mine).most_common(1)[0][0]
    return Summary(
        median_us=statistics.median(device_us),
        min_us=min(device_us),
        launches_per_call=float(statistics.median(t.launches for t in mine)),
        samples=len(mine),
        device_us=device_us,
        kernels=kernels,
        launch=Counter(t.launch for t in mine if t.kernels == kernels).most_common(1)[0][0],
        placements=placements if len(placements) == len(mine) else (),
    )


@dataclass(frozen=True)
class DriverCall:
    """One CUDA driver API call: its name, its return code, the calling thread."""

    name: str
    status: int
    thread_id: int

    def __str__(self) -> str:
        return self.name if self.status == 0 else f"{self.name} -> {self.status}"


def trace_driver_calls(call: Callable[[], None]) -> list[DriverCall]:
    """The driver API calls made while `call` runs (any thread), in start order,
    from CUPTI's DRIVER activity records; exceptions of `call` are swallowed
    because a failing call is what one traces."""
    cupti = _activity_api()
    records: list[tuple[int, int, int, int]] = []

    def collect(activity: Any) -> None:
        if activity.kind == cupti.ActivityKind.DRIVER:
            records.append(
                (
                    int(activity.start),
                    int(activity.cbid),
                    int(activity.return_value),
                    int(activity.thread_id),
                )
            )

    _SINKS.append(collect)
    cupti.activity_enable(cupti.ActivityKind.DRIVER)
    try:
        call()
    except Exception:  # the trace is the result; the caller knows the call failed
        pass
    finally:
        cupti.activity_flush_all(1)
        cupti.activity_disable(cupti.ActivityKind.DRIVER)
        _SINKS.remove(collect)
    domain = cupti.CallbackDomain.DRIVER_API
    return [
        DriverCall(str(cupti.get_callback_name(domain, cbid)), status, thread)
        for _, cbid, status, thread in sorted(records)
    ]
