"""Bootstrap intervals of medians, ratios and geomeans, and how many repetitions a
configuration needs; pure functions over device-time samples (µs), standard
library only (the GPU runner carries this module).

A bootstrap replicate of a median is drawn without building the resample: the
i-th smallest of n indices drawn uniformly from 0..n-1 is floor(n * U_(i)),
where U_(i), the i-th smallest of n uniforms, follows Beta(i, n - i + 1). So the
median of a resample of sorted samples is one (n odd) or two (n even) of its
order statistics, found from one or two beta variates instead of n draws and a
sort. Every function takes a seed: the same samples give the same interval.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

CONFIDENCE = 0.95
TARGET_HALF_WIDTH = 0.005
"""A median is known well enough once its 95 % interval is within ±0.5 % of it."""
RESAMPLES = 2000
MIN_SAMPLES = 5
"""Fewer samples than this say nothing about their own spread."""


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def relative_half_width(self, centre: float) -> float:
        """Half the interval's width relative to `centre` (infinite for a centre <= 0)."""
        if centre <= 0:
            return math.inf
        return (self.high - self.low) / 2 / centre


class _MedianSampler:
    """Draws bootstrap replicates of the median of fixed samples."""

    def __init__(self, samples: Sequence[float]) -> None:
        if not samples:
            raise ValueError("no samples to bootstrap")
        self.ordered = sorted(samples)

    def draw(self, rng: random.Random) -> float:
        ordered = self.ordered
        n = len(ordered)
        if n == 1:
            return ordered[0]
        k = (n + 1) // 2 if n % 2 else n // 2
        lower = rng.betavariate(k, n - k + 1)
        if n % 2:
            return ordered[min(int(n * lower), n - 1)]
        # The next order statistic: the least of the n - k uniforms above `lower`.
        upper = lower + (1 - lower) * rng.betavariate(1, n - k)
        return (ordered[min(int(n * lower), n - 1)] + ordered[min(int(n * upper), n - 1)]) / 2


def _percentile_interval(replicates: list[float], confidence: float) -> Interval:
    ordered = sorted(replicates)
    tail = (1 - confidence) / 2
    last = len(ordered) - 1
    return Interval(ordered[round(tail * last)], ordered[round((1 - tail) * last)])


def median_replicates(samples: Sequence[float], resamples: int, seed: int) -> list[float]:
    sampler = _MedianSampler(samples)
    rng = random.Random(seed)
    return [sampler.draw(rng) for _ in range(resamples)]


def median_interval(
    samples: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The bootstrap percentile interval of the samples' median."""
    return _percentile_interval(median_replicates(samples, resamples, seed), confidence)


def ratio_interval(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The bootstrap interval of median(numerator) / median(denominator), each side
    resampled on its own."""
    return geomean_interval([(numerator, denominator)], confidence, resamples, seed)


def geomean_interval(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The bootstrap interval of the geomean over configurations of median(port) /
    median(reference): each replicate resamples every configuration's two sides."""
    if not pairs:
        raise ValueError("no configurations to bootstrap")
    samplers = [(_MedianSampler(top), _MedianSampler(bottom)) for top, bottom in pairs]
    rng = random.Random(seed)
    replicates = []
    for _ in range(resamples):
        logs = [math.log(top.draw(rng) / bottom.draw(rng)) for top, bottom in samplers]
        replicates.append(math.exp(statistics.fmean(logs)))
    return _percentile_interval(replicates, confidence)


# --- how many repetitions ------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingPolicy:
    """Repetitions of one configuration: at least `minimum` rounds, then more until
    every median's interval is within `target` (relative half-width), at most `cap`."""

    minimum: int
    cap: int
    target: float = TARGET_HALF_WIDTH
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    seed: int = 0

    def __post_init__(self) -> None:
        if self.minimum < MIN_SAMPLES:
            raise ValueError(f"a policy needs at least {MIN_SAMPLES} rounds, got {self.minimum}")
        if self.cap < self.minimum:
            raise ValueError(f"cap {self.cap} is below the minimum {self.minimum}")
        if not 0 < self.target < 1:
            raise ValueError(f"target half-width {self.target} is not a fraction")

    def in_cycles(self, placements: int) -> SamplingPolicy:
        """The policy counted in cycles of `placements` rounds (one per module) instead
        of rounds: the minimum rounded up, never under MIN_SAMPLES cycles, the cap
        rounded down, never under the minimum."""
        if placements < 1:
            raise ValueError(f"a cycle has at least one round, got {placements}")
        minimum = max(MIN_SAMPLES, -(-self.minimum // placements))
        return replace(self, minimum=minimum, cap=max(minimum, self.cap // placements))


@dataclass(frozen=True)
class SamplingDecision:
    more: int
    """Rounds still to run; 0: stop."""
    half_widths: dict[str, float]
    """Each median's relative half-width so far (infinite before `minimum` rounds)."""
    converged: bool
    """Every median is within the target."""
    cap_hit: bool
    """Stopped at the cap with some median still outside the target."""


def next_rounds(samples: Mapping[str, Sequence[float]], policy: SamplingPolicy) -> SamplingDecision:
    """Whether the samples so far (by contender) pin every median down to the target,
    and otherwise how many more rounds to run: as many as the widest interval needs
    if its width falls as one over the square root of the count, never fewer than
    the minimum (each check costs a bootstrap) and never past the cap."""
    if not samples:
        raise ValueError("no contenders")
    count = min(len(values) for values in samples.values())
    if count < policy.minimum:
        widths = dict.fromkeys(samples, math.inf)
        return SamplingDecision(policy.minimum - count, widths, False, False)
    widths = {
        label: median_interval(
            values,
            confidence=policy.confidence,
            resamples=policy.resamples,
            seed=policy.seed,
        ).relative_half_width(statistics.median(values))
        for label, values in samples.items()
    }
    widest = max(widths.values())
    if widest <= policy.target:
        return SamplingDecision(0, widths, True, False)
    if count >= policy.cap:
        return SamplingDecision(0, widths, False, True)
    needed = math.inf if math.isinf(widest) else math.ceil(count * (widest / policy.target) ** 2)
    more = min(policy.cap - count, max(needed - count, policy.minimum))
    return SamplingDecision(int(more), widths, False, False)
