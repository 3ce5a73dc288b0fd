"""What the web pages show, gathered from the database and the run's files. A run
page leads with the result: the verdict and its level, `kernel.rs` highlighted,
the patch; then the IR diff of each variant and configuration side by side
(findings from the Tile IR engine, critical ones first and highlighted on their
lines; unchanged lines and dead constants folded away), the perf table and chart,
correctness cases, and the downloads grouped by kind with their sizes."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, TypeVar

from markupsafe import Markup
from pydantic import ValidationError
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, RustLexer
from sqlalchemy.orm import Session

from app import artifacts
from app.artifacts import ArtifactFile
from app.settings import Settings
from app.storage.models import Conversion
from app.web.charts import RatioBar, ratio_chart
from schemas.ir_diff import DiffReport, Finding, Severity
from schemas.reports import CorrectnessReport, DiffAnalysisReport, PerfReport, StageReport
from schemas.run_layout import GENERATED_DIR, REFERENCE_DIR
from tileir.diff import diff_texts
from tileir.lexer import IRSyntaxError
from tileir.mlir import parse_module
from tileir.resolve import is_dead_constant, resolve

MAX_IR_BYTES = 1_000_000
MAX_SOURCE_BYTES = 400_000
FOLD_CONTEXT = 3  # lines kept around a difference
SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARN: 1, Severity.EQUIVALENT: 2, Severity.NOISE: 3}
KERNEL_RS = f"{GENERATED_DIR}/kernel.rs"
PATCH = "service/port.patch"
# The kernel writer's per-configuration pairs: generated/<out>/<variant>__<config>.mlir
WRITER_PAIRS = (f"{GENERATED_DIR}/reference", f"{GENERATED_DIR}/generated")
DOWNLOAD_GROUPS = ("reports", "Rust and Python", "IR", "binaries", "inputs", "logs", "other")


@dataclass(frozen=True)
class DiffRow:
    left_no: int | None
    left: str
    right_no: int | None
    right: str
    mark: str  # "", "noise", "changed", "warn", "critical"


@dataclass(frozen=True)
class DiffBlock:
    """Consecutive rows: shown, or folded (equal lines and dead constants only)."""

    rows: list[DiffRow]
    folded: bool

    @property
    def noise(self) -> int:
        return sum(1 for row in self.rows if row.mark == "noise")


@dataclass
class VariantView:
    name: str
    level: str
    rows: list[DiffRow]
    findings: list[Finding]
    error: str = ""

    @property
    def critical(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.CRITICAL]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARN]

    def sort_key(self) -> tuple[int, int, str]:
        return (-len(self.critical), -len(self.warnings), self.name)

    def blocks(self) -> list[DiffBlock]:
        """The rows with every long stretch of equal or noise lines folded."""
        quiet = [row.mark in ("", "noise") for row in self.rows]
        blocks: list[DiffBlock] = []
        start = 0
        while start < len(self.rows):
            end = start
            while end < len(self.rows) and quiet[end] == quiet[start]:
                end += 1
            stretch = self.rows[start:end]
            keep_before = FOLD_CONTEXT if start > 0 else 0
            keep_after = FOLD_CONTEXT if end < len(self.rows) else 0
            if quiet[start] and len(stretch) > keep_before + keep_after + 1:
                cut = len(stretch) - keep_after
                blocks.append(DiffBlock(stretch[:keep_before], folded=False))
                blocks.append(DiffBlock(stretch[keep_before:cut], folded=True))
                blocks.append(DiffBlock(stretch[cut:], folded=False))
            else:
                blocks.append(DiffBlock(stretch, folded=False))
            start = end
        return [block for block in blocks if block.rows]


@dataclass(frozen=True)
class Download:
    path: str
    size: int

    @property
    def size_text(self) -> str:
        return human_size(self.size)


@dataclass
class DownloadGroup:
    name: str
    files: list[Download]

    @property
    def size(self) -> int:
        return sum(file.size for file in self.files)

    @property
    def size_text(self) -> str:
        return human_size(self.size)


@dataclass(frozen=True)
class SourceView:
    path: str
    size: int
    html: Markup


@dataclass
class PerfView:
    report: PerfReport
    chart_svg: str


@dataclass
class RunPage:
    conversion: Conversion
    variants: list[VariantView] = field(default_factory=list)
    analyst: DiffAnalysisReport | None = None
    perf: PerfView | None = None
    correctness: CorrectnessReport | None = None
    kernel: SourceView | None = None
    patch: SourceView | None = None
    downloads: list[DownloadGroup] = field(default_factory=list)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def download_group(path: str, kind: str) -> str:
    suffix = PurePosixPath(path).suffix
    if kind == "report" or path.startswith("service/gpu-results/") or suffix == ".json":
        return "reports"
    if kind == "input":
        return "inputs"
    if kind == "log":
        return "logs"
    if kind == "ir":
        return "IR"
    if kind == "binary" or suffix in {".so", ".cubin", ".rlib"}:
        return "binaries"
    if kind in ("source", "patch"):
        return "Rust and Python"
    return "other"


def group_downloads(found: list[ArtifactFile]) -> list[DownloadGroup]:
    """Downloads by kind (reports first), each group in path order, with sizes."""
    groups = {name: DownloadGroup(name, []) for name in DOWNLOAD_GROUPS}
    for artifact in found:
        group = groups[download_group(artifact.path, artifact.kind)]
        group.files.append(Download(artifact.path, artifact.size))
    return [group for group in groups.values() if group.files]


def source_view(
    files: dict[str, ArtifactFile], path: str, lexer: RustLexer | DiffLexer
) -> SourceView | None:
    artifact = files.get(path)
    if artifact is None or artifact.size > MAX_SOURCE_BYTES:
        return None
    text = artifacts.read_text(artifact)
    html = highlight(text, lexer, HtmlFormatter(nowrap=True))
    return SourceView(path, artifact.size, Markup(html))  # Pygments escapes the text


def side_by_side(left: list[str], right: list[str]) -> list[tuple[int | None, int | None]]:
    """Line-number pairs of an aligned two-column view (None: no line on that side)."""
    pairs: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for _, a0, a1, b0, b1 in matcher.get_opcodes():
        span = max(a1 - a0, b1 - b0)
        for offset in range(span):
            a = a0 + offset + 1 if a0 + offset < a1 else None
            b = b0 + offset + 1 if b0 + offset < b1 else None
            pairs.append((a, b))
    return pairs


def dead_constant_lines(text: str) -> set[int]:
    """Lines of constants nothing uses (noise: the canonical form drops them)."""
    try:
        module = parse_module(text)
    except (IRSyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    for entry in module.entries:
        resolved = resolve(entry)
        lines |= {op.line for op in entry.walk() if is_dead_constant(op, resolved)}
    return lines


def finding_lines(findings: list[Finding]) -> tuple[dict[int, str], dict[int, str]]:
    """Line -> mark on each side; a critical mark wins over a warning."""
    rank = {Severity.CRITICAL: "critical", Severity.WARN: "warn"}
    left: dict[int, str] = {}
    right: dict[int, str] = {}
    for finding in findings:
        mark = rank.get(finding.severity)
        if mark is None:
            continue
        for sites, site in ((left, finding.ref), (right, finding.gen)):
            if site is not None and sites.get(site.line) != "critical":
                sites[site.line] = mark
    return left, right


@lru_cache(maxsize=256)
def cached_diff(reference: str, generated: str) -> DiffReport:
    return diff_texts(reference, generated)


def compare(reference: str, generated: str) -> tuple[DiffReport | None, str]:
    try:
        return cached_diff(reference, generated), ""
    except Exception as error:
        # A run's IR text that the engine cannot parse is shown, not fatal.
        return None, f"the IR could not be compared: {type(error).__name__}: {error}"


def variant_view(name: str, reference: str, generated: str) -> VariantView:
    left, right = reference.splitlines(), generated.splitlines()
    report, failure = compare(reference, generated)
    marks_left, marks_right = finding_lines(report.findings) if report else ({}, {})
    dead_left, dead_right = dead_constant_lines(reference), dead_constant_lines(generated)
    rows: list[DiffRow] = []
    for a, b in side_by_side(left, right):
        text_a = left[a - 1] if a else ""
        text_b = right[b - 1] if b else ""
        mark = marks_left.get(a or 0) or marks_right.get(b or 0) or ""
        dead = (a is None or a in dead_left) and (b is None or b in dead_right)
        if not mark and dead and (a or b):
            mark = "noise"
        # Equal canonical forms: the texts differ only in names and dead constants.
        elif not mark and text_a != text_b and not (report and report.exact):
            mark = "changed"
        rows.append(DiffRow(a, text_a, b, text_b, mark))
    if report is None:
        return VariantView(name, "unknown", rows, [], failure)
    findings = sorted(report.findings, key=lambda f: SEVERITY_RANK[f.severity])
    return VariantView(name, report.level.value, rows, findings)


ReportT = TypeVar("ReportT", bound=StageReport)


def load_model(files: dict[str, ArtifactFile], path: str, model: type[ReportT]) -> ReportT | None:
    artifact = files.get(path)
    if artifact is None:
        return None
    try:
        return model.model_validate_json(artifacts.read_text(artifact))
    except ValidationError:
        return None


def ir_pairs(files: dict[str, ArtifactFile]) -> list[tuple[str, ArtifactFile, ArtifactFile]]:
    """(name, reference, generated) IR files: the analyzer's reference/<variant>.mlir
    beside generated/<variant>.mlir, and the kernel writer's per-configuration pairs."""
    pairs = []
    for ref_dir, gen_dir in ((REFERENCE_DIR, GENERATED_DIR), WRITER_PAIRS):
        for path, reference in sorted(files.items()):
            pure = PurePosixPath(path)
            if (
                pure.suffix != ".mlir"
                or str(pure.parent) != ref_dir
                or pure.name.endswith(".loc.mlir")
            ):
                continue
            generated = files.get(f"{gen_dir}/{pure.name}")
            if generated is not None and max(reference.size, generated.size) <= MAX_IR_BYTES:
                pairs.append((pure.stem, reference, generated))
    return pairs


def ir_variants(files: dict[str, ArtifactFile]) -> list[VariantView]:
    """Every IR pair's view, the ones with critical findings first."""
    views = [
        variant_view(name, artifacts.read_text(reference), artifacts.read_text(generated))
        for name, reference, generated in ir_pairs(files)
    ]
    return sorted(views, key=VariantView.sort_key)


def perf_view(report: PerfReport | None) -> PerfView | None:
    if report is None:
        return None
    bars = [RatioBar(f"{row.config_id} ({row.dtype})", row.ratio) for row in report.rows]
    return PerfView(report, ratio_chart(bars))


def run_page(session: Session, settings: Settings, conversion: Conversion) -> RunPage:
    found = artifacts.all_artifacts(session, settings, conversion.id)
    files = {artifact.path: artifact for artifact in found}
    return RunPage(
        conversion=conversion,
        variants=ir_variants(files),
        analyst=load_model(files, "reports/ir_diff.json", DiffAnalysisReport),
        perf=perf_view(load_model(files, "reports/perf.json", PerfReport)),
        correctness=load_model(files, "reports/correctness.json", CorrectnessReport),
        kernel=source_view(files, KERNEL_RS, RustLexer()),
        patch=source_view(files, PATCH, DiffLexer()),
        downloads=group_downloads(found),
    )


def pretty_json(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)
