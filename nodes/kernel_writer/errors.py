"""Why a kernel cannot be lifted: the op, where it comes from, what is missing."""

from __future__ import annotations


class Blocked(Exception):
    """The lifter met something it cannot reproduce exactly.

    `op` is the Tile IR op, `location` its source location (`file:line:col`
    when the reference kept line info, else the IR line), `missing` what a
    port would need."""

    def __init__(self, op: str, location: str, missing: str) -> None:
        super().__init__(f"{op} at {location}: {missing}")
        self.op = op
        self.location = location
        self.missing = missing
