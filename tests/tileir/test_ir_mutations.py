"""The mutation suite, FileCheck style: each tests/tileir/mutations/<case>.mlir
names its base IR and the findings the diff must report against it.

    // MUTATION: what was changed
    // BASE: ../fixtures/softmax.mlir
    // EXPECT: critical padding_value      (or: EXPECT: exact)
    // EXPECT-NOT: critical                (optional)
    // EXPECT-LEVEL: equivalent            (optional)
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from schemas.ir_diff import DiffReport, Level, Severity
from tileir.diff import diff_texts, render_human

HERE = Path(__file__).resolve().parent
MUTATIONS = HERE / "mutations"
CASES = sorted(MUTATIONS.glob("*.mlir"))
# What the suite must cover (docs/PIPELINE.md, "IR diff: what must match").
REQUIRED_CRITICAL = {
    "padding_value",
    "flush_to_zero",
    "rounding_mode",
    "tile_shape",
    "reduction",
    "memory_op_family",
    "mma",
    "pointer_assume",
    "scalar_assume_on_runtime_dim",
    "loop_structure",
    "optimization_hints",
    "tma",
}
DIRECTIVE = re.compile(r"^// (MUTATION|BASE|EXPECT|EXPECT-NOT|EXPECT-LEVEL): (.+)$")
MAX_CHANGED_LINES = 4


@dataclass
class Case:
    path: Path
    description: str
    base: Path
    expect: list[str]
    expect_not: list[str]
    level: str | None

    @property
    def text(self) -> str:
        return self.path.read_text()


def read_case(path: Path) -> Case:
    directives: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        found = DIRECTIVE.match(line)
        if found is None:
            break
        directives.setdefault(found.group(1), []).append(found.group(2).strip())
    assert "MUTATION" in directives and "BASE" in directives and "EXPECT" in directives, path.name
    return Case(
        path=path,
        description=directives["MUTATION"][0],
        base=(path.parent / directives["BASE"][0]).resolve(),
        expect=directives["EXPECT"],
        expect_not=directives.get("EXPECT-NOT", []),
        level=next(iter(directives.get("EXPECT-LEVEL", [])), None),
    )


def has_finding(report: DiffReport, expectation: str) -> bool:
    severity, _, category = expectation.partition(" ")
    return any(f.severity.value == severity and f.category == category for f in report.findings)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_mutation_is_flagged(path: Path) -> None:
    case = read_case(path)
    report = diff_texts(case.base.read_text(), case.text)
    shown = render_human(report)
    for expectation in case.expect:
        if expectation == "exact":
            assert report.exact and report.level is Level.EXACT, shown
            assert all(f.severity is Severity.NOISE for f in report.findings), shown
        else:
            if not expectation.startswith("noise"):
                assert not report.exact, shown
            assert has_finding(report, expectation), f"missing `{expectation}`\n{shown}"
            if expectation.startswith("critical"):
                assert report.level is Level.DIFFERENT, shown
    for severity in case.expect_not:
        assert all(f.severity.value != severity for f in report.findings), shown
    if case.level is not None:
        assert report.level.value == case.level, shown


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_mutation_is_a_single_point(path: Path) -> None:
    """A mutation (renamings aside) changes a few lines of its base."""
    case = read_case(path)
    if "renam" in case.description:
        return
    body = [line for line in case.text.splitlines() if not line.startswith("// ")]
    changed = [
        line
        for line in difflib.ndiff(case.base.read_text().splitlines(), body)
        if line.startswith(("+ ", "- "))
    ]
    assert 0 < len(changed) <= MAX_CHANGED_LINES, changed


def test_suite_covers_the_required_categories() -> None:
    cases = [read_case(path) for path in CASES]
    critical = {e.split(" ", 1)[1] for c in cases for e in c.expect if e.startswith("critical ")}
    assert sorted(REQUIRED_CRITICAL - critical) == []
    assert sum(1 for c in cases if any(e.startswith("critical") for e in c.expect)) >= 12
    assert sum(1 for c in cases if c.expect == ["exact"]) >= 3


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "tileir_mutation_generate", MUTATIONS / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_cases_match_the_generator() -> None:
    """The files are what generate.py derives from today's fixtures."""
    generator = load_generator()
    names = {m.name for m in generator.MUTATIONS}
    assert names == {path.stem for path in CASES}
    for mutation in generator.MUTATIONS:
        assert (MUTATIONS / f"{mutation.name}.mlir").read_text() == generator.render(mutation)


def test_a_case_without_expectations_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mlir"
    broken.write_text("// MUTATION: nothing\n// BASE: softmax.mlir\nentry @k() {\n}\n")
    with pytest.raises(AssertionError):
        read_case(broken)
