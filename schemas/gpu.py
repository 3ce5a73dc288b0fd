"""What crosses the host/GPU boundary: the library manifest, the GPU job bundle's
manifest, and the detailed report of a GPU run.

The verdict-bearing reports are `schemas.reports.CorrectnessReport` and
`schemas.reports.PerfReport` (shared with the final gate); a GPU run writes
them, and beside them a `GpuRunReport` with everything a person needs to
trust the numbers: seeds, shapes and errors per case, the per-configuration
timings with the torch column, launch counts, host overhead per call, the
machine and the toolchain. This module imports only pydantic and the
standard library, so the GPU runner can carry it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Annotated, ClassVar, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

LIBRARY_FILE = "libtileport_kernels.so"
WRAPPER_MODULE = "tileport_kernels"
# The wrapper's optional compiled reader of tensor facts: its source, beside the wrapper.
TENSOR_FACTS_SOURCE = "tileport_tensor_facts.cpp"
RESULT_FILES = ("correctness.json", "perf.json", "gpu_run.json", "summary.md")
"""What `tileport gpu-run` writes into its result folder."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _ordered(band: tuple[float, float]) -> tuple[float, float]:
    low, high = band
    if not 0 < low <= high:
        raise ValueError(f"an interval runs from a positive low to a high at least as big: {band}")
    return band


Band = Annotated[tuple[float, float], AfterValidator(_ordered)]
"""A bootstrap 95 % interval (low, high)."""


def outside_band(ratio: float, band: Band | None, ratio_interval: Band | None = None) -> bool:
    """A port/reference ratio outside the A/A control's band (the rule of every
    verdict, book and report): the ratio's interval, where it has one, does not reach
    the band at all; no band, no judgement."""
    if band is None:
        return False
    low, high = ratio_interval or (ratio, ratio)
    return high < band[0] or low > band[1]


def band_text(band: Band | None) -> str:
    """An interval as every report prints it after its figure: " (low to high)", or
    nothing without one."""
    return "" if band is None else f" ({band[0]:.4f} to {band[1]:.4f})"


COMPARED_CONTENDERS = ("port", "reference", "control", "relocated", "port_relocated")
"""The timed sides whose medians enter a ratio: they must share every buffer."""


def placement_mismatches(buffers: Mapping[str, Mapping[str, list[int]]]) -> list[str]:
    """Where two compared contenders (by label: array name -> data_ptr of the array, or
    of each element of a list) were timed on different buffers: one line per array
    they both pass at different addresses; none when the comparison is fair."""
    compared = {label: found for label, found in buffers.items() if label in COMPARED_CONTENDERS}
    problems = []
    for name in dict.fromkeys(name for found in compared.values() for name in found):
        seen = {label: found[name] for label, found in compared.items() if name in found}
        if len({tuple(addresses) for addresses in seen.values()}) > 1:
            shown = ", ".join(
                f"{label} at {', '.join(hex(address) for address in addresses)}"
                for label, addresses in seen.items()
            )
            problems.append(f"`{name}`: {shown}")
    return problems


# --- the aggregated library ---------------------------------------------------------------


class LibraryScalar(_Strict):
    name: str
    dtype: str


class LibraryDim(_Strict):
    """An extent of an array parameter: binds a dimension symbol, or must equal one
    (or an expression the C side checks)."""

    binds: str | None = None
    equals: str | None = None


class LibraryArray(_Strict):
    name: str
    rank: int = Field(ge=1)
    dtypes: list[str] = Field(min_length=1, description="Dtypes the port takes.")
    spec_dtypes: list[str] = Field(min_length=1, description="Dtypes the spec allows.")
    unit_stride_dim: int | None = None
    dims: list[LibraryDim]
    list_length: str | None = Field(
        None,
        description="For a list of arrays: the symbol its length binds (or the expression "
        "it must equal); `rank`, `dims` and the dtypes are its elements'.",
    )


class LiteralDispatch(_Strict):
    """An entry the kernel writer specialised to literal constants (a variant can have
    several): the launcher takes it when the call's constants are exactly these."""

    entry: str
    variant: str
    constants: dict[str, int]


class LibraryOperator(_Strict):
    """One operator of the aggregated library and where its sources are."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    spec: str = Field(
        description="Port spec, relative to the repository root; absolute for an operator "
        "a run's workspace binds from a spec outside it (the run's input folder)."
    )
    kernel: str = Field(description="Kernel source, relative to the crate's src/.")
    rust_module_path: str = Field(description="e.g. crate::softmax::softmax_port")
    entries: dict[str, str] | None = Field(
        None, description="variant -> Rust entry, when the kernel writer named them."
    )
    literal_entries: list[LiteralDispatch] | None = Field(
        None,
        description="Entries specialised to literal constants; they replace `entries` "
        "for their variants.",
    )
    arrays: list[LibraryArray] = Field(min_length=1)
    scalars: list[LibraryScalar] = Field(default_factory=list)

    @property
    def symbol(self) -> str:
        return f"cutile_{self.name}"


class LibraryManifest(_Strict):
    """`src/ffi/operators.json` of a library crate (the checkout's `kernels_rs/ported`,
    or a run's workspace copy of it): the operators the library exports."""

    abi_version: int
    operators: list[LibraryOperator] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        names = [op.name for op in self.operators]
        if len(names) != len(set(names)):
            raise ValueError(f"operator listed twice: {names}")
        return self

    def with_operator(self, operator: LibraryOperator) -> LibraryManifest:
        """The manifest with `operator` added, or replacing the one of the same name."""
        kept = [op for op in self.operators if op.name != operator.name]
        ordered = sorted([*kept, operator], key=lambda op: op.name)
        return LibraryManifest(abi_version=self.abi_version, operators=ordered)

    def operator(self, name: str) -> LibraryOperator:
        for op in self.operators:
            if op.name == name:
                return op
        raise KeyError(name)


# --- the GPU job bundle ------------------------------------------------------------------


class BundleFile(_Strict):
    path: str = Field(description="Relative to the bundle root.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class BundleManifest(_Strict):
    """`manifest.json` of a GPU job bundle: what to run and with what."""

    bundle_version: Literal[1] = 1
    operator: str
    symbol: str
    run_id: str = Field(min_length=1)
    attempt: int = Field(1, ge=1)
    spec: str = Field(description="The port spec, relative to the bundle root.")
    reference_source: str = Field(description="The reference kernel source.")
    kernel_parameters: list[str] = Field(
        min_length=1, description="The reference kernel's parameters, in order."
    )
    reference_module: str | None = Field(None, description="The correctness reference module.")
    torch_equivalent: str | None = Field(
        None,
        description="`module:function` (beside the spec) timed as the torch eager column; "
        "called like the correctness reference. None: no torch column.",
    )
    library: str
    wrapper: str
    files: list[BundleFile]
    built_on: dict[str, str] = Field(description="glibc, host, crate versions, cdef fingerprint.")
    seeds: list[int] = Field(min_length=2)
    perf_repetitions: int = Field(
        ge=5, description="Rounds of every configuration before its medians are judged."
    )
    perf_max_repetitions: int | None = Field(
        None,
        ge=5,
        description="The most rounds a configuration gets while a median's 95 % interval "
        "is wider than ±0.5 %; None: exactly perf_repetitions.",
    )
    perf_warmup: int = Field(ge=1)
    time_all_configs: bool = Field(
        False,
        description="Time every configuration, the test ones too; False: the spec's perf "
        "configurations (its test ones when it has none).",
    )

    @model_validator(mode="after")
    def _cap_above_the_minimum(self) -> Self:
        cap = self.perf_max_repetitions
        if cap is not None and cap < self.perf_repetitions:
            raise ValueError(f"perf_max_repetitions {cap} < perf_repetitions")
        return self


# --- what a GPU run found ----------------------------------------------------------------


class GpuEnvironment(_Strict):
    gpu: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    clocks: dict[str, str] = Field(default_factory=dict)
    l2_bytes: int | None = None
    num_sms: int | None = None
    versions: dict[str, str] = Field(default_factory=dict, description="python, torch, ...")
    missing: list[str] = Field(default_factory=list, description="What kept the run off a GPU.")


class CaseDetail(_Strict):
    """One correctness case beyond what `CorrectnessCase` keeps."""

    config_id: str
    seed: int
    ragged: bool = Field(description="Some extent is not a multiple of 16.")
    poisoned_outputs: list[str]
    port_status: int | None = Field(None, description="The C status when the call failed.")
    matches_reference_kernel: bool | None = Field(
        None, description="Bitwise equal to the cuTile Python kernel's output."
    )
    reference_reproducible: bool | None = Field(
        None,
        description="Where the port's output differs from the kernel's: whether the kernel, "
        "launched again on the same inputs, gives its own output again (False: its result "
        "depends on the run, e.g. colliding writes, and no bitwise comparison can hold).",
    )


Estimator = Literal["median", "median_of_cycle_means"]
"""How a column's figure comes from its samples: `median`, the samples' median (runs
from before 2026-12-04), or `median_of_cycle_means`, the median over cycles of the
mean of each cycle's samples, a cycle being one round from each of the side's
modules (one sample from one module). Device timestamps advance in ticks (32 ns on
the H200, 2.6 % of a 1.2 us kernel), so a median of samples moves only in whole
ticks, while the mean of a cycle's eight samples, started at random phases of the
tick, resolves an eighth of one; and a cycle's mean weighs every module alike, as
the protocol means each side to be judged."""
MEDIAN: Estimator = "median"
MEDIAN_OF_CYCLE_MEANS: Estimator = "median_of_cycle_means"


def samples_by_module(
    samples: Iterable[float], placements: Iterable[int]
) -> dict[int, list[float]]:
    """Samples by the module each ran from (`placements`, one per sample), in module
    order; empty when there are no placements (one module)."""
    placements = list(placements)
    found: dict[int, list[float]] = {}
    if not placements:
        return found
    for placement, sample in zip(placements, samples, strict=True):
        found.setdefault(placement, []).append(sample)
    return dict(sorted(found.items()))


def cycle_means(samples: Iterable[float], placements: Iterable[int]) -> list[float]:
    """The mean of each cycle's samples: the k-th cycle takes the k-th sample of every
    module (as many cycles as the module with fewest samples has); the samples
    themselves when they came from one module (`placements` empty)."""
    samples = list(samples)
    modules = list(samples_by_module(samples, placements).values())
    if not modules:
        return samples
    cycles = min(len(found) for found in modules)
    return [statistics.fmean(found[k] for found in modules) for k in range(cycles)]


class TimingColumn(_Strict):
    median_us: float = Field(
        gt=0, description="The figure compared: the median of `estimate_samples_us()`."
    )
    min_us: float = Field(gt=0)
    launches_per_call: float = Field(ge=0)
    samples: int = Field(ge=1)
    median_interval_us: Band | None = Field(
        None, description="The bootstrap 95 % interval of the median."
    )
    samples_us: list[float] = Field(
        default_factory=list,
        description="Every sample (µs) in the order taken, for the intervals of a book; "
        "empty in runs that did not keep them.",
    )
    kernels: list[str] = Field(
        default_factory=list,
        description="The kernels one call launched, as CUPTI names them (a cuTile Python "
        "entry symbol encodes every fact its launch specialised on); empty in runs that "
        "did not record them.",
    )
    launch: list[dict[str, int]] = Field(
        default_factory=list,
        description="Per kernel of `kernels`: how CUPTI saw it launched (grid, block, "
        "cluster, registers, shared memory and its carve-out, cache configuration; "
        "toolchain.cupti.LAUNCH_FIELDS); empty in runs that did not record it.",
    )
    sample_placements: list[int] = Field(
        default_factory=list,
        description="Per kept sample, the module it ran from (the side's code loaded once "
        "per module, rotated by round); empty when the side ran from one module.",
    )
    estimator: Estimator = Field(
        MEDIAN,
        description="How `median_us` comes from the kept samples (schemas.gpu.Estimator).",
    )

    def estimate_samples_us(self) -> list[float]:
        """The values whose median is `median_us` and whose bootstrap gives its interval:
        the kept samples' cycle means, or the samples themselves (`estimator`)."""
        if self.estimator == MEDIAN:
            return list(self.samples_us)
        return cycle_means(self.samples_us, self.sample_placements)

    def placement_samples(self) -> dict[int, list[float]]:
        """The kept samples by module, in module order; empty when from one module."""
        return samples_by_module(self.samples_us, self.sample_placements)

    @model_validator(mode="after")
    def _figures_match_the_samples(self) -> Self:
        kept = self.samples_us
        if self.sample_placements and len(self.sample_placements) != len(kept):
            raise ValueError(f"{len(self.sample_placements)} placements for {len(kept)} samples")
        if not kept:
            return self
        if len(kept) != self.samples:
            raise ValueError(f"{len(kept)} samples kept, {self.samples} counted")
        estimate = statistics.median(self.estimate_samples_us())
        if not math.isclose(estimate, self.median_us) or min(kept) != self.min_us:
            raise ValueError(
                f"median_us and min_us are not the kept samples' {self.estimator} and minimum"
            )
        return self


class PerfDetail(_Strict):
    config_id: str
    port: TimingColumn
    reference: TimingColumn
    torch: TimingColumn | None = None
    control: TimingColumn | None = Field(
        None,
        description="The reference timed a second time as its own contender (an A/A "
        "control): control / reference shows the protocol's noise. In a run across "
        "modules, from modules of its own.",
    )
    relocated: TimingColumn | None = Field(
        None,
        description="Runs from one module per side: the reference's code loaded into a "
        "second module and timed as its own contender (the placement control): "
        "relocated / reference shows what moving the same code elsewhere in device "
        "memory does.",
    )
    rounds: int | None = Field(
        None, ge=1, description="Interleaved rounds run (each contender once per round)."
    )
    cap_hit: bool = Field(
        False,
        description="The rounds stopped at the cap with a median's interval still wider "
        "than the target.",
    )
    ratio_interval: Band | None = Field(
        None, description="The bootstrap 95 % interval of port / reference."
    )
    aa_band: Band | None = Field(
        None,
        description="The bootstrap 95 % interval of control / reference: the ratios two "
        "identical kernels give on this configuration.",
    )
    relocated_interval: Band | None = Field(
        None, description="The bootstrap 95 % interval of relocated / reference."
    )
    port_relocated: TimingColumn | None = Field(
        None,
        description="Runs from one module per side: the port's code loaded into a second "
        "module (its library loaded "
        "again) and timed as its own contender: port_relocated / reference against "
        "port / reference shows whether the port's time follows its module.",
    )
    port_relocated_interval: Band | None = Field(
        None, description="The bootstrap 95 % interval of port_relocated / reference."
    )
    buffers: dict[str, dict[str, list[int]]] = Field(
        default_factory=dict,
        description="Per timed side, the data_ptr of each array it was timed on (torch "
        "eager: its inputs; it allocates its outputs per call).",
    )

    def _over_reference(self, column: TimingColumn | None) -> float | None:
        return None if column is None else column.median_us / self.reference.median_us

    @property
    def control_ratio(self) -> float | None:
        return self._over_reference(self.control)

    @property
    def ratio(self) -> float:
        return self.port.median_us / self.reference.median_us

    @property
    def outside_aa_band(self) -> bool:
        """Port / reference lies where two identical kernels do not: stage F's case."""
        return outside_band(self.ratio, self.aa_band, self.ratio_interval)

    @property
    def relocated_ratio(self) -> float | None:
        return self._over_reference(self.relocated)

    @property
    def port_relocated_ratio(self) -> float | None:
        return self._over_reference(self.port_relocated)

    @property
    def port_follows_its_module(self) -> bool:
        """The port's code in a second module lands apart from the port: the intervals
        of port_relocated / reference and port / reference do not meet."""
        if self.port_relocated_ratio is None or self.port_relocated_interval is None:
            return False
        return outside_band(
            self.port_relocated_ratio, self.ratio_interval, self.port_relocated_interval
        )

    @property
    def placements(self) -> int:
        """The modules each side was timed from (1: one module per side)."""
        return max(1, len(self.port.placement_samples()))

    def module_range(self, *columns: TimingColumn | None) -> Band | None:
        """The lowest and highest median of one module's samples over the columns'
        modules, each over the reference's median; None from one module per side."""
        medians = [
            statistics.median(found) / self.reference.median_us
            for found in _module_samples(columns)
        ]
        return (min(medians), max(medians)) if len(medians) > 1 else None

    @property
    def reference_code_modules(self) -> list[list[float]]:
        """Each module's samples of the reference's code: its modules and the control's."""
        return _module_samples((self.reference, self.control))

    @property
    def reference_code_range(self) -> Band | None:
        """`module_range` of the reference's code."""
        return self.module_range(self.reference, self.control)

    @property
    def port_code_range(self) -> Band | None:
        return self.module_range(self.port)

    @property
    def placement_moves(self) -> bool:
        """The reference's own code, loaded a second time, leaves the A/A band: where a
        module's code sits moves this configuration's time."""
        if self.relocated_ratio is None:
            return False
        return outside_band(self.relocated_ratio, self.aa_band, self.relocated_interval)

    @model_validator(mode="after")
    def _compared_on_the_same_buffers(self) -> Self:
        problems = placement_mismatches(self.buffers)
        if problems:
            raise ValueError("contenders timed on different buffers: " + "; ".join(problems))
        return self


def _module_samples(columns: Iterable[TimingColumn | None]) -> list[list[float]]:
    return [
        found
        for column in columns
        if column is not None
        for found in column.placement_samples().values()
    ]


class HostOverhead(_Strict):
    """Host wall-clock per call (µs), launches enqueued back to back: the eager sides
    in interleaved rounds (the median round), a graph's replays after them."""

    config_id: str
    calls: int = Field(ge=1)
    port_wrapper_us: float | None = None
    port_cffi_us: float | None = Field(None, description="Pre-built descriptors, no checks.")
    port_key_us: float | None = Field(
        None,
        description="The wrapper's repeated-call key alone: every tensor's facts read and "
        "the key built (`Library._tensor_layout`), no C call.",
    )
    port_c_call_us: float | None = Field(
        None,
        description="The C function alone: pre-built descriptors and a stream handle cast "
        "once (the bare cffi call without torch's current-stream lookup).",
    )
    reference_launch_us: float | None = None
    port_graph_replay_us: float | None = None
    reference_graph_replay_us: float | None = None
    rounds_us: dict[str, list[float]] = Field(
        default_factory=dict,
        description="Each eager side's µs per call in every interleaved round, by the "
        "field name of its median above (empty in runs from before rounds were kept).",
    )
    notes: list[str] = Field(default_factory=list)

    def wrapper_faster_rounds(self) -> tuple[int, int] | None:
        """(rounds in which the wrapper's calls took less time than ct.launch's, rounds)."""
        wrapper = self.rounds_us.get("port_wrapper_us")
        launch = self.rounds_us.get("reference_launch_us")
        if not wrapper or not launch or len(wrapper) != len(launch):
            return None
        return sum(w < r for w, r in zip(wrapper, launch, strict=True)), len(wrapper)


class AbiProbe(_Strict):
    case: str
    expected: int
    returned: int

    @property
    def passed(self) -> bool:
        return self.expected == self.returned


class GpuRunReport(_Strict):
    """`gpu_run.json`: the whole story of one `tileport gpu-run`."""

    FILE_NAME: ClassVar[str] = "gpu_run.json"

    operator: str
    ran_on_gpu: bool
    statement: str = Field(min_length=1, description="Plainly: what ran where, or what did not.")
    environment: GpuEnvironment
    correctness_verdict: str
    perf_verdict: str
    cases: list[CaseDetail] = Field(default_factory=list)
    perf: list[PerfDetail] = Field(default_factory=list)
    host_overhead: list[HostOverhead] = Field(default_factory=list)
    abi_probes: list[AbiProbe] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="Phases that failed, and why.")
    geomean_line: str = ""
    elapsed_s: float = Field(ge=0)
    phase_s: dict[str, float] = Field(
        default_factory=dict,
        description="Wall seconds of each phase (correctness, perf, host), where GPU time went.",
    )
    bundle_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the bundle's manifest.json this run was made from.",
    )

    @model_validator(mode="after")
    def _gpu_claims_need_a_gpu(self) -> Self:
        if not self.ran_on_gpu and (self.cases or self.perf or self.host_overhead):
            raise ValueError("results without a GPU run")
        if not self.ran_on_gpu and not self.environment.missing:
            raise ValueError("a run that did not reach a GPU must say what was missing")
        return self
