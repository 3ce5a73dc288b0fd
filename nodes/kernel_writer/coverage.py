"""What of the installed cuTile toolchain the kernel writer covers: every op of the
`cuda_tile` dialect (the op list of cuda-tile's own bytecode encoder, the installed
package, not a list typed here) and every dtype cuTile Python names, each with how
a port gets it: the op table's cutile-rs construct (docs/OP_MAPPING.md), the
upstream gap that keeps it out (UPSTREAM_GAPS below: docs/UPSTREAM_GAPS.md holds
each gap's reproducer), or not yet.

    python -m nodes.kernel_writer.coverage > docs/DIALECT_COVERAGE.md

tests/kernel_writer/test_coverage.py fails when the installed toolchain has an op or
a dtype the committed table lacks, or the table no longer says what the code does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, get_args

from nodes.kernel_writer.op_table import OP_TABLE
from schemas.port_spec import DTypeName

GAPS_DOC: Final = Path(__file__).resolve().parents[2] / "docs" / "UPSTREAM_GAPS.md"

# Ops that are the structure a module is written in, not something a kernel body lifts.
STRUCTURE: Final = {
    "module": "the `#[cutile::module]` mod",
    "entry": "the `#[cutile::entry()]` fn",
    "global": "not emitted by cuTile Python kernels",
    "get_global": "not emitted by cuTile Python kernels",
}
# Ops and dtypes no port can have with cutile-rs 0.5.0 and cuTile Python 1.7, each with
# the docs/UPSTREAM_GAPS.md section (its `## Gn:` heading is the table's line) that
# holds the reproducer: the one place an op is declared an upstream gap.
UPSTREAM_GAPS: Final[dict[str, str]] = {
    "fpowi": "G19",
    "gdc_wait_tko": "G20",
    "gdc_launch_dependents_tko": "G20",
    "insert": "G20",
    "memory_fence_alias_tko": "G21",
    "multimem_load_reduce_view_tko": "G21",
    "multimem_reduce_view_tko": "G21",
    "multimem_store_view_tko": "G21",
    "preview_call": "G21",
    "float4_e2m1fn": "G22",
    "float8_e5m3fnu": "G23",
}
# Dtypes that port within a kernel but are no spec dtype (schemas.port_spec's
# REFUSED_DTYPES says why), each with what a kernel does with it.
KERNEL_DTYPES: Final[dict[str, str]] = {
    "float4_e2m1fn": "ct.astype to and from it and ct.unpack_from_bytes of its packed "
    "uint8 pairs port, for sm_100 (fp4_codec)",
}
_GAP_HEADING = re.compile(r"^## (G\d+): (.+)$", re.MULTILINE)
_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")


def dialect_name(encoder: str) -> str:
    """The dialect's name of an op from its encoder's class name: `AtomicCASTko` is
    `atomic_cas_tko`, `ShLI` is `shli`, `IToF` is `itof` (one- and two-capital
    pieces are the type letters that the dialect writes without a separator)."""
    words: list[str] = []
    prefix = ""
    for token in _TOKEN.findall(encoder):
        if token.isupper() and len(token) < 3:
            if words:
                words[-1] += token.lower()
            else:
                prefix += token.lower()
            continue
        words.append(prefix + token.lower())
        prefix = ""
    return "_".join(words)


def dialect_ops() -> list[str]:
    """Every op the installed cuda-tile can write to bytecode, by its dialect name."""
    from cuda.tile._bytecode import encodings

    encoder = re.compile(r"encode_([A-Z]\w*)Op")
    return sorted(
        dialect_name(found.group(1))
        for found in map(encoder.fullmatch, dir(encodings))
        if found is not None
    )


def cutile_dtypes() -> list[str]:
    """Every dtype cuTile Python names (`ct.float8_e8m0fnu`, ...)."""
    import cuda.tile as ct

    return sorted(name for name in dir(ct) if isinstance(getattr(ct, name), ct.DType))


def gap_titles(text: str | None = None) -> dict[str, str]:
    """Each `## Gn: title` section of docs/UPSTREAM_GAPS.md, by its id."""
    found = _GAP_HEADING.findall(GAPS_DOC.read_text() if text is None else text)
    return {gap: title.strip() for gap, title in found}


def _gap_status(name: str, titles: dict[str, str]) -> str:
    gap = UPSTREAM_GAPS[name]
    if gap not in titles:
        raise KeyError(f"{name} is marked {gap}, which docs/UPSTREAM_GAPS.md has no section for")
    return f"upstream gap {gap}: {titles[gap].replace('|', '/')}"


def op_rows() -> list[tuple[str, str]]:
    mapped = {entry.op: entry for entry in OP_TABLE}
    titles = gap_titles()
    rows = []
    for op in dialect_ops():
        if op in mapped:
            gaps = f" (gaps {', '.join(mapped[op].gaps)})" if mapped[op].gaps else ""
            rows.append((op, f"ported: {mapped[op].rust.replace('|', '/')}{gaps}"))
        elif op in STRUCTURE:
            rows.append((op, f"structure: {STRUCTURE[op]}"))
        elif op in UPSTREAM_GAPS:
            rows.append((op, _gap_status(op, titles)))
        else:
            rows.append((op, "not yet: a kernel using it is BLOCKED, naming the op"))
    return rows


def dtype_rows() -> list[tuple[str, str]]:
    spec = set(get_args(DTypeName))
    titles = gap_titles()
    rows = []
    for name in cutile_dtypes():
        if name.rstrip("_") in spec:  # cuTile spells bool `bool_`
            rows.append((name, "a spec dtype"))
        else:
            kernel = [f"within a kernel: {KERNEL_DTYPES[name]}"] if name in KERNEL_DTYPES else []
            gap = _gap_status(name, titles) if name in UPSTREAM_GAPS else "not yet a spec dtype"
            rows.append((name, "; ".join([*kernel, gap])))
    return rows


def markdown() -> str:
    ops = op_rows()
    ported = sum(status.startswith("ported") for _, status in ops)
    gaps = sum(status.startswith("upstream gap") for _, status in ops)
    dtypes = dtype_rows()
    lines = [
        "# Dialect coverage: every cuda_tile op and cuTile dtype",
        "",
        "Printed by `python -m nodes.kernel_writer.coverage` from the installed cuda-tile",
        "(its bytecode encoder's op list and cuTile Python's dtypes) and the kernel",
        "writer's op table; `tests/kernel_writer/test_coverage.py` fails when they and",
        "this page differ. Each ported op has a probe kernel that compiles to it and a",
        "lift test (docs/OP_MAPPING.md); each upstream gap has a section in",
        "docs/UPSTREAM_GAPS.md with a minimal reproducer.",
        "",
        f"Ops: {ported} of {len(ops)} ported; upstream gaps: {gaps}.",
        "",
        "| op | how a port gets it |",
        "|---|---|",
        *(f"| `{op}` | {status} |" for op, status in ops),
        "",
        f"Dtypes: {sum(s == 'a spec dtype' for _, s in dtypes)} of {len(dtypes)} spec dtypes.",
        "",
        "| dtype | |",
        "|---|---|",
        *(f"| `{name}` | {status} |" for name, status in dtypes),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
