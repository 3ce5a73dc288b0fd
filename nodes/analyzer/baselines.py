"""Timing the reference kernels, when (and only when) a GPU is present.

The analyzer does not measure anything itself: a GPU job runner does. It is
looked up as `nodes.host_builder.bundle.time_reference_baselines(spec_path,
analysis, run_dir) -> list[BaselineTiming]`; while that hook is absent, or
there is no GPU, or `--no-gpu` was given, the analysis carries no baseline and
says why in one line. Nothing is ever estimated in place of a measurement.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from schemas.reports import BaselineTiming, KernelAnalysis
from toolchain.doctor import check_gpu

BaselineTimer = Callable[[Path, KernelAnalysis, Path], list[BaselineTiming]]

TIMER_MODULE: Final = "nodes.host_builder.bundle"
TIMER_FUNCTION: Final = "time_reference_baselines"


@dataclass(frozen=True)
class BaselineOutcome:
    timings: list[BaselineTiming]
    note: str


def gpu_description() -> str | None:
    """The GPU `nvidia-smi` reports, or None when this machine has none."""
    return check_gpu().version


def find_timer() -> BaselineTimer | None:
    try:
        module = importlib.import_module(TIMER_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != TIMER_MODULE:
            raise
        return None
    timer = getattr(module, TIMER_FUNCTION, None)
    return timer if callable(timer) else None


def time_baselines(
    spec_path: Path,
    analysis: KernelAnalysis,
    run_dir: Path,
    *,
    no_gpu: bool,
    gpu: Callable[[], str | None] = gpu_description,
    timer: Callable[[], BaselineTimer | None] = find_timer,
) -> BaselineOutcome:
    if no_gpu:
        return BaselineOutcome([], "baselines not timed: --no-gpu was given")
    found_gpu = gpu()
    if found_gpu is None:
        return BaselineOutcome(
            [], "baselines not timed: no GPU on this machine (nothing was run on a GPU)"
        )
    run_timer = timer()
    if run_timer is None:
        return BaselineOutcome(
            [],
            f"baselines not timed: a GPU is present ({found_gpu}) but no runner provides "
            f"{TIMER_MODULE}.{TIMER_FUNCTION}",
        )
    timings = run_timer(spec_path, analysis, run_dir)
    return BaselineOutcome(timings, f"{len(timings)} baseline timing(s) on {found_gpu}")
