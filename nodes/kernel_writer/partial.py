"""The lifter's partial port of a kernel it cannot port: everything it lifts,
with each construct it cannot lift left where it stands as a marked
placeholder (the op, its source location, what is missing, its reference IR).

It is what stage B's LLM fallback shows the model: the port around the gap,
written the way the lifter writes every port. It is never compiled.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.lifter import (
    UNMAPPED,
    FactSlot,
    Form,
    LiftedKernel,
    Lifter,
    ParamLayout,
    _Scope,
)
from nodes.kernel_writer.naming import SourceNames
from nodes.kernel_writer.op_table import SUPPORTED_OPS
from nodes.kernel_writer.rust_types import tile_info
from tileir.ir import Entry, Op
from tileir.mlir import parse_module

MARK: Final = "TILEPORT-UNLIFTED"
_LOCATION = re.compile(r"\s+loc\([^()]*\)\s*$")


def op_text(lines: list[str], op: Op) -> list[str]:
    """The op's lines of the IR text, its regions included, without locations."""
    first = lines[op.line - 1]
    indent = len(first) - len(first.lstrip())
    out: list[str] = []
    depth = 0
    for line in lines[op.line - 1 :]:
        out.append(_LOCATION.sub("", line[indent:].rstrip()))
        depth += line.count("{") - line.count("}")
        if depth <= 0:
            break
    return out


class _PartialLifter(Lifter):
    def __init__(
        self,
        ir_lines: list[str],
        entry: Entry,
        params: list[ParamLayout],
        kernel_name: str,
        source: SourceNames,
        fact_generics: dict[FactSlot, tuple[int, str]],
    ) -> None:
        super().__init__(entry, params, kernel_name, source, fact_generics)
        self.ir_lines = ir_lines
        self.gaps: list[Blocked] = []

    def check_mapped(self) -> None:
        """Unmapped ops are marked where they stand, by `emit_op`."""

    def emit_op(self, op: Op, scope: _Scope) -> None:
        mark = len(scope.lines)
        try:
            super().emit_op(op, scope)
        except Blocked as err:
            del scope.lines[mark:]  # what the op's rule wrote before it gave up
            self.placeholder(op, scope, err)

    def placeholder(self, op: Op, scope: _Scope, err: Blocked) -> None:
        missing = UNMAPPED if err.op not in SUPPORTED_OPS else err.missing
        self.gaps.append(Blocked(err.op, err.location, missing))
        what = f"`{op.name}`" + (f" (its `{err.op}`)" if err.op != op.name else "")
        self.emit(scope, f"// {MARK}: {what} at {err.location}: {missing}. Reference IR:")
        for line in op_text(self.ir_lines, op):
            self.emit(scope, f"//     {line}")
        for value in self.resolved.result_ids(op):
            form, rust_type = self.placeholder_type(value)
            name = self.fresh(self.base_name(op))
            self.emit(scope, f'let {name}: {rust_type} = todo!("{op.name}");')
            self.bind(value, name, form, rust_type)

    def placeholder_type(self, value: int) -> tuple[Form, str]:
        ir_type = self.resolved.type_of(value)
        if ir_type == "token":
            return "token", "Token"
        if tile_info(ir_type) is None:
            return "view", "_"
        return "tile", self.tile_type(value)


def partial_lift(
    path: Path,
    layouts: list[ParamLayout],
    kernel: str,
    names: SourceNames,
    facts: dict[FactSlot, tuple[int, str]],
) -> tuple[LiftedKernel, list[Blocked]]:
    """Lift the entry of the IR file `path` as far as the lifter can; returns the
    body with its placeholders and the constructs they stand for. Raises Blocked
    only where no body can be written at all (the entry's parameters)."""
    text = path.read_text()
    entry = parse_module(text).entries[0]
    lifter = _PartialLifter(text.splitlines(), entry, layouts, kernel, names, facts)
    return lifter.lift(), lifter.gaps
