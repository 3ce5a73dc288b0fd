"""`tileport gpu-run BUNDLE` and `tileport gpu-bundle SPEC`: the GPU job bundle.

`gpu-bundle` builds a bundle on the build machine; `gpu-run` runs one on a GPU
host (correctness, then perf) and writes its reports. On a GPU host without
this package, `python3 BUNDLE/run.py` does the same as `gpu-run`.
Exit codes of gpu-run: 0 correctness ALL_PASS, 1 FAIL, 2 BLOCKED (nothing ran on
a GPU), 3 the bundle is damaged or invalid.
"""

from __future__ import annotations

import argparse


def _gpu_run(args: argparse.Namespace) -> int:
    from nodes.correctness.runner import run_from_args

    return run_from_args(args)


def _gpu_bundle(args: argparse.Namespace) -> int:
    from toolchain.gpu_bundle import build_from_args

    return build_from_args(args)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from nodes.correctness.runner import add_arguments
    from toolchain.gpu_bundle import add_build_arguments

    run = subparsers.add_parser(
        "gpu-run",
        help="run a GPU job bundle: correctness, then perf",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(run)
    run.set_defaults(handler=_gpu_run)
    bundle = subparsers.add_parser(
        "gpu-bundle", help="build the GPU job bundle of an operator in the library"
    )
    add_build_arguments(bundle)
    bundle.set_defaults(handler=_gpu_bundle)
