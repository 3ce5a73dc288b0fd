"""Deliver a port as TileGym's own cutile-rs backend (`tileport tilegym add`).

For one op: its cutile module(s) and the kernels recorded for them, a port spec
per kernel from the records, the kernel writer's port of each (every one must be
COMPILED), the host stage's TileGym layout of them (`host_builder.tilegym_layout`:
`<op>_kernel/{kernel.rs, ffi.rs}` and the wrapper `<op>.py`), registered in the
checkout (the crate's `mod <op>`, the wrapper's import, "cutile-rs" in the op's test
backends), and `git diff` of them against HEAD.

Nothing is written unless every step succeeded, files with local changes are
never touched, and a run that would write what is already there changes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from nodes.host_builder.binding import BindingError
from nodes.host_builder.rust_entry import RustSourceError
from nodes.host_builder.stage import StageFailure
from nodes.host_builder.tilegym_ffi import FfiError
from nodes.host_builder.tilegym_kernel import KernelRsError
from nodes.host_builder.tilegym_layout import ProvenPort, op_layout
from nodes.kernel_writer.stage import port_kernel
from nodes.spec_writer.writer import WrittenSpec, read_signature_hints, write_specs
from nodes.tilegym_backend.checkout import (
    CRATE_LIB,
    CUTILE_RS,
    PACKAGE_INIT,
    TILEPORT_HOST_FILES,
    TILEPORT_MODULES,
    CheckoutError,
    OpFiles,
    check_checkout,
    diff,
    find_test,
    local_changes,
    with_backend,
    with_import,
    with_module,
    with_tileport_modules,
)
from nodes.tilegym_backend.crate_pin import CratePinError, migrated_crate
from nodes.tilegym_backend.op_source import (
    HostCode,
    OpModule,
    OpSourceError,
    find_op,
    host_code,
)
from schemas.kernel_writer import REPORT_FILE, PortReport
from schemas.launch_capture import LaunchRecord
from schemas.port_spec import PortSpecError
from schemas.tilegym_backend import MARKER, AddOutcome, AddResult, KernelPort
from schemas.verdicts import KernelWriterVerdict
from toolchain.rust_export import ExporterUnavailable
from toolchain.rustfmt import RustfmtError

SOURCE_ROOT = Path("src")
SPEC_COPY = "spec.port.yaml"  # the spec a kept port was made from, beside its report


class Refused(Exception):
    """The op is not added; the message says why."""


def _port(spec_path: Path, ports: Path) -> ProvenPort:
    """The kernel writer's port of one spec; one kept in `ports` from the same spec
    text is taken as it is."""
    out = ports / spec_path.name.removesuffix(".port.yaml")
    text = spec_path.read_text(encoding="utf-8")
    kept = out / SPEC_COPY
    if not (kept.is_file() and kept.read_text(encoding="utf-8") == text):
        shutil.rmtree(out, ignore_errors=True)
        port_kernel(spec_path, out)
        kept.write_text(text, encoding="utf-8")
    report = PortReport.model_validate_json((out / REPORT_FILE).read_text(encoding="utf-8"))
    return ProvenPort(spec_path, out, report)


def _only_module(op: str, modules: list[OpModule]) -> OpModule:
    if not modules:
        raise Refused(
            f"unknown op {op!r}: no module under src/tilegym/ops/cutile registers "
            f'@register_impl("{op}", backend="cutile")'
        )
    if len(modules) > 1:
        paths = ", ".join(str(m.path) for m in modules)
        raise Refused(f"{op} is registered by {len(modules)} modules ({paths}); expected one")
    return modules[0]


def _refuse_others(checkout: Path, op: str) -> None:
    """An op TileGym already has a cutile-rs backend for is not overwritten."""
    registers = f'@register_impl("{op}", backend="cutile-rs")'
    for path in sorted((checkout / CUTILE_RS).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if MARKER not in text and (registers in text or path.stem == op):
            raise Refused(
                f"TileGym's own {path.relative_to(checkout)} holds cutile-rs {op}, "
                "not written by tileport: not replaced"
            )


def _ports(
    checkout: Path,
    module: OpModule,
    kernels: list[str],
    records: list[LaunchRecord],
    signatures: list[Path],
    work: Path,
) -> list[ProvenPort]:
    if not kernels:
        raise Refused(f"{module.function.name} in {module.path} launches no @ct.kernel")
    mine = [r for r in records if Path(r.file) == module.path and r.kernel in kernels]
    unrecorded = sorted(set(kernels) - {r.kernel for r in mine})
    if unrecorded:
        raise Refused(
            f"no launches recorded of {', '.join(unrecorded)} ({module.path}): "
            "record them with tileport capture"
        )
    hints: dict[str, str] = {}
    for path in signatures:
        hints.update(read_signature_hints(path))

    def ported(literal: dict[tuple[str, str], list[str]]) -> list[tuple[WrittenSpec, ProvenPort]]:
        # Every class a call through tilegym.ops can launch, not only the recorded.
        written, problems = write_specs(
            mine, checkout / SOURCE_ROOT, work / "specs", hints, literal, widen=True
        )
        if problems:
            raise Refused("no port spec for: " + "; ".join(problems))
        return [(spec, _port(spec.path, work / "ports")) for spec in written]

    first = ported({})
    # Entries specialised to literal constants serve only the constant sets their
    # configurations had: the specs are written again to prove every recorded set.
    literal = {
        (spec.module, spec.kernel): sorted(
            {name for entry in port.report.literal_entries for name in entry.bindings}
        )
        for spec, port in first
        if port.report.literal_entries
    }
    return [port for _, port in (ported(literal) if literal else first)]


def _texts(
    checkout: Path, files: OpFiles, module: OpModule, host: HostCode, ports: list[ProvenPort]
) -> dict[Path, str]:
    """The new text of every file the op touches."""
    op = files.op
    layout = op_layout(op, str(module.path), host.imports, host.body, ports)
    current = {p: (checkout / p).read_text(encoding="utf-8") for p in (CRATE_LIB, PACKAGE_INIT)}
    test = (checkout / files.test).read_text(encoding="utf-8")
    texts = {
        files.kernel_rs: layout.kernel_rs,
        files.ffi_rs: layout.ffi_rs,
        files.wrapper: layout.wrapper,
        CRATE_LIB: with_module(with_tileport_modules(current[CRATE_LIB]), op),
        **{
            path: source.read_text(encoding="utf-8")
            for path, source in (TILEPORT_MODULES | TILEPORT_HOST_FILES).items()
        },
        PACKAGE_INIT: with_import(current[PACKAGE_INIT], op),
        files.test: with_backend(test, files.test),
    }
    return {**migrated_crate(checkout), **texts}


def add_op(
    checkout: Path, op: str, records: list[LaunchRecord], signatures: list[Path], work: Path
) -> AddResult:
    """Add `op` to the checkout's cutile-rs backend, or say why not. `signatures` are
    files of entry symbols and hints (signatures.jsonl, launch records; absent ones
    are skipped); `work/<op>` holds the op's specs and ports (a port made from the
    same spec text is reused)."""
    result = AddResult(op=op, outcome=AddOutcome.REFUSED)
    try:
        check_checkout(checkout)
        module = _only_module(op, find_op(checkout / SOURCE_ROOT, op))
        result = result.model_copy(update={"modules": [str(module.path)]})
        _refuse_others(checkout, op)
        files = OpFiles(op, find_test(checkout, op))
        source = (checkout / SOURCE_ROOT / module.path).read_text(encoding="utf-8")
        host = host_code(module, source)
        # A folder per op: two ops' kernels may share a name (mla_decoding and
        # mla_decoding_split_kv each have a _naive_absorb_mla_transpose_kernel).
        ports = _ports(checkout, module, host.kernels, records, signatures, work / op)
        kernels = [
            KernelPort(
                kernel=p.report.kernel,
                spec=p.spec_path.name,
                verdict=p.report.verdict,
                summary=p.report.summary,
            )
            for p in ports
        ]
        result = result.model_copy(update={"kernels": kernels})
        failed = [k for k in kernels if k.verdict is not KernelWriterVerdict.COMPILED]
        if failed:
            verdicts = "; ".join(f"{k.kernel}: {k.verdict} ({k.summary})" for k in failed)
            raise Refused(f"not every kernel of {op} ported COMPILED: {verdicts}")
        texts = _texts(checkout, files, module, host, ports)
        # A file with local changes is left alone unless it already holds what
        # this run writes (an earlier run's output).
        dirty = [
            p for p in local_changes(checkout, list(texts)) if _read(checkout / p) != texts[Path(p)]
        ]
        if dirty:
            raise Refused(
                "local changes in files this would write (commit or discard them first): "
                + ", ".join(dirty)
            )
    except (
        Refused,
        CheckoutError,
        OpSourceError,
        BindingError,
        RustSourceError,
        FfiError,
        KernelRsError,
        RustfmtError,
        StageFailure,
        PortSpecError,
        ExporterUnavailable,
        CratePinError,
    ) as error:
        return result.model_copy(update={"reason": str(error)})
    changed = [p for p, text in texts.items() if _read(checkout / p) != text]
    for path in changed:
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_text(texts[path], encoding="utf-8")
    return result.model_copy(
        update={
            "outcome": AddOutcome.ADDED if changed else AddOutcome.UNCHANGED,
            "changed": [str(p) for p in changed],
            "patch": diff(checkout, list(texts)),
        }
    )


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None
