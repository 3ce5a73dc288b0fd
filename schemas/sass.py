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
