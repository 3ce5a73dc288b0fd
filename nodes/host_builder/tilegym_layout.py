"""The host stage's second output format: an op's ports as TileGym's cutile-rs
backend holds them (`<op>_kernel/kernel.rs`, `<op>_kernel/ffi.rs`,
`ops/cutile_rs/<op>.py`).

The pipeline's host stage writes a port into tileport's library (`library.py`:
`ffi/<op>.rs` and the cffi wrapper over tileport's C ABI); this writes the same
COMPILED ports, bound by the same `binding.bind_operator` and launched by the same
generator (`ffi_gen`), in TileGym's layout: a C symbol per kernel taking what
`ct.launch` takes (`tilegym_ffi.py`), and the op's cutile host code with each
`ct.launch` routed to it (`tilegym_wrapper.py`). `tileport tilegym add` registers
the files in a checkout (`nodes/tilegym_backend/`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodes.host_builder.binding import bind_operator
from nodes.host_builder.rust_entry import parse_kernel_source
from nodes.host_builder.stage import writer_entries
from nodes.host_builder.tilegym_ffi import (
    c_parameters,
    kernel_stem,
    render_ffi,
    render_file,
    symbol,
)
from nodes.host_builder.tilegym_kernel import adapt_kernel, kernel_file, module_name
from nodes.host_builder.tilegym_wrapper import PortFfi, render_wrapper
from schemas.kernel_writer import PortReport
from schemas.port_spec import kernel_parameter_order, load_port_spec
from toolchain.rustfmt import format_rust

LAID_OUT_KERNEL = "tilegym_kernel.rs"  # the module as TileGym holds it, beside the port


@dataclass(frozen=True)
class ProvenPort:
    """One kernel's COMPILED port: its spec, the kernel writer's folder and report."""

    spec_path: Path
    out: Path
    report: PortReport


@dataclass(frozen=True)
class OpLayout:
    """The texts of an op's three files in TileGym's layout."""

    kernel_rs: str
    ffi_rs: str
    wrapper: str


@dataclass(frozen=True)
class _Kernel:
    """One kernel's share of the op's files."""

    module_text: str
    module: str
    entries: list[str]
    ffi: str
    port: PortFfi


def _kernel(op: str, port: ProvenPort, kernels: int, source: str) -> _Kernel:
    spec = load_port_spec(port.spec_path)
    stem = kernel_stem(op, spec.kernel) if kernels > 1 else None
    module = module_name(op, stem)
    lifted = (port.out / (port.report.kernel_rs or "kernel.rs")).read_text(encoding="utf-8")
    text = adapt_kernel(module, lifted, port.report, source)
    placed = port.out / LAID_OUT_KERNEL
    placed.write_text(format_rust(text), encoding="utf-8")
    entries = writer_entries(port.report)
    binding = bind_operator(
        spec,
        port.spec_path,
        parse_kernel_source(placed),
        module,
        entries.by_variant,
        entries.literal,
    )
    params = c_parameters(spec, kernel_parameter_order(spec, port.spec_path))
    sym = symbol(op, spec.kernel, kernels)
    return _Kernel(
        module_text=text,
        module=module,
        entries=[v.entry for v in binding.variants],
        ffi=render_ffi(sym, spec, params, binding, module, source),
        port=PortFfi(
            kernel=spec.kernel,
            symbol=sym,
            parameters=tuple(params),
            ranks=tuple((name, array.rank) for name, array in spec.arrays.items()),
        ),
    )


def op_layout(
    op: str, source: str, imports: list[str], body: str, ports: list[ProvenPort]
) -> OpLayout:
    """The op's files from its ports; `source` is its cutile module's path, `imports`
    and `body` the module's host code (`tilegym_backend.op_source.host_code`)."""
    kernels = [_kernel(op, port, len(ports), source) for port in ports]
    ffi = render_file(op, [k.ffi for k in kernels], {k.module: k.entries for k in kernels}, source)
    return OpLayout(
        kernel_rs=format_rust(kernel_file(op, [k.module_text for k in kernels])),
        ffi_rs=format_rust(ffi),
        wrapper=render_wrapper(op, source, imports, body, [k.port for k in kernels]),
    )
