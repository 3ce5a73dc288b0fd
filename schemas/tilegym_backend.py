"""What `tileport tilegym` reports: an op delivered as TileGym's own cutile-rs backend
(`add`), TileGym's test files run against it (`test`), the ops called through
`tilegym.ops` on drawn calls (`sweep`, `call-cost`) and the book of those sweeps
(`book`)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from schemas.verdicts import KernelWriterVerdict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AddOutcome(StrEnum):
    ADDED = "added"
    UNCHANGED = "unchanged"  # the checkout already holds exactly what the command writes
    REFUSED = "refused"


class KernelPort(_Strict):
    """One kernel of the op and how its port came out."""

    kernel: str
    spec: str
    verdict: KernelWriterVerdict
    summary: str


class AddResult(_Strict):
    op: str
    outcome: AddOutcome
    reason: str = Field("", description="Why the op was refused; empty otherwise.")
    modules: list[str] = Field(default_factory=list, description="The op's cutile modules.")
    kernels: list[KernelPort] = Field(default_factory=list)
    changed: list[str] = Field(
        default_factory=list, description="Files written, relative to the checkout."
    )
    patch: str = Field("", description="`git diff` of the checkout against its HEAD.")


class OpTestResult(_Strict):
    op: str
    passed: int
    failed: int
    skipped: int
    errors: int = 0
    command: str
    exit_code: int
    seconds: float


class TestRunReport(_Strict):
    """`bench/results/tilegym-tests-<date>.json`."""

    date: str
    tilegym: str = Field(description="The checkout the tests ran in.")
    gpu: str
    driver: str
    toolchain: str
    ops: list[OpTestResult]


class SweepOutcome(StrEnum):
    SERVED = "served"  # the port ran and its output equals the cutile backend's, bit for bit
    MISMATCH = "mismatch"  # the port ran; its output differs from the cutile backend's
    REFUSED = "refused"  # the port raised (a launch it does not serve)
    ORACLE_REFUSED = "oracle_refused"  # the cutile backend itself raised: not a call it serves


ArgumentValue = str | float | int | bool | None


class SweepCall(_Strict):
    """One drawn call of an op: its input's shape and dtype and its other arguments
    (tensors beside the input are drawn to fit it: `weight` and `bias` of the last
    extent)."""

    op: str
    shape: list[int]
    dtype: str
    arguments: dict[str, ArgumentValue] = Field(default_factory=dict)
    seed: int = Field(description="The seed of the call's random tensors.")
    offset: int = Field(
        default=0,
        description="Elements the input starts past its allocation's start (1: not "
        "16-byte aligned, as a view `x[1:]` is).",
    )


class DeviceTime(_Strict):
    """CUPTI device time of one backend's op call: per timed call, the summed durations
    of the kernels it launched."""

    median_us: float
    samples_us: list[float] = Field(min_length=1, description="One per timed call, in order.")


class SweepCallResult(_Strict):
    call: SweepCall
    outcome: SweepOutcome
    detail: str = ""
    max_abs_diff: float | None = None
    port_us: float | None = Field(None, description="Median per-call time, cutile-rs backend.")
    cutile_us: float | None = Field(None, description="Median per-call time, cutile backend.")
    # Reports from before these were measured hold none of them.
    port_us_samples: list[float] = Field(
        default_factory=list, description="Every per-call time `port_us` is the median of."
    )
    cutile_us_samples: list[float] = Field(
        default_factory=list, description="Every per-call time `cutile_us` is the median of."
    )
    port_device: DeviceTime | None = Field(None, description="The cutile-rs backend's kernels.")
    cutile_device: DeviceTime | None = Field(None, description="The cutile backend's kernels.")


class SweepOpSummary(_Strict):
    op: str
    calls: int = Field(description="Calls the cutile backend serves (the oracle ran).")
    served: int = Field(description="Calls whose outputs equal the oracle's bit for bit.")
    refused: int = Field(description="Calls the port raised on.")
    mismatches: int = Field(description="Calls the port ran with other outputs.")
    port_us_median: float | None = Field(description="Median per-call time of the calls run.")
    cutile_us_median: float | None
    port_device_us_median: float | None = Field(
        None, description="Median device time of the calls run, cutile-rs backend."
    )
    cutile_device_us_median: float | None = None


class SweepReport(_Strict):
    """`bench/results/tilegym-sweep-<date>.json`: every added op called through
    `tilegym.ops` on drawn calls, with the cutile backend as the oracle."""

    date: str
    seed: int
    gpu: str
    driver: str
    versions: dict[str, str] = Field(
        default_factory=dict, description="python, torch, cupti-python, ... on the GPU host."
    )
    device_time_missing: str = Field(
        "",
        description="Why no call has a device time (CUPTI could not be started on the GPU "
        "host); empty when they were measured, and in reports from before they were.",
    )
    command: str
    calls: int
    served: int
    refused: int
    mismatches: int
    ops: list[SweepOpSummary]
    results: list[SweepCallResult]


class CallCost(_Strict):
    """Host time per call of one op (`nodes.tilegym_backend.call_cost`), in us."""

    op: str
    shape: list[int]
    symbol: str = Field(description="The C symbol the op's cutile-rs call reached.")
    calls: int = Field(description="Back-to-back calls each figure is the mean of.")
    cutile_op_us: float = Field(description="`tilegym.ops` call, cutile backend.")
    port_op_us: float = Field(description="`tilegym.ops` call, cutile-rs backend.")
    cutile_stream_us: float = Field(description="The stream's time per cutile call.")
    port_stream_us: float = Field(description="The stream's time per cutile-rs call.")
    launch_us: float = Field(description="The written module's `_launch` alone.")
    symbol_us: float = Field(description="The C symbol alone: the Rust side.")
    ct_launch_us: float = Field(
        description="cuTile Python's `ct.launch` alone, with the arguments the cutile op "
        "gave it: what `_launch` stands in for."
    )


class CallCostReport(_Strict):
    """`bench/results/tilegym-call-cost-<date>.json`."""

    date: str
    gpu: str
    driver: str
    command: str
    ops: list[CallCost]


class BookCall(_Strict):
    """The call of an op with the largest ratio cutile-rs / cutile, and its two times."""

    call: SweepCall
    ratio: float
    port_us: float
    cutile_us: float


class BookRatio(_Strict):
    """The geomean over timed calls of cutile-rs / cutile (each call's medians)."""

    geomean: float
    interval: tuple[float, float] | None = Field(
        description="Its 95 % bootstrap interval, every call's samples resampled; None when "
        "some call kept no samples."
    )
    worst: BookCall


class BookOpRow(_Strict):
    op: str
    calls: int = Field(description="Calls the cutile backend serves (the oracle ran).")
    served: int
    mismatches: int
    refused: int
    timed: int = Field(description="Served calls with both backends' device and per-call times.")
    device: BookRatio | None = Field(description="CUPTI device time of the kernels launched.")
    per_call: BookRatio | None = Field(description="CUDA events around the `tilegym.ops` call.")


class BookSweep(_Strict):
    """One sweep report the book reads."""

    path: str
    date: str
    seed: int
    ops: list[str]
    command: str


class BookMachine(_Strict):
    gpu: str
    driver: str
    versions: dict[str, str]
    sweeps: list[str] = Field(description="The reports that ran on it, by path.")


class BookTarget(_Strict):
    description: str
    passed: bool
    missing: list[str] = Field(default_factory=list, description="The ops that miss it alone.")
    detail: str


class TileGymBook(_Strict):
    """`<name>.json` of `tileport tilegym book`: the delivered backend measured through
    `tilegym.ops` against the cutile backend, from one or more sweep reports."""

    name: str
    command: str
    sweeps: list[BookSweep]
    machines: list[BookMachine]
    ops: list[BookOpRow]
    overall: BookOpRow
    targets: list[BookTarget]
