"""What each part of the written module's launch costs on the host (on a GPU host).

    python3 bench/launch_parts.py --tilegym DIR [--shape M N] [--calls C] OP... > parts.md

One call of each op (as `tileport tilegym call-cost` makes it) is recorded: the
kernel function `_launch` dispatches to and its arguments. Then each part is timed
alone on those arguments, `--calls` times back to back (us per call, the best of
five rounds): the whole kernel function (through the compiled launch where it is
built, `kernels_rs/tilegym/launch.cpp`), the compiled launch alone, the same launch
packed in Python (`tileport_launch.Library`) and that packing alone, the C symbol on
the packed words, the stream's handle, each tensor read the Python packer makes
(address, extents, strides, dtype code, device), and cuTile Python's `ct.launch` on
the cutile backend's arguments for the same call. The parts do not add up to
the whole exactly (each timing loop has its own overhead, about 0.03 us).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodes.tilegym_backend.call_cost import LIBRARY, op_call, recorded, recorded_ct_launch
from nodes.tilegym_backend.test_run import open_checkout
from schemas.tilegym_backend import LAUNCH, LAUNCH_WORDS_MODULE

ROUNDS = 5


def best_us(call_once: Callable[[], Any], calls: int) -> float:
    """The best of `ROUNDS` rounds of `calls` back-to-back calls, us per call."""
    return min(timeit.repeat(call_once, number=calls, repeat=ROUNDS)) / calls * 1e6


def parts(source_root: Path, op: str, shape: list[int], calls: int) -> list[tuple[str, float]]:
    import torch
    from tilegym.backend import set_backend

    entry, x, kwargs = op_call(source_root, op, shape)
    module = importlib.import_module(f"tilegym.ops.cutile_rs.{op}")
    set_backend("cutile-rs")
    entry(x, **kwargs)  # binds the library, learns the dtype codes, builds the compiled launch
    launch = recorded(module, LAUNCH, lambda: entry(x, **kwargs))
    ct_launch = recorded_ct_launch(lambda: entry(x, **kwargs))

    stream, grid, kernel, args = launch.args
    library, launcher = getattr(module, LIBRARY), getattr(module, LAUNCH_WORDS_MODULE)
    symbol, layout = kernel.symbol, kernel.layout
    address, function = library.address(symbol), library.function(symbol)
    words = library.words(symbol, layout, stream, grid, args)
    empty = library.words(symbol, layout, stream, (0, 0, 0), args)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    first = tensors[0] if tensors else None
    rows: list[tuple[str, float]] = [
        (
            f"kernel function ({compiled_or_not(module)})",
            best_us(lambda: kernel(stream, grid, args), calls),
        ),
        ("kernel function, empty grid", best_us(lambda: kernel(stream, (0, 0, 0), args), calls)),
        (
            "compiled launch alone",
            best_us(lambda: launcher.launch(address, layout, args, grid, stream), calls),
        ),
        (
            "kernel packed in Python",
            best_us(lambda: library.packed_in_python(symbol, layout, stream, grid, args), calls),
        ),
        (
            "Python packing alone",
            best_us(lambda: library.words(symbol, layout, stream, grid, args), calls),
        ),
        ("C symbol alone", best_us(lambda: function(words), calls)),
        ("C symbol alone, empty grid", best_us(lambda: function(empty), calls)),
        ("stream handle", best_us(lambda: getattr(stream, "cuda_stream", stream), calls)),
        ("ct.launch alone", best_us(lambda: ct_launch.function(*ct_launch.args), calls)),
    ]
    if first is not None:
        rows += [
            (f"per tensor ({len(tensors)}): data_ptr()", best_us(first.data_ptr, calls)),
            ("per tensor: .shape", best_us(lambda: first.shape, calls)),
            ("per tensor: .stride()", best_us(first.stride, calls)),
            ("per tensor: dtype code", best_us(lambda: library._code(first), calls)),
            ("per tensor: get_device()", best_us(first.get_device, calls)),
        ]
    return rows


def compiled_or_not(module: Any) -> str:
    """Which packer the module's launches went through: the compiled launch once
    its loader bound it, else Python."""
    bound = getattr(module, LAUNCH_WORDS_MODULE).launch
    return "compiled launch" if type(bound).__name__ == "builtin_function_or_method" else "Python"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ops", nargs="+")
    parser.add_argument("--tilegym", type=Path, required=True)
    parser.add_argument("--shape", type=int, nargs=2, default=[8, 8])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args(argv)
    gpu, driver = open_checkout(args.tilegym)
    print(f"# Host cost of each part of a launch, {'x'.join(map(str, args.shape))} float32\n")
    print(
        f"GPU: {gpu} (driver {driver}). Command: `python3 bench/launch_parts.py "
        f"{' '.join(args.ops)} --tilegym tilegym --shape {args.shape[0]} {args.shape[1]} "
        f"--calls {args.calls}`. us per call, best of {ROUNDS} rounds.\n"
    )
    print("| op | part | us |\n|---|---|---:|")
    for op in args.ops:
        for part, us in parts(args.tilegym / "src", op, list(args.shape), args.calls):
            print(f"| {op} | {part} | {us:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
