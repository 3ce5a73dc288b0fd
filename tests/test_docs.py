"""The map is true: every document the code and docs cite is in the repository, and
docs/PIPELINE.md, the one definition of verdicts and levels, names exactly what
the code defines."""

from __future__ import annotations

import re
import subprocess
from enum import StrEnum
from pathlib import Path
from typing import get_args

import pytest

from schemas import verdicts
from schemas.exit_codes import EXIT_MEANINGS
from schemas.kernel_writer import COMPILED_LEVELS, GPU_DECIDED_LEVELS, SamenessLevel
from schemas.pipeline import Stage
from toolchain.env import REPO_ROOT

CITED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[A-Z][A-Z0-9_]*\.md)\b")
PLACEHOLDERS = {"NAME.md"}  # a file name pattern (`<name>.md`), not a document
TEXT_SUFFIXES = {".py", ".rs", ".md", ".j2", ".sh", ".toml", ".html", ".yaml", ".cpp"}
PIPELINE = REPO_ROOT / "docs" / "PIPELINE.md"


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [
        REPO_ROOT / name
        for name in listed.split("\0")
        if name and (Path(name).suffix in TEXT_SUFFIXES or Path(name).name == "Makefile")
    ]


def resolves(citation: str, citing: Path) -> bool:
    if "/" in citation:
        return (REPO_ROOT / citation).is_file() or (citing.parent / citation).is_file()
    return any(
        (folder / citation).is_file() for folder in (REPO_ROOT / "docs", REPO_ROOT, citing.parent)
    )


def test_every_cited_document_exists() -> None:
    files = tracked_text_files()
    if not files:
        pytest.skip("not a git checkout")
    missing = sorted(
        f"{path.relative_to(REPO_ROOT)}: {citation}"
        for path in files
        if path.is_file()
        for citation in set(CITED.findall(path.read_text(errors="replace")))
        if citation not in PLACEHOLDERS and not resolves(citation, path)
    )
    assert not missing, "cited documents missing:\n" + "\n".join(missing)


def test_the_citation_pattern_finds_and_misses_what_it_should(tmp_path: Path) -> None:
    text = "see PIPELINE.md and docs/C_ABI.md, not readme.md or foo/NOPE.mdx"
    assert CITED.findall(text) == ["PIPELINE.md", "docs/C_ABI.md"]
    assert not resolves("docs/NOT_THERE" + ".md", tmp_path / "x.py")


VERDICT_ENUMS = [
    value
    for value in vars(verdicts).values()
    if isinstance(value, type) and issubclass(value, StrEnum) and value.__name__.endswith("Verdict")
]


@pytest.mark.parametrize("enum", VERDICT_ENUMS, ids=lambda enum: enum.__name__)
def test_the_pipeline_doc_names_every_verdict(enum: type[StrEnum]) -> None:
    text = PIPELINE.read_text()
    absent = [member.value for member in enum if member.value not in text]
    assert not absent, f"docs/PIPELINE.md does not define {enum.__name__} {absent}"


def test_the_pipeline_doc_defines_the_levels_and_compiled_as_the_code_does() -> None:
    text = PIPELINE.read_text()
    for level in get_args(SamenessLevel):
        assert f"- `{level}`:" in text
    compiled = re.search(
        r"\*\*COMPILED\*\* means every checked configuration is (.*?)\(", text, re.S
    )
    assert compiled is not None
    named = re.findall(r"`([a-z-]+)`", compiled.group(1))
    assert named == [*COMPILED_LEVELS, *GPU_DECIDED_LEVELS]


def compiled_definition() -> str:
    """docs/PIPELINE.md's definition of COMPILED, its words in order."""
    text = PIPELINE.read_text()
    found = re.search(r"\*\*COMPILED\*\* means .*?A/A band\.", text, re.S)
    assert found is not None
    return " ".join(found.group(0).split())


def test_the_kernel_writer_doc_quotes_the_one_definition_of_compiled() -> None:
    quoted = (REPO_ROOT / "docs" / "KERNEL_WRITER.md").read_text()
    unquoted = " ".join(line.removeprefix("> ") for line in quoted.splitlines())
    assert compiled_definition() in " ".join(unquoted.split())


def test_the_exit_code_table_is_the_codes() -> None:
    """docs/CONVERT.md's table of every command's exit codes says what the code does."""
    text = (REPO_ROOT / "docs" / "CONVERT.md").read_text().split("\n## Exit codes\n", 1)[1]
    rows = re.findall(r"^\| (\d) \| (.*) \|$", text.split("\n## ", 1)[0], re.M)
    assert rows == [(str(int(code)), meaning) for code, meaning in EXIT_MEANINGS.items()]


def test_the_pipeline_doc_lists_stages_in_execution_order() -> None:
    table = PIPELINE.read_text().split("## Stages", 1)[1].split("##", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    named = [row.split(" (")[0].lower().replace(" ", "_").replace("-", "_") for row in rows[1:]]
    assert named == [stage.value for stage in Stage]
