"""Where a `tilegym.ops` call's host time goes, per backend and per layer of the
cutile-rs wrapper tileport writes (on a GPU host).

One call of each op (a 2-D float32 input of `--shape`, as the sweep draws its
calls) is made `--calls` times back to back with each backend, and the host time
per call is the loop's wall-clock time over the calls, the kernels left to run
behind it (a host-bound op call is what this measures; the GPU's queue is drained
before and after). For cutile-rs the same call is then taken apart: the written
module's `_launch` alone (with the arguments the op gave it), the C symbol alone
(on the words `_launch` packs: the Rust side), `_launch` with an empty
grid (the symbol returns before any CUDA call), and cuTile Python's `ct.launch`
alone (with the arguments the cutile op gave it: what `_launch` stands in for).
Last, each backend's op with its launch doing nothing: its host code alone, which
should cost the same on both (the written module runs the cutile module's host code).
`launch - symbol` is the wrapper's Python, `empty grid - (launch - symbol)` the
symbol's reading and checks, `symbol` the Rust side's (checks, dispatch, generic
arguments, the entry's lookup and the CUDA launch).
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from nodes.tilegym_backend.sweep import NO_GPU, call_inputs, draw_call, public_op, read_signature
from nodes.tilegym_backend.test_run import NoGpu, added_ops, open_checkout
from schemas.tilegym_backend import LAUNCH, CallCost, CallCostReport

LIBRARY = "_LIBRARY"  # its symbols (tileport_launch.Library), each bound on first use


def host_us(call_once: Callable[[], Any], calls: int, torch: Any) -> float:
    """Host time per call of `calls` back-to-back calls, in us."""
    return timed(call_once, calls, torch)[0]


def timed(call_once: Callable[[], Any], calls: int, torch: Any) -> tuple[float, float]:
    """Host and stream time per call of `calls` back-to-back calls, in us: the host's
    until the last call returned, the stream's from before the first call's work to
    after the last's (the larger of the two bounds the op's rate)."""
    for _ in range(10):
        call_once()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    started = time.perf_counter()
    for _ in range(calls):
        call_once()
    elapsed = time.perf_counter() - started
    end.record()
    end.synchronize()
    return elapsed / calls * 1e6, start.elapsed_time(end) * 1e3 / calls


class Recorder:
    """Stands in for a function and keeps the arguments of its last call."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.args: tuple[Any, ...] = ()

    def __call__(self, *args: Any) -> Any:
        self.args = args
        return self.function(*args)


def op_call(
    source_root: Path, op: str, shape: list[int]
) -> tuple[Callable[..., Any], Any, dict[str, Any]]:
    """The op's public function and one call of it, as the sweep draws its calls
    (seed 0) but a float32 input of `shape`: the function, the input, the keywords."""
    import torch

    drawn = draw_call(read_signature(source_root, op), random.Random(0))
    arguments = {
        name: shape[-1] if name == "normalized_shape" else value
        for name, value in drawn.arguments.items()
    }
    call = drawn.model_copy(update={"shape": shape, "dtype": "float32", "arguments": arguments})
    x, kwargs = call_inputs(call, torch)
    return public_op(op), x, kwargs


def recorded(owner: Any, name: str, call_once: Callable[[], Any]) -> Recorder:
    """`owner.name` as `call_once` calls it (the arguments of its last call kept), put
    back afterwards."""
    import torch

    recorder = Recorder(getattr(owner, name))
    setattr(owner, name, recorder)
    try:
        call_once()
        torch.cuda.synchronize()
    finally:
        setattr(owner, name, recorder.function)
    return recorder


def recorded_ct_launch(call_once: Callable[[], Any]) -> Recorder:
    """`ct.launch` as the cutile backend calls it in `call_once` (its arguments kept);
    the cutile module calls it through cuda.tile's attribute."""
    import cuda.tile as ct
    from tilegym.backend import set_backend

    set_backend("cutile")
    return recorded(ct, "launch", call_once)


def measure(source_root: Path, op: str, shape: list[int], calls: int) -> CallCost:
    import importlib

    import cuda.tile as ct
    import torch
    from tilegym.backend import set_backend

    entry, x, kwargs = op_call(source_root, op, shape)
    set_backend("cutile")
    cutile_us, cutile_stream_us = timed(lambda: entry(x, **kwargs), calls, torch)
    set_backend("cutile-rs")
    port_us, port_stream_us = timed(lambda: entry(x, **kwargs), calls, torch)

    # The written module's launch as the op called it.
    module = importlib.import_module(f"tilegym.ops.cutile_rs.{op}")
    launch = recorded(module, LAUNCH, lambda: entry(x, **kwargs))
    ct_launch = recorded_ct_launch(lambda: entry(x, **kwargs))
    stream, grid, kernel, args = launch.args
    launch_us = host_us(lambda: launch.function(stream, grid, kernel, args), calls, torch)
    empty_us = host_us(lambda: launch.function(stream, (0, 0, 0), kernel, args), calls, torch)
    cutile_code_us = _without_launch(ct, "launch", lambda: entry(x, **kwargs), calls, torch)
    set_backend("cutile-rs")
    port_code_us = _without_launch(module, LAUNCH, lambda: entry(x, **kwargs), calls, torch)
    # The C symbol behind it, on the words its launch packs.
    library, symbol = getattr(module, LIBRARY), kernel.symbol
    function = library.function(symbol)
    words = library.words(symbol, kernel.layout, stream, grid, args)
    symbol_us = host_us(lambda: function(words), calls, torch)
    ct_launch_us = host_us(lambda: ct_launch.function(*ct_launch.args), calls, torch)
    return CallCost(
        op=op,
        shape=shape,
        symbol=symbol,
        calls=calls,
        cutile_op_us=round(cutile_us, 2),
        port_op_us=round(port_us, 2),
        cutile_stream_us=round(cutile_stream_us, 2),
        port_stream_us=round(port_stream_us, 2),
        launch_us=round(launch_us, 2),
        symbol_us=round(symbol_us, 2),
        ct_launch_us=round(ct_launch_us, 2),
        empty_launch_us=round(empty_us, 2),
        cutile_host_code_us=round(cutile_code_us, 2),
        port_host_code_us=round(port_code_us, 2),
    )


def _without_launch(
    owner: Any, name: str, call_once: Callable[[], Any], calls: int, torch: Any
) -> float:
    """Host time per call of `call_once` with `owner.name` (the launch it makes) doing
    nothing: what the op's own host code costs on its backend."""
    launch = getattr(owner, name)
    setattr(owner, name, lambda *args: None)
    try:
        return host_us(call_once, calls, torch)
    finally:
        setattr(owner, name, launch)


def render_markdown(report: CallCostReport) -> str:
    lines = [
        f"# Host time per `tilegym.ops` call, {report.date}",
        "",
        f"GPU: {report.gpu} (driver {report.driver}). Command: `{report.command}`.",
        "",
        "Host: time until the calls returned; stream: the stream's time over the same "
        "calls (host and stream us per call). Host code: the op with its launch doing "
        "nothing.",
        "",
        "| op | shape | cutile host | cutile stream | cutile-rs host | cutile-rs stream "
        "| `_launch` | C symbol | `ct.launch` | `_launch`, empty grid "
        "| cutile host code | cutile-rs host code |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in report.ops:
        lines.append(
            f"| {c.op} | {'x'.join(map(str, c.shape))} | {c.cutile_op_us} "
            f"| {c.cutile_stream_us} | {c.port_op_us} | {c.port_stream_us} "
            f"| {c.launch_us} | {c.symbol_us} | {c.ct_launch_us} | {c.empty_launch_us} "
            f"| {c.cutile_host_code_us} | {c.port_host_code_us} |"
        )
    return "\n".join(lines) + "\n"


def add_call_cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="*", help="default: every op tileport added")
    parser.add_argument("--tilegym", type=Path, required=True, help="the patched checkout")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--shape", type=int, nargs=2, default=[1024, 1024])
    parser.add_argument("--calls", type=int, default=2000)


def call_cost_command(args: argparse.Namespace) -> int:
    try:
        gpu, driver = open_checkout(args.tilegym)
    except NoGpu as error:
        print(f"skipped: {error}; run it on a GPU host", file=sys.stderr)
        return NO_GPU
    ops = args.ops or added_ops(args.tilegym)
    report = CallCostReport(
        date=date.today().isoformat(),
        gpu=gpu,
        driver=driver,
        command=shlex.join(
            [
                "tileport",
                "tilegym",
                "call-cost",
                *ops,
                "--tilegym",
                args.tilegym.resolve().name,  # the GPU host's folder says nothing
                "--shape",
                *map(str, args.shape),
                "--calls",
                str(args.calls),
            ]
        ),
        ops=[measure(args.tilegym / "src", op, list(args.shape), args.calls) for op in ops],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"tilegym-call-cost-{report.date}"
    stem.with_suffix(".json").write_text(report.model_dump_json(indent=2) + "\n")
    stem.with_suffix(".md").write_text(render_markdown(report))
    print(render_markdown(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m nodes.tilegym_backend.call_cost", description=__doc__
    )
    add_call_cost_arguments(parser)
    return call_cost_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
