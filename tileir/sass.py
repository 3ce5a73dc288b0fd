"""SASS identity: assemble both bytecodes with tileiras for one target and
compare their disassembly, instruction by instruction.

Only what the GPU executes is compared: the entry symbol (which differs by
construction between cuTile Python and cutile-rs) and the listing's header
lines are dropped."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from schemas.sass import SassComparison
from toolchain.tools import cuobjdump_sass, tileiras

_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?P<text>.*?)\s*;?\s*(/\*.*\*/)?\s*$")
_SYMBOL = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*_entry\b|\b[A-Za-z_][A-Za-z0-9_]*_Kt\d[A-Za-z0-9_]*")
SHOWN_DIFFERENCES = 12
# Run-to-run variants differ in a few lines (registers, order: 18 of 2560, 36 of
# 960 measured); listings further apart are not assembled again.
NEAR_FRACTION = 0.1
STEADY_RUNS = 3  # runs after which two sides that never varied are taken as they are


def instructions(sass_listing: str) -> list[str]:
    """The instruction lines of a cuobjdump -sass listing, symbols masked."""
    lines = []
    for raw in sass_listing.splitlines():
        match = _INSTRUCTION.match(raw)
        if match:
            lines.append(_SYMBOL.sub("<entry>", match.group("text")).strip())
    return lines


def compare_listings(reference: str, generated: str) -> tuple[bool, int, list[str]]:
    ref_lines, gen_lines = instructions(reference), instructions(generated)
    if ref_lines == gen_lines:
        return True, 0, []
    diff = [
        line
        for line in difflib.unified_diff(
            ref_lines, gen_lines, "reference", "generated", n=0, lineterm=""
        )
        if not line.startswith(("---", "+++", "@@"))
    ]
    return False, len(diff), diff[:SHOWN_DIFFERENCES]


def compare_bytecodes(
    reference: Path, generated: Path, target: str, work_dir: Path, samples: int = 0
) -> SassComparison:
    """Assemble both bytecodes for `target` and compare their SASS.

    Both are assembled reproducibly first. tileiras's listing of one bytecode
    varies from run to run (toolchain.tools.tileiras), so where the two differ
    in a few lines and `samples` is given, each side is assembled up to `samples` more times
    with address randomisation: the same listing reached from both is the same
    machine code, the difference being tileiras's own."""
    work_dir.mkdir(parents=True, exist_ok=True)
    ref_cubin = tileiras(reference, work_dir / f"reference.{target}.cubin", target)
    gen_cubin = tileiras(generated, work_dir / f"generated.{target}.cubin", target)
    result = compare_cubins(ref_cubin, gen_cubin, target)
    near = result.differing_lines <= NEAR_FRACTION * result.reference_instructions
    if result.identical or samples <= 0 or not near:
        return result
    seen = {"reference": {_listing(ref_cubin)}, "generated": {_listing(gen_cubin)}}
    run = 0
    for run in range(1, samples + 1):
        for side, bytecode in (("reference", reference), ("generated", generated)):
            cubin = work_dir / f"{side}.{target}.run{run}.cubin"
            seen[side].add(_listing(tileiras(bytecode, cubin, target, fixed_layout=False)))
        if seen["reference"] & seen["generated"]:
            return result.model_copy(
                update={
                    "identical": True,
                    "differing_lines": 0,
                    "first_differences": [],
                    "assemblies": run + 1,
                    "reference_variants": len(seen["reference"]),
                }
            )
        if run >= STEADY_RUNS and len(seen["reference"]) == len(seen["generated"]) == 1:
            break  # neither side varies: the difference is the code's
    return result.model_copy(
        update={"assemblies": run + 1, "reference_variants": len(seen["reference"])}
    )


def _listing(cubin: Path) -> tuple[str, ...]:
    return tuple(instructions(cuobjdump_sass(cubin)))


def compare_cubins(reference: Path, generated: Path, target: str) -> SassComparison:
    ref_listing, gen_listing = cuobjdump_sass(reference), cuobjdump_sass(generated)
    identical, differing, shown = compare_listings(ref_listing, gen_listing)
    return SassComparison(
        target=target,
        identical=identical,
        reference_instructions=len(instructions(ref_listing)),
        generated_instructions=len(instructions(gen_listing)),
        differing_lines=differing,
        first_differences=shown,
        reference_cubin=str(reference),
        generated_cubin=str(generated),
    )


def render_human(result: SassComparison) -> str:
    if result.identical:
        return f"{result.target}: SASS identical ({result.reference_instructions} instructions)"
    head = (
        f"{result.target}: SASS differs: {result.differing_lines} differing lines "
        f"({result.reference_instructions} reference vs {result.generated_instructions} "
        "generated instructions)"
    )
    return "\n".join([head, *("  " + line for line in result.first_differences)])
