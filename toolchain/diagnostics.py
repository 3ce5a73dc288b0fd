"""Tool messages a kernel author can act on.

MLIR tools print a diagnostic as `LOCATION: error: SENTENCE`, where LOCATION
can be a kilobyte of nested `callsite(... di_subprogram<...> ...)`. A reader
needs the sentence first and one `file:line:col` to open."""

from __future__ import annotations

import re

_LOCATION = re.compile(r'loc\("([^"]+)":(\d+):(\d+)\)')
_DIAGNOSTIC = re.compile(r"(?m)(?:^|: )(error|warning): (.+)$")


def lead_with_sentence(message: str) -> str:
    """`PREFIX SENTENCE (at file:line:col)`, then any further error lines; a message
    that holds no diagnostic comes back unchanged."""
    found = list(_DIAGNOSTIC.finditer(message))
    if not found:
        return message
    first = found[0]
    prefix = message[: first.start()].split("loc(", 1)[0].strip()
    location = _LOCATION.search(message[: first.start()])
    where = f" (at {location.group(1)}:{location.group(2)}:{location.group(3)})" if location else ""
    rest = [f"{m.group(1)}: {m.group(2).strip()}" for m in found[1:]]
    head = f"{prefix} {first.group(2).strip()}{where}".strip()
    return "; ".join([head, *rest])
