"""The perf protocol on a GPU: CUPTI device time, L2 flushed before every
repetition, warm-up past the JIT, the port, the reference and the reference
again (the A/A control) interleaved on the same buffers (and torch eager as a
further column when given), each timed call right after an untimed call of its
own, rounds added per configuration until every compared median's bootstrap
95 % interval is within ±0.5 % or a cap is reached
(`nodes.perf_validator.bootstrap`); per configuration and side, the median of
cycle means (a cycle: one round from each of the side's modules;
`schemas.gpu.Estimator` says why).

Also the host side of a call: wall-clock per call of the port through the
wrapper, through bare cffi with descriptors built once, and of `ct.launch`,
each enqueued back to back in interleaved rounds, and per replay of a CUDA graph
that captured one call. Host clocks never decide a device-time verdict.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodes.perf_validator.bootstrap import (
    CONFIDENCE,
    MIN_SAMPLES,
    RESAMPLES,
    SamplingDecision,
    SamplingPolicy,
    geomean_interval,
    median_interval,
    next_rounds,
    ratio_interval,
)
from schemas.gpu import (
    COMPARED_CONTENDERS,
    MEDIAN_OF_CYCLE_MEANS,
    GpuRunReport,
    HostOverhead,
    PerfDetail,
    TimingColumn,
    cycle_means,
    placement_mismatches,
)
from toolchain.cupti import KernelTimer, Summary, summarise

L2_FLUSH_FACTOR = 2


@dataclass(frozen=True)
class Contender:
    """One timed side: its call, the buffers (data_ptr by array) that call uses, and
    the same call with its code loaded into other modules (`elsewhere`): where a
    module lands in device memory moves a microsecond kernel's time by several per
    cent (seen on the H200: one cubin at 0.92 to 1.06 of itself), so a side is timed
    across modules of its own, rotated by round (`placed`), as it is on one set of
    buffers."""

    label: str
    call: Callable[[], None]
    buffers: dict[str, list[int]] = field(default_factory=dict)
    elsewhere: tuple[Callable[[], None], ...] = ()

    @property
    def placements(self) -> int:
        return 1 + len(self.elsewhere)

    def placed(self, placement: int) -> Callable[[], None]:
        """The call from module `placement` (0: `call`'s), counted round its modules."""
        return (self.call, *self.elsewhere)[placement % self.placements]


DEFAULT_PLACEMENTS = 8
"""The modules each timed side rotates through: with one module per side, a
configuration's ratio on a microsecond kernel is as much where two modules landed
as the code (the H200 showed 0.92 to 1.06 for one cubin); over eight each, the
spread of the ratio from placement alone shrinks about threefold."""

L2_FLUSH_METHODS = ("kernel", "copy")
"""How the L2 is flushed before each timed call (`L2Flush`); `kernel` by default."""


@dataclass
class L2Flush:
    """What runs between a contender's untimed and timed call. `kernel` zeroes a buffer
    larger than the L2 (torch's fill kernel: every line evicted, and SM code of its own
    run in between); `copy` copies one such buffer onto another (the copy engines:
    every line evicted, no SM code run)."""

    method: str
    buffers: tuple[Any, ...]

    def __call__(self) -> None:
        if self.method == "kernel":
            self.buffers[0].zero_()
        else:
            self.buffers[1].copy_(self.buffers[0])

    @property
    def bytes(self) -> int:
        return int(self.buffers[0].numel() * self.buffers[0].element_size())


def l2_flush(torch: Any, device: Any, method: str = "kernel") -> L2Flush:
    """The flush of `method` (L2_FLUSH_METHODS) with its buffers, each larger than the
    L2 cache."""
    if method not in L2_FLUSH_METHODS:
        raise ValueError(f"unknown L2 flush {method!r}: one of {', '.join(L2_FLUSH_METHODS)}")
    l2_bytes = int(torch.cuda.get_device_properties(device).L2_cache_size)
    words = max(l2_bytes * L2_FLUSH_FACTOR, 64 << 20) // 4
    count = 1 if method == "kernel" else 2
    return L2Flush(
        method,
        tuple(torch.zeros(words, dtype=torch.int32, device=device) for _ in range(count)),
    )


def round_order(contenders: list[Contender], round_index: int) -> list[Contender]:
    """The contenders of one round, rotated by the round's index so that over any
    `len(contenders)` consecutive rounds each runs first (right after the flush),
    second, ... exactly once."""
    shift = round_index % len(contenders)
    return contenders[shift:] + contenders[:shift]


def window_label(config_id: str, contender: str, placement: int | None = None) -> str:
    """`<config_id>:<contender>`, and `@<placement>` for a side timed across modules
    (`toolchain.cupti.summarise` pools a contender's placements)."""
    label = f"{config_id}:{contender}"
    return label if placement is None else f"{label}@{placement}"


def compared_estimates(
    timer: KernelTimer, config_id: str, contenders: list[Contender]
) -> dict[str, list[float]]:
    """The values so far whose medians enter a ratio (`schemas.gpu.cycle_means` of each
    compared contender's device-time samples), by contender."""
    timings = timer.timings()
    found: dict[str, list[float]] = {}
    for contender in contenders:
        if contender.label in COMPARED_CONTENDERS:
            summary = summarise(timings, window_label(config_id, contender.label))
            found[contender.label] = (
                cycle_means(summary.device_us, summary.placements) if summary else []
            )
    return found


def measure_config(
    torch: Any,
    timer: KernelTimer,
    config_id: str,
    contenders: list[Contender],
    flush: Callable[[], None],
    policy: SamplingPolicy,
    warmup: int,
) -> tuple[int, SamplingDecision]:
    """Times every contender under windows labelled `<config_id>:<contender>` (and
    `@<placement>` when the sides rotate through modules), in interleaved rounds, each
    timed call after an untimed one of the same contender from the same module and
    the L2 flush, until `next_rounds` says every compared median is known to the
    policy's target or the cap is reached. With P placements, round r runs every side
    from its module r mod P and rounds come in whole cycles of P (each module as
    often as the others); the order of the sides rotates once per cycle
    (`round_order`), so over P x sides rounds each module of each side runs in each
    position once. The stopping rule counts cycles and judges their means, as the
    figures do (`SamplingPolicy.in_cycles`). Returns the rounds run and the last
    decision."""
    if placement_mismatches({c.label: c.buffers for c in contenders}):
        raise ValueError(f"{config_id}: the contenders do not share their buffers")
    placements = max(c.placements for c in contenders)
    per_cycle = policy.in_cycles(placements)
    for _ in range(warmup):
        for contender in contenders:
            for placement in range(contender.placements):
                contender.placed(placement)()
    torch.cuda.synchronize()
    rounds = 0
    while True:
        timer.flush()
        decision = next_rounds(compared_estimates(timer, config_id, contenders), per_cycle)
        if decision.more == 0:
            return rounds, decision
        more = decision.more * placements
        for round_index in range(rounds, rounds + more):
            placement = round_index % placements
            for contender in round_order(contenders, round_index // placements):
                call = contender.placed(placement)
                # Untimed first: a call runs faster right after a call of the same
                # code, L2 flushed or not (seen on the H200: 6.5 against 17 us), and
                # the reference and its control are the same code. Each timed call
                # follows its own, so no side gains from its neighbour.
                call()
                flush()
                label = contender.label
                with timer.window(
                    window_label(config_id, label, placement if placements > 1 else None)
                ):
                    call()
        rounds += more


def config_summaries(
    timer: KernelTimer, config_id: str, labels: list[str]
) -> dict[str, Summary | None]:
    """Per contender of one configuration: its device-time summary (after `stop`)."""
    timings = timer.timings()
    return {label: summarise(timings, window_label(config_id, label)) for label in labels}


def column(summary: Summary | None, policy: SamplingPolicy) -> TimingColumn | None:
    if summary is None:
        return None
    return estimated_column(
        summary.device_us,
        summary.placements,
        launches_per_call=summary.launches_per_call,
        kernels=summary.kernels,
        launch=[dict(attributes) for attributes in summary.launch],
        policy=policy,
    )


def estimated_column(
    samples_us: Sequence[float],
    placements: Sequence[int],
    *,
    launches_per_call: float,
    kernels: Sequence[str],
    launch: list[dict[str, int]],
    policy: SamplingPolicy,
) -> TimingColumn:
    """A side's column from its samples (in the order taken) under the protocol's
    estimator, the median of cycle means (`schemas.gpu.Estimator`)."""
    estimates = cycle_means(samples_us, placements)
    interval = median_interval(
        estimates, confidence=policy.confidence, resamples=policy.resamples, seed=policy.seed
    )
    return TimingColumn(
        median_us=statistics.median(estimates),
        min_us=min(samples_us),
        launches_per_call=launches_per_call,
        samples=len(samples_us),
        median_interval_us=(interval.low, interval.high),
        samples_us=list(samples_us),
        kernels=list(kernels),
        launch=launch,
        sample_placements=list(placements),
        estimator=MEDIAN_OF_CYCLE_MEANS,
    )


def perf_detail(
    config_id: str,
    summaries: dict[str, Summary | None],
    buffers: dict[str, dict[str, list[int]]],
    rounds: int,
    decision: SamplingDecision,
    policy: SamplingPolicy,
) -> PerfDetail | None:
    """One configuration's columns with its intervals (`judged_detail`); None without
    port or reference."""
    columns = {label: column(summary, policy) for label, summary in summaries.items()}
    return judged_detail(config_id, columns, buffers, rounds, decision.cap_hit, policy)


def judged_detail(
    config_id: str,
    columns: Mapping[str, TimingColumn | None],
    buffers: dict[str, dict[str, list[int]]],
    rounds: int | None,
    cap_hit: bool,
    policy: SamplingPolicy,
) -> PerfDetail | None:
    """One configuration's columns with their intervals: port / reference, the A/A band
    (control / reference) it is judged against, and relocated / reference and
    port_relocated / reference (the placement controls); None without port or
    reference."""
    port, reference = columns.get("port"), columns.get("reference")
    if port is None or reference is None:
        return None
    control = columns.get("control")
    relocated, port_relocated = columns.get("relocated"), columns.get("port_relocated")
    bottom = reference.estimate_samples_us()

    def band(top: TimingColumn) -> tuple[float, float]:
        found = ratio_interval(
            top.estimate_samples_us(),
            bottom,
            confidence=policy.confidence,
            resamples=policy.resamples,
            seed=policy.seed,
        )
        return found.low, found.high

    def aa_band(top: TimingColumn) -> tuple[float, float]:
        """The A/A interval widened by the estimator's resolution (relative to the
        reference's figure): a difference under one step of it is not resolved,
        whatever the intervals say."""
        low, high = band(top)
        steps = [*bottom, *top.estimate_samples_us()]
        step = timer_tick_us(steps) / reference.median_us
        return low - step, high + step

    return PerfDetail(
        config_id=config_id,
        port=port,
        reference=reference,
        torch=columns.get("torch"),
        control=control,
        relocated=relocated,
        port_relocated=port_relocated,
        rounds=rounds,
        cap_hit=cap_hit,
        ratio_interval=band(port),
        aa_band=aa_band(control) if control is not None else None,
        relocated_interval=band(relocated) if relocated is not None else None,
        port_relocated_interval=band(port_relocated) if port_relocated is not None else None,
        buffers=buffers,
    )


ANALYSIS_POLICY = SamplingPolicy(minimum=MIN_SAMPLES, cap=MIN_SAMPLES)
"""The intervals' confidence, resamples and seed when a finished run is judged again
(its rounds are fixed by then)."""


def reestimated(detail: PerfDetail, policy: SamplingPolicy = ANALYSIS_POLICY) -> PerfDetail:
    """The configuration judged again from its kept samples under the protocol's
    estimator, so that runs from before a change of estimator are read as today's
    are; as it was when it kept no samples."""
    labels = ("torch", *COMPARED_CONTENDERS)
    kept: dict[str, TimingColumn | None] = {label: getattr(detail, label) for label in labels}
    if any(found is not None and not found.samples_us for found in kept.values()):
        return detail
    columns = {
        label: None
        if found is None
        else estimated_column(
            found.samples_us,
            found.sample_placements,
            launches_per_call=found.launches_per_call,
            kernels=found.kernels,
            launch=found.launch,
            policy=policy,
        )
        for label, found in kept.items()
    }
    judged = judged_detail(
        detail.config_id, columns, detail.buffers, detail.rounds, detail.cap_hit, policy
    )
    assert judged is not None  # port and reference were kept
    return judged


def reestimated_run(run: GpuRunReport) -> GpuRunReport:
    """The run with every configuration `reestimated`."""
    return run.model_copy(update={"perf": [reestimated(detail) for detail in run.perf]})


def timer_tick_us(samples: list[float]) -> float:
    """The timer's resolution as the samples show it: the smallest gap between two
    distinct values (0 when all are equal)."""
    values = sorted(set(samples))
    return min((b - a for a, b in itertools.pairwise(values)), default=0.0)


def geomean_band(
    columns: list[tuple[TimingColumn, TimingColumn]],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """The bootstrap interval of the geomean of port / reference over (port, reference)
    columns, all resampled together; None without columns, or when one kept no samples
    (a run from before samples were kept)."""
    pairs = [
        (port.estimate_samples_us(), reference.estimate_samples_us()) for port, reference in columns
    ]
    if not pairs or not all(top and bottom for top, bottom in pairs):
        return None
    found = geomean_interval(pairs, confidence, resamples, seed)
    return found.low, found.high


HOST_ROUNDS = 30


def interleaved_rounds_us(
    torch: Any, calls: dict[str, Callable[[], None]], per_call: int, rounds: int = HOST_ROUNDS
) -> dict[str, list[float]]:
    """Host time per call (µs) of each side in each of `rounds` rounds, in which every
    side enqueues `per_call // rounds` calls back to back, the order rotated each
    round: host clocks drift within a run by more than the sides differ, so sides
    timed one after the other would compare moments as well as launches."""
    batch = max(per_call // rounds, 1)
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    labels = list(calls)
    taken: dict[str, list[float]] = {label: [] for label in labels}
    for round_index in range(rounds):
        shift = round_index % len(labels)
        for label in labels[shift:] + labels[:shift]:
            call = calls[label]
            start = time.perf_counter()
            for _ in range(batch):
                call()
            taken[label].append((time.perf_counter() - start) / batch * 1e6)
            torch.cuda.synchronize()
    return taken


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
    port_parts: dict[str, Callable[[], None]] | None = None,
) -> HostOverhead:
    """Host time per call of the wrapper, the bare cffi call and `ct.launch`, interleaved
    (each side's median round, and every round kept), with `port_parts` (HostOverhead's
    `port_key_us`, `port_c_call_us`: where the wrapper's time goes) among them; then
    each side's CUDA graph replay and the driver calls of one warm call of each."""
    notes: list[str] = []
    measured: dict[str, float | None] = {}
    eager = {
        "port_wrapper_us": port_wrapper,
        "port_cffi_us": port_cffi,
        "reference_launch_us": reference,
        **(port_parts or {}),
    }
    rounds: dict[str, list[float]] = {}
    try:
        rounds = interleaved_rounds_us(torch, eager, calls)
        measured.update({label: statistics.median(taken) for label, taken in rounds.items()})
    except Exception as exc:  # a refused call is a finding, not a crash
        notes.append(f"eager calls: {type(exc).__name__}: {exc}")
        torch.cuda.synchronize()
    plans: list[tuple[str, Callable[[], float]]] = [
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
    return HostOverhead(config_id=config_id, calls=calls, notes=notes, rounds_us=rounds, **measured)


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
