"""The perf protocol on a GPU: CUPTI device time, L2 flushed before every
repetition, warm-up past the JIT, the port and the reference interleaved (and
torch eager as a third column when given), medians per configuration.

Also the host side of a call: wall-clock per call of the port through the
wrapper, through bare cffi with descriptors built once, and of `ct.launch`,
each enqueued back to back, and per replay of a CUDA graph that captured one
call. Host clocks never decide a verdict; they only show the launch cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.gpu import HostOverhead, TimingColumn
from toolchain.cupti import KernelTimer, Summary, summarise

L2_FLUSH_FACTOR = 2


@dataclass(frozen=True)
class Contender:
    label: str
    call: Callable[[], None]


def l2_flush_buffer(torch: Any, device: Any) -> Any:
    """A buffer larger than the L2 cache; zeroing it evicts whatever a call left there."""
    l2_bytes = int(torch.cuda.get_device_properties(device).L2_cache_size)
    return torch.empty(
        max(l2_bytes * L2_FLUSH_FACTOR, 64 << 20) // 4, dtype=torch.int32, device=device
    )


def measure_config(
    torch: Any,
    timer: KernelTimer,
    config_id: str,
    contenders: list[Contender],
    flush: Any,
    repetitions: int,
    warmup: int,
) -> None:
    """Times every contender `repetitions` times under windows labelled
    `<config_id>:<contender>`; the order rotates every repetition so that none
    always runs first after the flush."""
    for _ in range(warmup):
        for contender in contenders:
            contender.call()
    torch.cuda.synchronize()
    for repetition in range(repetitions):
        shift = repetition % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            flush.zero_()
            with timer.window(f"{config_id}:{contender.label}"):
                contender.call()


def config_summaries(
    timer: KernelTimer, config_id: str, labels: list[str]
) -> dict[str, Summary | None]:
    """Per contender of one configuration: its device-time summary (after `stop`)."""
    timings = timer.timings()
    return {label: summarise(timings, f"{config_id}:{label}") for label in labels}


def column(summary: Summary | None) -> TimingColumn | None:
    if summary is None:
        return None
    return TimingColumn(
        median_us=summary.median_us,
        min_us=summary.min_us,
        launches_per_call=summary.launches_per_call,
        samples=summary.samples,
    )


def host_wall_clock_us(torch: Any, call: Callable[[], None], calls: int) -> float:
    """Host time per call (µs), calls enqueued back to back, after one warm call."""
    call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


# torch's default first; a capture that only a laxer mode accepts says which
# kind of call breaks it (another thread's, or an unsafe one on this thread).
CAPTURE_MODES = ("global", "thread_local", "relaxed")
TRACE_SHOWN = 60


def graph_replay_us(
    torch: Any, call: Callable[[], None], calls: int, notes: list[str], label: str
) -> float:
    """Capture one call into a CUDA graph; host time per replay (µs). Tries the
    capture modes in order and notes the ones the capture failed in."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    failures: list[str] = []
    for mode in CAPTURE_MODES:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, capture_error_mode=mode):
                call()
        except Exception as exc:  # the driver's refusal is the finding
            failures.append(f"{mode}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            torch.cuda.synchronize()
            continue
        if failures:
            notes.append(f"{label}: captured in mode {mode} only; " + "; ".join(failures))
        return host_wall_clock_us(torch, graph.replay, calls)
    notes.append(f"{label}: driver calls of a failed capture: {_failed_capture_trace(torch, call)}")
    raise RuntimeError("no capture mode worked: " + "; ".join(failures))


def _failed_capture_trace(torch: Any, call: Callable[[], None]) -> str:
    """Which driver calls a capture of `call` makes, and which of them fail."""

    def capture() -> None:
        with torch.cuda.graph(torch.cuda.CUDAGraph(), capture_error_mode="relaxed"):
            call()

    return _call_trace(torch, capture)


def host_overhead(
    torch: Any,
    config_id: str,
    calls: int,
    port_wrapper: Callable[[], None],
    port_cffi: Callable[[], None],
    reference: Callable[[], None],
) -> HostOverhead:
    notes: list[str] = []
    measured: dict[str, float | None] = {}
    plans: list[tuple[str, Callable[[], float]]] = [
        ("port_wrapper_us", lambda: host_wall_clock_us(torch, port_wrapper, calls)),
        ("port_cffi_us", lambda: host_wall_clock_us(torch, port_cffi, calls)),
        ("reference_launch_us", lambda: host_wall_clock_us(torch, reference, calls)),
        (
            "port_graph_replay_us",
            lambda: graph_replay_us(torch, port_wrapper, calls, notes, "port"),
        ),
        (
            "reference_graph_replay_us",
            lambda: graph_replay_us(torch, reference, calls, notes, "reference"),
        ),
    ]
    for key, run in plans:
        try:
            measured[key] = run()
        except Exception as exc:  # a capture the driver refuses is a finding, not a crash
            measured[key] = None
            notes.append(f"{key}: {type(exc).__name__}: {exc}")
            torch.cuda.synchronize()
    for label, call in (("port", port_cffi), ("ct.launch", reference)):
        notes.append(f"driver calls of one warm {label} call: {_call_trace(torch, call)}")
    return HostOverhead(config_id=config_id, calls=calls, notes=notes, **measured)


def _call_trace(torch: Any, call: Callable[[], None]) -> str:
    """How many driver calls one call makes, and which (the host cost's anatomy)."""
    from toolchain.cupti import trace_driver_calls

    try:
        calls = trace_driver_calls(call)
    except Exception as exc:  # no CUPTI here: say so instead
        return f"not traced ({type(exc).__name__}: {exc})"
    torch.cuda.synchronize()
    shown = ", ".join(str(c) for c in calls[:TRACE_SHOWN])
    return f"{len(calls)}: {shown}" if calls else "0"
