"""Every added op called through `tilegym.ops` on drawn calls, the cutile backend as
the oracle (`tileport tilegym sweep`, on a GPU host).

The calls are drawn from what the op's cutile implementation accepts, read from its
source (`op_source.find_op`), never from recorded launches: the input is a 2-D
tensor of drawn extents (1, ragged, unaligned, up to 4096) in float32, float16 or
bfloat16, one time in four starting one element into its allocation (a view, not
16-byte aligned); `normalized_shape`, `weight` and `bias` fit its last extent; `eps` is
1e-5; a parameter with a bool default is drawn, and so is one with a str or None
default among the string literals the module compares it with (`mode ==
"static_persistent"`); every other parameter with a default keeps it. A parameter
without a default that no rule draws makes the op unsweepable, with its name.

Each call runs with the cutile backend, then with cutile-rs on copies of the same
inputs: `served` when the outputs are equal bit for bit, `mismatch` when not,
`refused` when the port raised, `oracle_refused` (not counted) when the cutile
backend itself raised. The per-call time of each backend is the median over
`--reps` calls of CUDA events recorded around the `tilegym.ops` call. Then, with
CUPTI's kernel activity on (`toolchain.cupti`), `--reps` rounds in which each backend
makes the call once inside a window of its own: a call's device time is the sum
of the durations of the kernels that ran inside its window, and each backend's is
the median over its windows. Where CUPTI cannot be started (cupti-python not
installed), the report says why and holds per-call times only. The seed and every
draw are written out, so a run can be repeated.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import math
import platform
import random
import re
import secrets
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from nodes.tilegym_backend.op_source import OpSourceError, find_op
from nodes.tilegym_backend.test_run import NoGpu, added_ops, open_checkout
from schemas.tilegym_backend import (
    ArgumentValue,
    DeviceTime,
    SweepCall,
    SweepCallResult,
    SweepOpSummary,
    SweepOutcome,
    SweepReport,
)
from toolchain.cupti import KernelRecord, KernelTimer, Window, attribute
from toolchain.cupti import summarise as summarise_windows

DTYPES = ("float32", "float16", "bfloat16")
MAX_EXTENT = 4096
MAX_ELEMENTS = 1 << 24  # inputs of at most 64 MiB in float32
EPS = 1e-5
UNALIGNED_SHARE = 0.25  # of the calls whose input starts one element in
# Tensors beside the input, shaped like its last extent.
LAST_EXTENT_TENSORS = ("weight", "bias")
USAGE_ERROR = 2
NO_GPU = 4
ORACLE = "cutile"
PORT = "cutile-rs"
# The GPU host's packages whose versions the report records.
HOST_PACKAGES = ("torch", "cuda-tile", "cupti-python")


class SweepError(ValueError):
    """The op cannot be swept as its source is written; says why."""


@dataclass(frozen=True)
class Parameter:
    name: str
    has_default: bool
    default: ArgumentValue
    choices: tuple[ArgumentValue, ...] = ()  # drawn among these when not empty


@dataclass(frozen=True)
class OpSignature:
    """What a call of the op takes, after its input (the first parameter)."""

    op: str
    input_name: str
    parameters: tuple[Parameter, ...]


def _literal(node: ast.expr) -> ArgumentValue:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None  # a default the sweep does not pass (it keeps the function's own)
    return value if isinstance(value, str | float | int | bool) or value is None else None


def compared_strings(tree: ast.Module, name: str) -> list[str]:
    """The string literals the module compares `name` with (`name == "x"`)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        if not isinstance(node.ops[0], ast.Eq | ast.NotEq):
            continue
        sides = [node.left, node.comparators[0]]
        if not any(isinstance(side, ast.Name) and side.id == name for side in sides):
            continue
        for side in sides:
            value = side.value if isinstance(side, ast.Constant) else None
            if isinstance(value, str) and value not in found:
                found.append(value)
    return found


def read_signature(source_root: Path, op: str) -> OpSignature:
    """The op's parameters, from the function its cutile module registers."""
    try:
        [module] = find_op(source_root, op)
    except ValueError:
        raise SweepError(f"{op}: not one cutile module registering it") from None
    function = module.function
    positional = function.args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(function.args.defaults))
    defaults += function.args.defaults
    named = list(zip(positional, defaults, strict=True))
    named += list(zip(function.args.kwonlyargs, function.args.kw_defaults, strict=True))
    if not named:
        raise SweepError(f"{op}: its function takes no input")
    parameters = []
    for arg, default in named[1:]:
        value = _literal(default) if default is not None else None
        choices: tuple[ArgumentValue, ...] = ()
        if default is not None and isinstance(value, bool):
            choices = (False, True)
        elif default is not None and (value is None or isinstance(value, str)):
            strings = compared_strings(module.tree, arg.arg)
            if strings:
                choices = (value, *[s for s in strings if s != value])
        parameters.append(Parameter(arg.arg, default is not None, value, choices))
    return OpSignature(op, named[0][0].arg, tuple(parameters))


def _extent(rng: random.Random) -> int:
    """1 one time in eight, else log-uniform up to MAX_EXTENT: mostly ragged."""
    if rng.random() < 0.125:
        return 1
    return max(1, int(math.exp(rng.uniform(0.0, math.log(MAX_EXTENT)))))


def draw_call(signature: OpSignature, rng: random.Random) -> SweepCall:
    rows, columns = _extent(rng), _extent(rng)
    while rows * columns > MAX_ELEMENTS:
        rows = max(1, rows // 2)
    arguments: dict[str, ArgumentValue] = {}
    for parameter in signature.parameters:
        if parameter.name in LAST_EXTENT_TENSORS and not (
            parameter.has_default and parameter.default is None
        ):
            arguments[parameter.name] = "tensor"
        elif parameter.name == "normalized_shape":
            arguments[parameter.name] = columns
        elif parameter.name == "eps" and not parameter.has_default:
            arguments[parameter.name] = EPS
        elif parameter.choices:
            arguments[parameter.name] = rng.choice(parameter.choices)
        elif not parameter.has_default:
            raise SweepError(f"{signature.op}: no rule draws its parameter {parameter.name!r}")
    return SweepCall(
        op=signature.op,
        shape=[rows, columns],
        dtype=rng.choice(DTYPES),
        arguments=arguments,
        seed=rng.randrange(1 << 31),
        offset=1 if rng.random() < UNALIGNED_SHARE else 0,
    )


def draw_calls(signature: OpSignature, seed: int, count: int) -> list[SweepCall]:
    rng = random.Random(f"{seed}:{signature.op}")
    return [draw_call(signature, rng) for _ in range(count)]


# --- on the GPU host ---------------------------------------------------------------


def public_op(op: str) -> Callable[..., Any]:
    """`tilegym.ops.<op>`, or the op of that name in one of tilegym.ops' modules."""
    import importlib
    import pkgutil

    import tilegym.ops as ops

    if callable(getattr(ops, op, None)):
        return getattr(ops, op)  # type: ignore[no-any-return]
    for info in pkgutil.iter_modules(ops.__path__):
        if info.ispkg:
            continue  # the backends' folders: the public entries are modules
        module = importlib.import_module(f"tilegym.ops.{info.name}")
        if callable(getattr(module, op, None)):
            return getattr(module, op)  # type: ignore[no-any-return]
    raise SweepError(f"{op}: tilegym.ops has no public entry of that name")


def call_inputs(call: SweepCall, torch: Any) -> tuple[Any, dict[str, Any]]:
    generator = torch.Generator(device="cuda").manual_seed(call.seed)
    dtype = getattr(torch, call.dtype)
    x = _placed(
        torch.randn(call.shape, dtype=dtype, device="cuda", generator=generator),
        call.offset,
        torch,
    )
    kwargs: dict[str, Any] = {}
    for name, value in call.arguments.items():
        if value == "tensor" and name in LAST_EXTENT_TENSORS:
            kwargs[name] = torch.randn(
                call.shape[-1], dtype=dtype, device="cuda", generator=generator
            )
        elif name == "normalized_shape":
            kwargs[name] = (value,)
        else:
            kwargs[name] = value
    return x, kwargs


def _placed(tensor: Any, offset: int, torch: Any) -> Any:
    """`tensor`'s values in a contiguous view starting `offset` elements into a fresh
    allocation."""
    if not offset:
        return tensor
    buffer = torch.empty(tensor.numel() + offset, dtype=tensor.dtype, device=tensor.device)
    view = buffer[offset:].view(tensor.shape)
    view.copy_(tensor)
    return view


def _copies(x: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    import torch

    copied = {k: v.clone() if hasattr(v, "clone") else v for k, v in kwargs.items()}
    return _placed(x.clone(), x.storage_offset(), torch), copied


def _tensors(output: Any) -> list[Any]:
    if isinstance(output, tuple | list):
        return [t for item in output for t in _tensors(item)]
    return [output] if hasattr(output, "dtype") and hasattr(output, "shape") else []


_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _compare(expected: Any, got: Any, torch: Any) -> tuple[bool, float | None, str]:
    """Bitwise equality of every output tensor, the largest difference, and why not."""
    want, have = _tensors(expected), _tensors(got)
    if len(want) != len(have):
        return False, None, f"{len(have)} output tensors, the oracle gives {len(want)}"
    worst = 0.0
    equal = True
    for a, b in zip(want, have, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            return (
                False,
                None,
                f"output {tuple(b.shape)} {b.dtype}, oracle {tuple(a.shape)} {a.dtype}",
            )
        bits = getattr(torch, _BITS[a.element_size()])
        equal = equal and bool(torch.equal(a.contiguous().view(bits), b.contiguous().view(bits)))
        if a.numel() and a.is_floating_point():
            diff = (a.float() - b.float()).abs().nan_to_num(nan=math.inf).max().item()
            worst = max(worst, float(diff))
    return equal, worst, "" if equal else f"outputs differ, max |diff| {worst:.3g}"


def per_call_samples_us(call_once: Callable[[], Any], reps: int, torch: Any) -> list[float]:
    """CUDA events recorded around each of `reps` op calls, in us (after two calls
    that warm the op's caches)."""
    for _ in range(2):
        call_once()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        call_once()
        end.record()
        end.synchronize()
        times.append(round(start.elapsed_time(end) * 1000.0, 3))
    return times


def device_times(records: list[KernelRecord], windows: list[Window]) -> dict[str, DeviceTime]:
    """Per backend (its windows' label): each window's device time, the summed durations
    of the kernels whose execution falls inside it, and their median. A window in which
    no kernel ran is left out, as the perf protocol leaves it out."""
    timings = attribute(records, windows)
    found: dict[str, DeviceTime] = {}
    for label in dict.fromkeys(window.label for window in windows):
        summary = summarise_windows(timings, label)
        if summary is not None:
            found[label] = DeviceTime(
                median_us=round(summary.median_us, 3),
                samples_us=[round(sample, 3) for sample in summary.device_us],
            )
    return found


def measure_device_times(
    calls: dict[str, Callable[[], Any]], reps: int, torch: Any
) -> dict[str, DeviceTime]:
    """CUPTI device time of each backend's call (by backend), over `reps` rounds in
    which the backends take turns, so that a drift of the GPU's clocks falls on both."""
    timer = KernelTimer(synchronize=torch.cuda.synchronize)
    timer.start()
    try:
        for _ in range(reps):
            for backend, call_once in calls.items():
                with timer.window(backend):
                    call_once()
    finally:
        timer.stop()
    return device_times(timer.records, timer.windows)


def device_time_missing(torch: Any) -> str:
    """Why CUPTI cannot time kernels here; empty when it can."""
    timer = KernelTimer(synchronize=torch.cuda.synchronize)
    try:
        timer.start()
    except Exception as error:  # not installed, or CUPTI refused: untimed either way
        return f"CUPTI could not be started: {_why(error)}"
    timer.stop()
    return ""


def host_versions(torch: Any) -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in HOST_PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: the report holds what is
    if torch.version.cuda:
        found["torch cuda"] = str(torch.version.cuda)
    return found


def run_call(call: SweepCall, reps: int, time_devices: bool) -> SweepCallResult:
    import torch
    from tilegym.backend import set_backend

    entry = public_op(call.op)
    x, kwargs = call_inputs(call, torch)
    set_backend(ORACLE)
    try:
        oracle_x, oracle_kwargs = _copies(x, kwargs)
        expected = entry(oracle_x, **oracle_kwargs)
        torch.cuda.synchronize()
    except Exception as error:  # the oracle's refusal, whatever it raises
        return SweepCallResult(call=call, outcome=SweepOutcome.ORACLE_REFUSED, detail=_why(error))
    set_backend(PORT)
    try:
        port_x, port_kwargs = _copies(x, kwargs)
        got = entry(port_x, **port_kwargs)
        torch.cuda.synchronize()
    except Exception as error:  # a refused launch, whatever the wrapper raises
        return SweepCallResult(call=call, outcome=SweepOutcome.REFUSED, detail=_why(error))
    finally:
        set_backend(ORACLE)
    equal, worst, why = _compare(expected, got, torch)
    outcome = SweepOutcome.SERVED if equal else SweepOutcome.MISMATCH
    per_call: dict[str, list[float]] = {}
    for backend in (ORACLE, PORT):
        set_backend(backend)
        per_call[backend] = per_call_samples_us(lambda: entry(x, **kwargs), reps, torch)
    device: dict[str, DeviceTime] = {}
    if time_devices:
        calls = {backend: _called_with(backend, entry, x, kwargs) for backend in (ORACLE, PORT)}
        device = measure_device_times(calls, reps, torch)
    set_backend(ORACLE)
    return SweepCallResult(
        call=call,
        outcome=outcome,
        detail=why,
        max_abs_diff=worst,
        port_us=statistics.median(per_call[PORT]),
        cutile_us=statistics.median(per_call[ORACLE]),
        port_us_samples=per_call[PORT],
        cutile_us_samples=per_call[ORACLE],
        port_device=device.get(PORT),
        cutile_device=device.get(ORACLE),
    )


def _called_with(
    backend: str, entry: Callable[..., Any], x: Any, kwargs: dict[str, Any]
) -> Callable[[], Any]:
    """The op called on `backend`, chosen inside the call: the device time of a window
    counts only its kernels, so the choice costs it nothing."""
    from tilegym.backend import set_backend

    def call_once() -> Any:
        set_backend(backend)
        return entry(x, **kwargs)

    return call_once


def _why(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"[:300]


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def summarise(op: str, results: list[SweepCallResult]) -> SweepOpSummary:
    counted = [r for r in results if r.outcome is not SweepOutcome.ORACLE_REFUSED]
    ran = [r for r in counted if r.outcome is not SweepOutcome.REFUSED]
    return SweepOpSummary(
        op=op,
        calls=len(counted),
        served=sum(r.outcome is SweepOutcome.SERVED for r in counted),
        refused=len(counted) - len(ran),
        mismatches=sum(r.outcome is SweepOutcome.MISMATCH for r in counted),
        port_us_median=_median([r.port_us for r in ran]),
        cutile_us_median=_median([r.cutile_us for r in ran]),
        port_device_us_median=_median([r.port_device.median_us for r in ran if r.port_device]),
        cutile_device_us_median=_median(
            [r.cutile_device.median_us for r in ran if r.cutile_device]
        ),
    )


def _coverage(calls: list[SweepCall]) -> str:
    """What the drawn calls hold: unaligned inputs, extents of 1, ragged extents, dtypes."""
    unaligned = sum(1 for c in calls if c.offset)
    unit = sum(1 for c in calls if 1 in c.shape)
    ragged = sum(1 for c in calls if any(e > 1 and e % 16 for e in c.shape))
    dtypes = ", ".join(f"{d} {sum(1 for c in calls if c.dtype == d)}" for d in DTYPES)
    return (
        f"Drawn: {unaligned} with an input not 16-byte aligned, {unit} with an extent of 1, "
        f"{ragged} with a ragged extent (not a multiple of 16); {dtypes}."
    )


def _device_time_line(report: SweepReport) -> str:
    if any(r.port_device or r.cutile_device for r in report.results):
        return (
            "Device time: CUPTI, the summed durations of the kernels one op call launched, "
            "median over the calls timed per backend."
        )
    if report.device_time_missing:
        return f"Device time not measured: {report.device_time_missing}."
    return "Device time not measured (a report from before the sweep measured it)."


def markdown(report: SweepReport) -> str:
    versions = "".join(f", {name} {version}" for name, version in report.versions.items())
    lines = [
        f"# TileGym ops through `tilegym.ops`: cutile-rs against cutile, {report.date}",
        "",
        f"GPU {report.gpu}, driver {report.driver}{versions}; seed {report.seed}.",
        f"Command: `{report.command}`",
        "",
        f"{report.calls} calls the cutile backend serves: {report.served} served by the "
        f"port bitwise equal, {report.mismatches} not equal, {report.refused} refused.",
        _coverage([r.call for r in report.results if r.outcome is not SweepOutcome.ORACLE_REFUSED]),
        _device_time_line(report),
        "",
        "| op | calls | served | refused | mismatches | port us (median) | cutile us (median) "
        "| port device us (median) | cutile device us (median) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s.op} | {s.calls} | {s.served} | {s.refused} | {s.mismatches} "
        f"| {s.port_us_median} | {s.cutile_us_median} "
        f"| {s.port_device_us_median} | {s.cutile_device_us_median} |"
        for s in report.ops
    ]
    reasons: dict[str, int] = {}
    for result in report.results:
        if result.outcome in (SweepOutcome.REFUSED, SweepOutcome.MISMATCH):
            reason = re.sub(r"\d+", "N", result.detail)[:120]
            reasons[f"{result.call.op}: {reason}"] = (
                reasons.get(f"{result.call.op}: {reason}", 0) + 1
            )
    if reasons:
        lines += ["", "| why (op: reason) | calls |", "|---|---|"]
        lines += [f"| {why} | {n} |" for why, n in sorted(reasons.items(), key=lambda i: -i[1])]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GpuHost:
    """What the sweep runs on, and why it cannot time kernels there (empty: it can)."""

    gpu: str
    driver: str
    versions: dict[str, str]
    device_time_missing: str


def sweep_report(
    args: argparse.Namespace,
    ops: list[str],
    seed: int,
    host: GpuHost,
    results: list[SweepCallResult],
) -> SweepReport:
    """The report of the calls run so far, with the command that repeats them."""
    summaries = [summarise(op, [r for r in results if r.call.op == op]) for op in ops]
    return SweepReport(
        date=date.today().isoformat(),
        seed=seed,
        gpu=host.gpu,
        driver=host.driver,
        versions=host.versions,
        device_time_missing=host.device_time_missing,
        command=shlex.join(
            [
                "tileport",
                "tilegym",
                "sweep",
                *ops,
                "--tilegym",
                args.tilegym.resolve().name,
                "--calls",
                str(args.calls),
                "--seed",
                str(seed),
                "--reps",
                str(args.reps),
                *(["--budget-s", str(args.budget_s)] if args.budget_s is not None else []),
            ]
        ),
        calls=sum(s.calls for s in summaries),
        served=sum(s.served for s in summaries),
        refused=sum(s.refused for s in summaries),
        mismatches=sum(s.mismatches for s in summaries),
        ops=summaries,
        results=results,
    )


def merge_reports(parts: list[SweepReport]) -> SweepReport:
    """One report of a sweep run as several commands (a GPU command's time is
    limited): the same seed and GPU. An op in several parts (run again with more
    time) is taken from the part that ran more of its calls: the seed draws the
    same calls in the same order, so the shorter run must be the longer's start."""
    first = parts[0]
    for part in parts[1:]:
        if (part.seed, part.gpu) != (first.seed, first.gpu):
            raise SweepError(
                f"the parts differ: seed {part.seed} on {part.gpu}, seed {first.seed} on "
                f"{first.gpu}"
            )
    kept: dict[str, tuple[SweepOpSummary, list[SweepCallResult]]] = {}
    for part in parts:
        for summary in part.ops:
            results = [r for r in part.results if r.call.op == summary.op]
            if summary.op in kept:
                shorter, longer = sorted((kept[summary.op], (summary, results)), key=_ran)
                ran = [r.call for r in shorter[1]]
                if ran != [r.call for r in longer[1]][: len(ran)]:
                    raise SweepError(f"{summary.op}: in several parts with other calls")
                summary, results = longer
            kept[summary.op] = (summary, results)
    summaries = [summary for summary, _ in kept.values()]
    return first.model_copy(
        update={
            "command": " && ".join(part.command for part in parts),
            "calls": sum(s.calls for s in summaries),
            "served": sum(s.served for s in summaries),
            "refused": sum(s.refused for s in summaries),
            "mismatches": sum(s.mismatches for s in summaries),
            "ops": summaries,
            "results": [result for _, results in kept.values() for result in results],
        }
    )


def _ran(part: tuple[SweepOpSummary, list[SweepCallResult]]) -> int:
    return len(part[1])


def write_report(report: SweepReport, out: Path) -> Path:
    """`tilegym-sweep-<date>.{json,md}` in `out`; their common stem."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"tilegym-sweep-{report.date}"
    stem.with_suffix(".json").write_text(report.model_dump_json(indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(report))
    return stem


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="*", metavar="OP")
    parser.add_argument(
        "--tilegym", type=Path, metavar="CHECKOUT", help="the patched checkout (not with --merge)"
    )
    parser.add_argument("--calls", type=int, default=100, help="drawn calls per op")
    parser.add_argument(
        "--seed", type=int, default=None, help="the draws' seed (default: a new one, recorded)"
    )
    parser.add_argument("--reps", type=int, default=20, help="timed calls per backend and call")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no call after this many seconds (the ops share it in turn); the report "
        "holds the calls that ran",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the drawn calls as JSON lines and stop (no GPU needed)",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="REPORT",
        help="write one report into --out from the reports of one seed's ops run as "
        "several commands (no GPU needed)",
    )


def merge_command(reports: list[Path], out: Path) -> int:
    try:
        parts = [SweepReport.model_validate_json(path.read_text()) for path in reports]
        merged = merge_reports(parts)
    except (OSError, ValueError) as error:  # pydantic's ValidationError is a ValueError
        print(f"tileport tilegym sweep --merge: {error}", file=sys.stderr)
        return USAGE_ERROR
    stem = write_report(merged, out)
    print(markdown(merged))
    print(f"wrote {stem}.json and {stem}.md", file=sys.stderr)
    return 1 if merged.refused or merged.mismatches else 0


def sweep_command(args: argparse.Namespace) -> int:
    if args.merge:
        return merge_command(args.merge, args.out)
    if args.tilegym is None:
        print("tileport tilegym sweep: --tilegym CHECKOUT is required", file=sys.stderr)
        return USAGE_ERROR
    checkout = args.tilegym.resolve()
    ops = args.ops or added_ops(checkout)
    if not ops:
        print(f"tileport tilegym sweep: no op added to {checkout}", file=sys.stderr)
        return USAGE_ERROR
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    try:
        plans = {
            op: draw_calls(read_signature(checkout / "src", op), seed, args.calls) for op in ops
        }
    except (SweepError, OpSourceError, OSError, SyntaxError) as error:
        print(f"tileport tilegym sweep: {error}", file=sys.stderr)
        return USAGE_ERROR
    if args.plan:
        for calls in plans.values():
            for call in calls:
                print(call.model_dump_json())
        return 0
    try:
        gpu, driver = open_checkout(checkout)
    except NoGpu as error:
        print(f"skipped: {error}; run it on a GPU host", file=sys.stderr)
        return NO_GPU
    import torch

    host = GpuHost(gpu, driver, host_versions(torch), device_time_missing(torch))
    if host.device_time_missing:
        print(f"device times not measured: {host.device_time_missing}", file=sys.stderr)
    results: list[SweepCallResult] = []
    started = time.monotonic()
    for op_index, (op, calls) in enumerate(plans.items()):
        # Each op may spend its share of what is left, so every op gets calls.
        deadline = None
        if args.budget_s is not None:
            left = args.budget_s - (time.monotonic() - started)
            deadline = time.monotonic() + left / (len(plans) - op_index)
        for index, call in enumerate(calls):
            if deadline is not None and time.monotonic() > deadline:
                print(f"{op}: budget spent after {index} of {len(calls)} calls", file=sys.stderr)
                break
            results.append(run_call(call, args.reps, not host.device_time_missing))
            print(f"{op} {index + 1}/{len(calls)}: {results[-1].outcome.value}", file=sys.stderr)
            # Written after every call: a launch that kills the process loses only itself.
            write_report(sweep_report(args, list(plans), seed, host, results), args.out)
    report = sweep_report(args, list(plans), seed, host, results)
    stem = write_report(report, args.out)
    print(markdown(report))
    print(f"wrote {stem}.json and {stem}.md", file=sys.stderr)
    return 1 if report.refused or report.mismatches else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m nodes.tilegym_backend.sweep", description=__doc__
    )
    add_sweep_arguments(parser)
    return sweep_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
