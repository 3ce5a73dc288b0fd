"""The host builder by hand, on the checkout's library (kernels_rs/ported).

python -m nodes.host_builder add SPEC --kernel src/softmax.rs --module crate::softmax::softmax_port
python -m nodes.host_builder regenerate      # every generated file, from operators.json
python -m nodes.host_builder check           # exit 1 if a generated file is stale
python -m nodes.host_builder build           # the library, if a source is newer
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nodes.host_builder.binding import BindingError, bind_operator
from nodes.host_builder.library import (
    CHECKOUT,
    LibraryBuildError,
    add_operator,
    ensure_built,
    generate_library,
    library_lock,
    read_manifest,
    stale_generated,
)
from nodes.host_builder.rust_entry import RustSourceError, parse_kernel_source
from schemas.port_spec import PortSpecError, load_port_spec


def _add(args: argparse.Namespace) -> int:
    spec_path = args.spec.resolve()
    kernel = (CHECKOUT.root / args.kernel).resolve()
    try:
        binding = bind_operator(
            load_port_spec(spec_path), spec_path, parse_kernel_source(kernel), args.module
        )
        with library_lock():
            generated = add_operator(CHECKOUT, binding)
    except (BindingError, RustSourceError, PortSpecError) as exc:
        print(f"cannot bind: {exc}", file=sys.stderr)
        return 1
    for path in generated.written:
        print(f"wrote {path.relative_to(CHECKOUT.root)}")
    missing = binding.unsupported_dtypes()
    if missing:
        print(f"note: the port takes none of {missing}")
    return 0


def _regenerate(_: argparse.Namespace) -> int:
    with library_lock():
        generated = generate_library(CHECKOUT, read_manifest(CHECKOUT))
    for path in generated.written:
        print(f"wrote {path.relative_to(CHECKOUT.root)}")
    return 0


def _check(_: argparse.Namespace) -> int:
    stale = stale_generated(CHECKOUT)
    for path in stale:
        print(f"stale: {path.relative_to(CHECKOUT.root)}")
    return 1 if stale else 0


def _build(_: argparse.Namespace) -> int:
    try:
        print(ensure_built())
    except LibraryBuildError as exc:
        print(f"{exc}\n{exc.log}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodes.host_builder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="bind an operator's port and generate its launcher")
    add.add_argument("spec", type=Path)
    add.add_argument("--kernel", type=Path, required=True, help="relative to kernels_rs/ported")
    add.add_argument("--module", required=True, help="e.g. crate::softmax::softmax_port")
    add.set_defaults(handler=_add)
    for name, handler, text in (
        ("regenerate", _regenerate, "rewrite every generated file from operators.json"),
        ("check", _check, "exit 1 if a generated file differs from what it would be"),
        ("build", _build, "build the library if a source is newer"),
    ):
        commands.add_parser(name, help=text).set_defaults(handler=handler)
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
