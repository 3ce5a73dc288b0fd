"""The lifter, one construct family per file, FileCheck-style: each
`lifts/*.mlir` holds Tile IR and, in its leading comments, the Rust the lifter
must write for it (or the refusal it must give). No toolchain needed.

A file is either a body, wrapped in the vector kernel of `lift_support.py` (`%t` is
the loaded 64xf32 tile, `%bx` the block id, `%arg0` x's base pointer; the
`// RESULT:` value is stored to y), or a whole `entry` with its `// PARAMS:`.

    // RESULT: %v                      the value stored (body files)
    // PARAMS: x array float32 1; n scalar int32
    // CHECK: text                      a later line holds `text`
    // CHECK-NEXT: text                 the very next line holds it
    // CHECK-NOT: text                  no line between the matches around it holds it
    // BLOCKED: op: text                the lifter refuses `op`, saying `text`
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

import pytest
from lift_support import HEADER, PARAMS, STORE

from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.lifter import Lifter, ParamLayout
from nodes.kernel_writer.naming import NEVER_CALLED
from tileir.mlir import parse_module

LIFTS = Path(__file__).parent / "lifts"
FREE_CALL = re.compile(r"(?<![.\w])([a-z_][a-z0-9_]*)(?:::<[^>]*>)?\(")
DIRECTIVE = re.compile(r"^// (RESULT|PARAMS|CHECK|CHECK-NEXT|CHECK-NOT|BLOCKED): ?(.*)$")


@dataclass
class Case:
    ir: str
    params: list[ParamLayout]
    checks: list[tuple[str, str]] = field(default_factory=list)
    blocked: tuple[str, str] | None = None


def read_case(path: Path) -> Case:
    directives: list[tuple[str, str]] = []
    ir_lines = []
    for line in path.read_text().splitlines():
        if found := DIRECTIVE.match(line.strip()):
            directives.append((found[1], found[2].strip()))
        elif not line.lstrip().startswith("//"):
            ir_lines.append(line)
    ir = "\n".join(ir_lines).strip("\n") + "\n"
    values = dict(directives)
    case = Case(ir, PARAMS)
    if "entry @" not in ir:
        case.ir = HEADER + ir + STORE.format(value=values["RESULT"])
    if "PARAMS" in values:
        case.params = [param_layout(text) for text in values["PARAMS"].split(";")]
    case.checks = [(kind, text) for kind, text in directives if kind.startswith("CHECK")]
    if "BLOCKED" in values:
        op, _, missing = values["BLOCKED"].partition(":")
        case.blocked = (op.strip(), missing.strip())
    return case


def param_layout(text: str) -> ParamLayout:
    name, kind, dtype, *ndim = text.split()
    return ParamLayout(
        name, cast(Literal["array", "list", "scalar"], kind), dtype, int(ndim[0]) if ndim else 0
    )


def unmatched(checks: list[tuple[str, str]], lines: list[str]) -> str | None:
    """The first check the lines fail, FileCheck's way, or None."""
    at = 0  # the first line a CHECK may match
    forbidden: list[str] = []
    for kind, text in checks:
        if kind == "CHECK-NOT":
            forbidden.append(text)
            continue
        if kind == "CHECK-NEXT":
            found = at if at < len(lines) and text in lines[at] else None
        else:
            found = next((i for i in range(at, len(lines)) if text in lines[i]), None)
        if found is None:
            return f"{kind}: {text}"
        for banned in forbidden:
            if any(banned in line for line in lines[at:found]):
                return f"CHECK-NOT: {banned}"
        forbidden, at = [], found + 1
    for banned in forbidden:
        if any(banned in line for line in lines[at:]):
            return f"CHECK-NOT: {banned}"
    return None


def lifted(case: Case, name: str) -> list[str]:
    entry = parse_module(case.ir).entries[0]
    return Lifter(entry, case.params, name).lift().body


@pytest.mark.parametrize("path", sorted(LIFTS.glob("*.mlir")), ids=lambda path: path.stem)
def test_the_lifter_writes_what_the_file_checks(path: Path) -> None:
    case = read_case(path)
    if case.blocked is not None:
        with pytest.raises(Blocked) as caught:
            lifted(case, path.stem)
        assert caught.value.op == case.blocked[0]
        assert case.blocked[1] in caught.value.missing, caught.value.missing
        return
    assert case.checks, f"{path.name} checks nothing"
    lines = lifted(case, path.stem)
    failed = unmatched(case.checks, lines)
    assert failed is None, f"{path.name}: {failed} not matched in\n" + "\n".join(lines)
    # A variable may take these names only because no code calls them.
    called = {name for line in lines for name in FREE_CALL.findall(line)}
    assert called & NEVER_CALLED == set()


def test_the_checker_fails_what_it_should() -> None:
    lines = ["let a = 1;", "let b = a + 1;", "let c = b * 2;"]
    assert unmatched([("CHECK", "let a"), ("CHECK-NEXT", "let b")], lines) is None
    assert unmatched([("CHECK", "let a"), ("CHECK-NEXT", "let c")], lines) == "CHECK-NEXT: let c"
    assert unmatched([("CHECK", "let b"), ("CHECK", "let a")], lines) == "CHECK: let a"
    assert unmatched([("CHECK", "let a"), ("CHECK-NOT", "+"), ("CHECK", "let c")], lines)
    assert unmatched([("CHECK", "let b"), ("CHECK-NOT", "+")], lines) is None
    assert unmatched([("CHECK", "let a"), ("CHECK-NOT", "* 2")], lines) == "CHECK-NOT: * 2"
