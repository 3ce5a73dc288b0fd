"""A variant's reference taken from a Tile IR bytecode dump instead of an export.

A port spec's variant may name a bytecode file (`reference_bytecode`): what
cuTile Python writes under `CUDA_TILE_DUMP_BYTECODE=<dir>` while it compiles,
or what a Triton build with the Tile IR backend writes. The dump is used as it
is: its header is checked (magic, bytecode version 13.3), it is copied to
`<variant>.bytecode`, disassembled with tileirdisasm (with and without `-g`),
assembled for each cubin target with tileiras, and described by the same
`VariantExport` an export writes, its entry symbol read from the IR. A dump is
one specialisation: nothing else can be compiled from it.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from schemas.port_spec import EntrySymbol
from schemas.reference_export import (
    ErrorKind,
    ExportError,
    ExportRecord,
    Specialisation,
    VariantExport,
    VariantTimings,
)
from toolchain.tools import ToolError, tileiras, tileirdisasm

MAGIC = b"\x7fTileIR\x00"
HEADER_BYTES = len(MAGIC) + 4  # then major (u8), minor (u8), patch (u16, little-endian)
REQUIRED_VERSION = "13.3"  # what cutile-rs writes: both sides of a comparison are 13.3
_FILE_LOCATION = re.compile(r'loc\("([^"]+)":\d+:\d+\)')
# An entry's header as either printer writes it (tileirdisasm's bare `entry @k(`, or
# `cuda_tile.entry`): only the symbols are read here; tileir/ parses the IR itself.
_ENTRY = re.compile(
    r'^\s*(?:cuda_tile\.)?entry\s+@([A-Za-z0-9_$.\-]+|"(?:[^"\\\n]|\\.)*")', re.MULTILINE
)


MAX_DUMP_BYTES = 16 << 20  # a kernel's bytecode is kilobytes; this bounds what is read


class DumpError(Exception):
    """The dump cannot be the variant's reference; `error` says why."""

    def __init__(self, error: ExportError) -> None:
        super().__init__(error.one_line())
        self.error = error


def _fail(dump: Path, variant: str, message: str, kind: ErrorKind = "spec_error") -> DumpError:
    return DumpError(ExportError(kind=kind, message=message, file=str(dump), variant=variant))


def _what_it_is(head: bytes) -> str:
    if head.startswith(b"\x7fELF"):
        return "an ELF file (a cubin?)"
    if head and all(32 <= byte < 127 or byte in b"\t\r\n" for byte in head):
        return "a text file (MLIR text? the bytecode is what CUDA_TILE_DUMP_BYTECODE writes)"
    return f"a file starting {head[:8].hex(' ') or '(empty)'}"


def bytecode_version(dump: Path, variant: str) -> str:
    """The Tile IR bytecode version in the dump's header ("13.3"); DumpError when the
    file is missing or is not Tile IR bytecode."""
    if dump.is_symlink() or (dump.exists() and not dump.is_file()):
        # A device, a pipe or a link would be read as the reference (/dev/zero grows
        # without end); a dump is a plain file that came with the spec.
        raise _fail(dump, variant, "reference_bytecode: not a regular file")
    try:
        if dump.stat().st_size > MAX_DUMP_BYTES:
            message = f"reference_bytecode: larger than {MAX_DUMP_BYTES} bytes"
            raise _fail(dump, variant, message)
        with dump.open("rb") as stream:
            head = stream.read(HEADER_BYTES)
    except FileNotFoundError:
        raise _fail(dump, variant, "reference_bytecode: no such file") from None
    except OSError as exc:
        raise _fail(dump, variant, f"reference_bytecode: {exc.strerror or exc}") from None
    if len(head) < HEADER_BYTES or not head.startswith(MAGIC):
        message = f"reference_bytecode: not Tile IR bytecode: {_what_it_is(head)}"
        raise _fail(dump, variant, message + f", not the magic {MAGIC.hex(' ')}")
    major, minor = head[len(MAGIC)], head[len(MAGIC) + 1]
    patch = int.from_bytes(head[len(MAGIC) + 2 :], "little")
    return f"{major}.{minor}" + (f".{patch}" if patch else "")


def entry_symbols(mlir: str) -> list[str]:
    """The entry symbols of Tile IR text, in order (a quoted symbol keeps its quotes)."""
    return _ENTRY.findall(mlir)


def _one_line(exc: Exception) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _disassemble(dump: Path, variant: str, with_locations: bool) -> str:
    try:
        return tileirdisasm(dump, with_locations=with_locations, submitted=True)
    except ToolError as exc:
        message = f"reference_bytecode: tileirdisasm cannot read it: {_one_line(exc)}"
        raise _fail(dump, variant, message) from None


def _wrong_version(dump: Path, variant: str, version: str) -> DumpError:
    """The version error, with what tileirdisasm makes of the file."""
    try:
        entries = entry_symbols(tileirdisasm(dump, submitted=True))
        report = f"tileirdisasm reads it (entry {', '.join('@' + e for e in entries)})"
    except ToolError as exc:
        report = _one_line(exc)
    message = (
        f"reference_bytecode: Tile IR bytecode {version}, not {REQUIRED_VERSION}: both "
        f"sides of a comparison must be {REQUIRED_VERSION} (what cutile-rs writes); dump the "
        f"kernel at {REQUIRED_VERSION} (cuTile Python: export_kernel(..., bytecode_version="
        f"'{REQUIRED_VERSION}'); a JIT launch dumps the newest version its tileiras reads). "
        f"{report}"
    )
    return _fail(dump, variant, message)


def _entry_symbol(dump: Path, variant: str, mlir: str, entry_symbol: EntrySymbol) -> str:
    symbols = entry_symbols(mlir)
    if len(symbols) != 1:
        shown = ", ".join("@" + s for s in symbols)
        message = f"reference_bytecode: {len(symbols)} entries ({shown}), not one"
        raise _fail(dump, variant, message)
    if entry_symbol.naming == "fixed" and symbols[0] != entry_symbol.symbol:
        fixed = entry_symbol.symbol
        message = f"reference_bytecode: entry @{symbols[0]}, but the spec fixes @{fixed}"
        raise _fail(dump, variant, message)
    return symbols[0]


def import_dump(
    dump: Path,
    specialisation: Specialisation,
    out_dir: Path,
    *,
    cubin_targets: Sequence[str],
    entry_symbol: EntrySymbol,
) -> VariantExport:
    """Check `dump` and write the variant's artefacts into `out_dir`, as an export
    of `specialisation` would; raises DumpError naming the file."""
    variant = specialisation.variant
    started = time.perf_counter()
    version = bytecode_version(dump, variant)
    if version != REQUIRED_VERSION:
        raise _wrong_version(dump, variant, version)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = {
        "bytecode": f"{variant}.bytecode",
        "mlir": f"{variant}.mlir",
        "loc_mlir": f"{variant}.loc.mlir",
    }
    bytecode = out_dir / names["bytecode"]
    shutil.copyfile(dump, bytecode)
    bytecode_s = time.perf_counter() - started
    started = time.perf_counter()
    mlir = _disassemble(dump, variant, with_locations=False)
    mlir_s = time.perf_counter() - started
    (out_dir / names["mlir"]).write_text(mlir, encoding="utf-8")
    loc_mlir = _disassemble(dump, variant, with_locations=True)
    (out_dir / names["loc_mlir"]).write_text(loc_mlir, encoding="utf-8")
    symbol = _entry_symbol(dump, variant, mlir, entry_symbol)
    cubins = {t: f"{variant}.{t}.cubin" for t in cubin_targets}
    cubin_s: dict[str, float] = {}
    for target, cubin in cubins.items():
        started = time.perf_counter()
        try:
            tileiras(bytecode, out_dir / cubin, target, submitted=True)
        except ToolError as exc:
            message = f"{target}: {_one_line(exc)}"
            raise _fail(dump, variant, message, kind="toolchain_error") from None
        cubin_s[target] = time.perf_counter() - started
    return VariantExport(
        variant=variant,
        symbol=symbol,
        cubins=cubins,
        timings=VariantTimings(bytecode_s=bytecode_s, mlir_s=mlir_s, cubin_s=cubin_s),
        specialisation=specialisation,
        dump=str(dump),
        **names,
    )


def location_files(loc_mlir: str) -> set[str]:
    """The source files the IR's locations name (none: the dump has no locations)."""
    return set(_FILE_LOCATION.findall(loc_mlir))


def dump_notes(record: ExportRecord, out_dir: Path, source: str) -> list[str]:
    """One line per variant taken from a dump: the file, that nothing can be
    probed, and where its locations (if any) point."""
    notes = []
    for variant in record.variants:
        if variant.dump is None:
            continue
        files = location_files((out_dir / variant.loc_mlir).read_text())
        if not files:
            where = "it carries no source locations: names come from the IR, not the source"
        elif {Path(f).name for f in files} != {Path(source).name}:
            where = f"its locations name {', '.join(sorted(files))}, not the spec's {source}"
        else:
            where = f"its locations name {source}"
        notes.append(
            f"variant {variant.variant}: reference is the bytecode dump {variant.dump} "
            f"(bytecode {REQUIRED_VERSION}, entry {variant.symbol}), taken as configuration "
            f"{variant.specialisation.config}; no other specialisation can be compiled from "
            f"it; {where}"
        )
    return notes
