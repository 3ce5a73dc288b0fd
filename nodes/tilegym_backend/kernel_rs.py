"""The lifted kernel.rs as TileGym's crate holds it: the module named
`<op>_module` and a header saying where it comes from. The body is the lifter's
text unchanged (the IR proof is of that text; the module name does not reach the
IR), laid out by rustfmt afterwards."""

from __future__ import annotations

import re

from schemas.kernel_writer import PortReport

_HEADER = re.compile(r"\A(?://![^\n]*\n)+\n*")
_MODULE = re.compile(r"(#\[cutile::module[^\]]*\]\s*pub\s+mod\s+)(\w+)")


class KernelRsError(ValueError):
    """The lifted text is not the shape this adapter expects."""


def module_name(op: str) -> str:
    return f"{op}_module"


def adapt_kernel(op: str, lifted: str, report: PortReport, source: str) -> str:
    """kernel.rs for `<op>_kernel/`, from the lifter's kernel.rs of `report`."""
    body = _HEADER.sub("", lifted, count=1)
    if len(_MODULE.findall(body)) != 1:
        raise KernelRsError(f"{report.kernel}: kernel.rs does not hold one #[cutile::module]")
    body = _MODULE.sub(lambda m: m.group(1) + module_name(op), body, count=1)
    level = report.level_line() or report.summary
    header = [
        "// SPDX-License-Identifier: MIT",
        "",
        "//",
        f"// {op} — the cutile-rs port of `{report.kernel}` ({source}),",
        "// lifted from its Tile IR by tileport's kernel writer (deterministic, no LLM).",
        f"// Checked against the cuTile Python reference: {level}.",
    ]
    return "\n".join(header) + "\n\n" + body
