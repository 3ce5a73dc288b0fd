"""What the web pages show, gathered from the database and the run's files:
the stage timeline, the IR diff of each variant side by side (findings from
the Tile IR engine, critical ones highlighted on their lines), the perf table
and chart, correctness cases, downloads."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, TypeVar

from pydantic import ValidationError
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

MAX_IR_BYTES = 1_000_000


@dataclass(frozen=True)
class DiffRow:
    left_no: int | None
    left: str
    right_no: int | None
    right: str
    mark: str  # "", "changed", "warn", "critical"


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
    downloads: list[ArtifactFile] = field(default_factory=list)


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
    rows: list[DiffRow] = []
    for a, b in side_by_side(left, right):
        text_a = left[a - 1] if a else ""
        text_b = right[b - 1] if b else ""
        mark = marks_left.get(a or 0) or marks_right.get(b or 0) or ""
        # Equal canonical forms: the texts differ only in names and dead constants.
        if not mark and text_a != text_b and not (report and report.exact):
            mark = "changed"
        rows.append(DiffRow(a, text_a, b, text_b, mark))
    if report is None:
        return VariantView(name, "unknown", rows, [], failure)
    return VariantView(name, report.level.value, rows, report.findings)


ReportT = TypeVar("ReportT", bound=StageReport)


def load_model(files: dict[str, ArtifactFile], path: str, model: type[ReportT]) -> ReportT | None:
    artifact = files.get(path)
    if artifact is None:
        return None
    try:
        return model.model_validate_json(artifacts.read_text(artifact))
    except ValidationError:
        return None


def ir_variants(files: dict[str, ArtifactFile]) -> list[VariantView]:
    views: list[VariantView] = []
    for path, reference in sorted(files.items()):
        pure = PurePosixPath(path)
        if pure.parts[0] != REFERENCE_DIR or pure.suffix != ".mlir" or len(pure.parts) != 2:
            continue
        generated = files.get(f"{GENERATED_DIR}/{pure.name}")
        if generated is None or max(reference.size, generated.size) > MAX_IR_BYTES:
            continue
        views.append(
            variant_view(pure.stem, artifacts.read_text(reference), artifacts.read_text(generated))
        )
    return views


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
        downloads=found,
    )


def pretty_json(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)
