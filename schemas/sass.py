"""The result of comparing two kernels' machine code for one target."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SassComparison(BaseModel):
    target: str
    identical: bool
    reference_instructions: int
    generated_instructions: int
    differing_lines: int = Field(0, description="Instruction lines that differ after alignment.")
    first_differences: list[str] = Field(
        default_factory=list, description="A few unified-diff lines, for a human."
    )
    reference_cubin: str
    generated_cubin: str
    assemblies: int = Field(
        1, description="tileiras runs per side: more than one when the first listings differed."
    )
    reference_variants: int = Field(
        1, description="Distinct listings the reference's runs gave (tileiras varies run to run)."
    )
    registers_only: bool = Field(
        False,
        description="Identical but for register choice, as the reference's own runs differ.",
    )
