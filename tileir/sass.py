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
_REGISTER = re.compile(r"\bU?R\d+\b|\bU?P\d+\b|\bB\d+\b")
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
    varies from run to run (toolchain.tools.tileiras), so where the two differ in
    a few lines and `samples` is given, each side is assembled up to `samples`
    more times with address randomisation: a listing both sides reach is the
    same machine code, the difference being tileiras's own. Where the
    reference's own runs differ in their registers only and the port's listing
    is one of them but for its registers, the port is within the reference's
    own variation (`registers_only`)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    ref_cubin = tileiras(reference, work_dir / f"reference.{target}.cubin", target)
    gen_cubin = tileiras(generated, work_dir / f"generated.{target}.cubin", target)
    result = compare_cubins(ref_cubin, gen_cubin, target)
    near = result.differing_lines <= NEAR_FRACTION * result.reference_instructions
    if result.identical or samples <= 0 or not near:
        return result
    generated_listing = _listing(gen_cubin)
    seen = {"reference": {_listing(ref_cubin)}, "generated": {generated_listing}}
    run = 0
    for run in range(1, samples + 1):
        for side, bytecode in (("reference", reference), ("generated", generated)):
            cubin = work_dir / f"{side}.{target}.run{run}.cubin"
            seen[side].add(_listing(tileiras(bytecode, cubin, target, fixed_layout=False)))
        if seen["reference"] & seen["generated"]:
            return _matched(result, run + 1, len(seen["reference"]), registers_only=False)
        if run >= STEADY_RUNS and len(seen["reference"]) == len(seen["generated"]) == 1:
            break  # neither side varies: the difference is the code's
    variants = len(seen["reference"])
    skeletons = {register_skeleton(listing) for listing in seen["reference"]}
    if variants > 1 and len(skeletons) == 1 and register_skeleton(generated_listing) in skeletons:
        return _matched(result, run + 1, variants, registers_only=True)
    return result.model_copy(update={"assemblies": run + 1, "reference_variants": variants})


def _matched(
    result: SassComparison, assemblies: int, variants: int, *, registers_only: bool
) -> SassComparison:
    return result.model_copy(
        update={
            "identical": True,
            "differing_lines": 0 if not registers_only else result.differing_lines,
            "first_differences": [] if not registers_only else result.first_differences,
            "assemblies": assemblies,
            "reference_variants": variants,
            "registers_only": registers_only,
        }
    )


def register_skeleton(listing: tuple[str, ...]) -> tuple[str, ...]:
    """The listing with every register and predicate name masked."""
    return tuple(_REGISTER.sub("%r", line) for line in listing)


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
