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


def module_name(op: str, stem: str | None = None) -> str:
    """`<op>_module`, or `<op>_<stem>_module` for one kernel of several."""
    return f"{op}_{stem}_module" if stem else f"{op}_module"


def adapt_kernel(module: str, lifted: str, report: PortReport, source: str) -> str:
    """One kernel's module for `<op>_kernel/kernel.rs`, from the lifter's kernel.rs of
    `report`, headed by where it comes from and how it was checked."""
    body = _HEADER.sub("", lifted, count=1)
    if len(_MODULE.findall(body)) != 1:
        raise KernelRsError(f"{report.kernel}: kernel.rs does not hold one #[cutile::module]")
    body = _MODULE.sub(lambda m: m.group(1) + module, body, count=1)
    level = report.level_line() or report.summary
    header = [
        f"// `{report.kernel}` ({source}), lifted from its Tile IR by tileport's kernel",
        "// writer (deterministic, no LLM).",
        f"// Checked against the cuTile Python reference: {level}.",
    ]
    return "\n".join(header) + "\n" + body


def kernel_file(op: str, modules: list[str]) -> str:
    """kernel.rs: the licence line, then each kernel's module."""
    head = [
        "// SPDX-License-Identifier: MIT",
        "",
        "//",
        f"// {op}: the cutile-rs ports of its kernels.",
        "//",
    ]
    return "\n".join(head) + "\n\n" + "\n\n".join(modules)
