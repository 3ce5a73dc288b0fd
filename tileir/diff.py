"""Diff two Tile IRs: `exact` from the canonical forms, findings from an
op-by-op alignment, classified as docs/PIPELINE.md ("IR diff: what must match").

    report = diff_files(Path("ref.bytecode"), Path("gen.mlir"))
    print(render_human(report))          # or report.model_dump_json(indent=2)

Bad text raises IRSyntaxError (with the line); an unreadable or undecodable
file raises DisassemblyError; a missing one FileNotFoundError.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from schemas.ir_diff import DiffReport, EntrySummary, Finding, Level, Severity, SeverityCounts
from tileir import attrs, equivalences
from tileir.align import align
from tileir.canonical import canonicalize
from tileir.categories import finding
from tileir.classify import pair_findings, unmatched_findings
from tileir.ir import Entry, Module
from tileir.lexer import IRSyntaxError
from tileir.mlir import parse_module
from tileir.side import Side

BYTECODE_MAGIC = b"\x7fTileIR\x00"
SEVERITY_ORDER = [Severity.CRITICAL, Severity.WARN, Severity.EQUIVALENT, Severity.NOISE]
# Type-level differences repeat on every op that carries the type: report once.
TYPE_CATEGORIES = frozenset({"padding_value", "tile_shape", "dtype", "layout_attrs"})
DISASSEMBLE_TIMEOUT_S = 60


class DisassemblyError(RuntimeError):
    """tileirdisasm could not print a bytecode file."""


def diff_texts(ref_text: str, gen_text: str) -> DiffReport:
    """Diff two IR texts (either printer). Raises IRSyntaxError on bad text."""
    return diff_modules(parse_module(ref_text), parse_module(gen_text))


def diff_files(ref_path: Path, gen_path: Path) -> DiffReport:
    """Diff two files: `.bytecode` is printed with tileirdisasm first,
    anything else is read as IR text."""
    return diff_texts(read_ir(ref_path), read_ir(gen_path))


def read_ir(path: Path) -> str:
    data = path.read_bytes()
    if data.startswith(BYTECODE_MAGIC) or path.suffix == ".bytecode":
        return disassemble(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DisassemblyError(f"{path}: neither Tile IR bytecode nor UTF-8 text") from err


def disassemble(path: Path) -> str:
    from toolchain.env import toolchain_env

    try:
        done = subprocess.run(
            ["tileirdisasm", str(path)],
            env=toolchain_env(),
            capture_output=True,
            text=True,
            timeout=DISASSEMBLE_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as err:
        raise DisassemblyError("tileirdisasm not found (install cuda-tile[tileiras])") from err
    if done.returncode != 0:
        raise DisassemblyError(f"tileirdisasm {path}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def diff_modules(ref: Module, gen: Module) -> DiffReport:
    ref_canonical, gen_canonical = canonicalize(ref), canonicalize(gen)
    findings: list[Finding] = []
    summaries: list[EntrySummary] = []
    for index in range(max(len(ref.entries), len(gen.entries))):
        ref_entry = ref.entries[index] if index < len(ref.entries) else None
        gen_entry = gen.entries[index] if index < len(gen.entries) else None
        exact = (
            ref_entry is not None
            and gen_entry is not None
            and ref_canonical.entries[index].text == gen_canonical.entries[index].text
        )
        summaries.append(_summary(ref_entry, gen_entry, exact))
        findings.extend(_entry_findings(ref_entry, gen_entry, index, exact))
    findings = _ordered(_deduplicated(findings))
    exact_all = all(s.exact for s in summaries)
    return DiffReport(
        exact=exact_all,
        level=_level(exact_all, findings),
        counts=_counts(findings),
        findings=findings,
        entries=summaries,
        ref_printer=ref.source_printer,
        gen_printer=gen.source_printer,
    )


def _summary(ref: Entry | None, gen: Entry | None, exact: bool) -> EntrySummary:
    return EntrySummary(
        ref_symbol=ref.symbol if ref else None,
        gen_symbol=gen.symbol if gen else None,
        ref_ops=sum(1 for _ in ref.walk()) if ref else 0,
        gen_ops=sum(1 for _ in gen.walk()) if gen else 0,
        exact=exact,
    )


def _entry_findings(
    ref_entry: Entry | None, gen_entry: Entry | None, index: int, exact: bool
) -> list[Finding]:
    if ref_entry is None or gen_entry is None:
        which = "generated IR lacks" if gen_entry is None else "reference lacks"
        return [
            finding(Severity.CRITICAL, "entry_signature", "entry", f"the {which} entry #{index}")
        ]
    ref, gen = Side("ref", ref_entry, index), Side("gen", gen_entry, index)
    if exact:  # equal canonical forms: only noise can differ
        return list(_noise_findings(ref, gen))
    found = analyse_entries(ref, gen)
    if not found:
        found.append(
            finding(
                Severity.WARN,
                "unclassified",
                "entry",
                "canonical forms differ but no rule names the difference",
            )
        )
    return found


def analyse_entries(ref: Side, gen: Side) -> list[Finding]:
    """Every finding between two entries: align, recognise equivalences, classify."""
    alignment = align(ref, gen)
    found = list(_signature_findings(ref, gen))
    found += equivalences.detect(alignment)
    found += pair_findings(alignment)
    found += unmatched_findings(alignment)
    found += _noise_findings(ref, gen)
    found += _swizzle_findings(ref, gen)
    return found


def _signature_findings(ref: Side, gen: Side) -> Iterator[Finding]:
    ref_types = [attrs.squash(a.type) for a in ref.entry.args]
    gen_types = [attrs.squash(a.type) for a in gen.entry.args]
    if ref_types != gen_types:
        yield finding(
            Severity.CRITICAL,
            "entry_signature",
            "entry",
            f"entry parameters differ ({len(ref_types)} vs {len(gen_types)} arguments"
            + (", types differ)" if len(ref_types) == len(gen_types) else ")"),
            ref_attributes={"args": ", ".join(ref_types)},
            gen_attributes={"args": ", ".join(gen_types)},
        )
    ref_hints = attrs.hint_entries(ref.entry.attributes.get("optimization_hints", ""))
    gen_hints = attrs.hint_entries(gen.entry.attributes.get("optimization_hints", ""))
    for key in sorted(set(ref_hints) | set(gen_hints)):
        ref_value, gen_value = ref_hints.get(key, "absent"), gen_hints.get(key, "absent")
        if ref_value != gen_value:
            yield finding(
                Severity.CRITICAL,
                "optimization_hints",
                "entry",
                f"entry hint {key}: reference {ref_value}, generated {gen_value}",
                ref_attributes={key: ref_value},
                gen_attributes={key: gen_value},
            )


def _noise_findings(ref: Side, gen: Side) -> Iterator[Finding]:
    counts = (
        ("dead_constant", "dead constants", ref.dead_constants(), gen.dead_constants()),
        (
            "nonneg_assume",
            "non-negativity assumes (assume bounded<0, ?>)",
            ref.non_negative_assumes(),
            gen.non_negative_assumes(),
        ),
        (
            "trivial_assume",
            "assume div_by<1> (no claim)",
            ref.trivial_assumes(),
            gen.trivial_assumes(),
        ),
    )
    for category, what, ref_count, gen_count in counts:
        if ref_count != gen_count:
            yield finding(
                Severity.NOISE,
                category,
                "constant" if category == "dead_constant" else "assume",
                f"{what}: reference {ref_count}, generated {gen_count}",
                ref_attributes={"count": str(ref_count)},
                gen_attributes={"count": str(gen_count)},
            )
    ref_constants, gen_constants = ref.used_constants(), gen.used_constants()
    if ref_constants != gen_constants and set(ref_constants) == set(gen_constants):
        yield finding(
            Severity.NOISE,
            "constant_placement",
            "constant",
            f"the same constants, materialised {len(ref_constants)} vs {len(gen_constants)} times",
        )


def has_block_swizzle(side: Side) -> bool:
    """Tile indices of some view access computed through a grouped swizzle:
    a `mini` clamp together with a `divi`/`remi` split of the tile id."""
    ops = side.all_ops()
    if not any(op.name == "mini" for op in ops):
        return False
    for op in ops:
        if op.name not in ("load_view_tko", "store_view_tko"):
            continue
        indices = side.resolved.operand_ids(op)[1:]
        names = {producer.name for producer in side.backward_slice(indices)}
        if "mini" in names and names & {"divi", "remi"}:
            return True
    return False


def _swizzle_findings(ref: Side, gen: Side) -> Iterator[Finding]:
    if has_block_swizzle(ref) and not has_block_swizzle(gen):
        yield finding(
            Severity.WARN,
            "block_swizzle",
            "entry",
            "the reference swizzles tile indices (grouped order); the generated IR does not",
        )


def _deduplicated(findings: list[Finding]) -> list[Finding]:
    seen: set[str] = set()
    out: list[Finding] = []
    for item in findings:
        if item.category not in TYPE_CATEGORIES:
            out.append(item)
            continue
        key = f"{item.severity}|{item.category}|{item.ref_attributes}|{item.gen_attributes}"
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _ordered(findings: list[Finding]) -> list[Finding]:
    def key(item: Finding) -> tuple[int, int, int, int]:
        site = item.ref or item.gen
        return (
            SEVERITY_ORDER.index(item.severity),
            site.entry if site else -1,
            item.ref.line if item.ref else 0,
            item.gen.line if item.gen else 0,
        )

    return sorted(findings, key=key)


def _counts(findings: list[Finding]) -> SeverityCounts:
    counts = SeverityCounts()
    for item in findings:
        setattr(counts, item.severity.value, getattr(counts, item.severity.value) + 1)
    return counts


def _level(exact: bool, findings: list[Finding]) -> Level:
    """warn findings are notes: they do not lower the level below equivalent."""
    if exact:
        return Level.EXACT
    if any(item.severity is Severity.CRITICAL for item in findings):
        return Level.DIFFERENT
    return Level.EQUIVALENT


def render_human(report: DiffReport) -> str:
    counts = report.counts
    lines = [
        f"IR diff: {report.level.value} (exact: {'yes' if report.exact else 'no'})",
        f"  critical {counts.critical}, warn {counts.warn}, "
        f"equivalent {counts.equivalent}, noise {counts.noise}",
    ]
    for item in report.findings:
        lines.extend(_render_finding(item))
    return "\n".join(lines) + "\n"


def _render_finding(item: Finding) -> list[str]:
    where = " ".join(
        f"{label}:{site.line}" for label, site in (("ref", item.ref), ("gen", item.gen)) if site
    )
    lines = [f"{item.severity.value.upper():<10} {item.category:<28} {item.op:<20} {where}"]
    lines.append(f"    {item.message}")
    for label, site in (("ref", item.ref), ("gen", item.gen)):
        if site is not None:
            lines.append(f"    {label}: {site.text}")
    if item.fix:
        lines.append(f"    owner {item.owner.value}, cause {item.root_cause.value}: {item.fix}")
    return lines


__all__ = [
    "DisassemblyError",
    "IRSyntaxError",
    "analyse_entries",
    "diff_files",
    "diff_modules",
    "diff_texts",
    "read_ir",
    "render_human",
]
