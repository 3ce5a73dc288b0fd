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

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

BUFFER_BYTES = 8 << 20


@dataclass(frozen=True)
class KernelRecord:
    name: str
    start_ns: int
    end_ns: int

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


@dataclass
class KernelTimer:
    """Collects kernel activity records and attributes them to labelled windows."""

    synchronize: Callable[[], None]
    records: list[KernelRecord] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    _cupti: Any = None

    def start(self) -> None:
        from cupti import cupti  # imported here: only GPU hosts have it

        self._cupti = cupti

        def on_request() -> tuple[int, int]:
            return BUFFER_BYTES, 0

        def on_complete(activities: list[Any]) -> None:
            for activity in activities:
                if activity.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                    self.records.append(
                        KernelRecord(str(activity.name), int(activity.start), int(activity.end))
                    )

        cupti.activity_register_callbacks(on_request, on_complete)
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)

    def stop(self) -> None:
        if self._cupti is None:
            return
        self.synchronize()
        self._cupti.activity_flush_all(1)
        self._cupti.activity_disable(self._cupti.ActivityKind.CONCURRENT_KERNEL)
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
    ordered = sorted(records, key=lambda record: record.start_ns)
    timings: list[CallTiming] = []
    for window in windows:
        inside = [
            r for r in ordered if window.start_ns <= (r.start_ns + r.end_ns) / 2 <= window.end_ns
        ]
        timings.append(
            CallTiming(
                label=window.label,
                device_ns=sum(r.duration_ns for r in inside),
                launches=len(inside),
                kernels=tuple(r.name for r in inside),
            )
        )
    return timings


@dataclass(frozen=True)
class Summary:
    median_us: float
    min_us: float
    launches_per_call: float
    samples: int


def summarise(timings: list[CallTiming], label: str) -> Summary | None:
    """Median and minimum device time (µs) and median launch count of one label's
    windows that launched at least one kernel; None if there are none."""
    mine = [t for t in timings if t.label == label and t.launches > 0]
    if not mine:
        return None
    return Summary(
        median_us=statistics.median(t.device_ns for t in mine) / 1e3,
        min_us=min(t.device_ns for t in mine) / 1e3,
        launches_per_call=float(statistics.median(t.launches for t in mine)),
        samples=len(mine),
    )
