"""The rooms' order (docs/ARCHITECTURE.md): schemas/ → toolchain/ → tileir/ → nodes/ →
graph/ → app/. A room imports only rooms before it, wherever the import sits (a
function-level import included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from toolchain.env import REPO_ROOT

ROOMS = ("schemas", "toolchain", "tileir", "nodes", "graph", "app")


def imported_rooms(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of a room in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        else:
            continue
        found += [(node.lineno, m) for m in modules if m.split(".")[0] in ROOMS]
    return found


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_no_room_after_it(room: str) -> None:
    later = set(ROOMS[ROOMS.index(room) + 1 :])
    wrong = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {module}"
        for path in sorted((REPO_ROOT / room).rglob("*.py"))
        for line, module in imported_rooms(path)
        if module.split(".")[0] in later
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_function_level_imports(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text("def f():\n    from graph.runner import run\n    import app.cli\n")
    assert imported_rooms(source) == [(2, "graph.runner"), (3, "app.cli")]
