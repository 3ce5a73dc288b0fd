"""The verdict vocabulary of every pipeline stage.

Routing reads only these values, so each stage has its own closed enum: a
verdict a stage cannot give is a validation error, not a silent fallthrough.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class PreflightVerdict(StrEnum):
    PASS = "PASS"
    BLOCKED = "BLOCKED"


class AnalyzerVerdict(StrEnum):
    PASS = "PASS"
    FAIL_FIXABLE = "FAIL_FIXABLE"
    BLOCKED = "BLOCKED"


class KernelWriterVerdict(StrEnum):
    COMPILED = "COMPILED"
    FAIL_COMPILE = "FAIL_COMPILE"
    FAIL_FIXABLE = "FAIL_FIXABLE"
    BLOCKED = "BLOCKED"


class HostBuildVerdict(StrEnum):
    """The host/FFI builder's verdict: its own build checks and the correctness run."""

    ALL_PASS = "ALL_PASS"
    FAIL = "FAIL"
    BLOCKED = "BLOCKED"


class CorrectnessVerdict(StrEnum):
    """What the operator's correctness suite said, on its own."""

    ALL_PASS = "ALL_PASS"
    FAIL = "FAIL"
    BLOCKED = "BLOCKED"


class FailureClass(StrEnum):
    """Who has to act on a host builder failure; routing depends on it."""

    HOST = "host"
    KERNEL = "kernel"
    ENV = "env"


class PerfVerdict(StrEnum):
    DONE = "DONE"
    INVESTIGATE = "INVESTIGATE"
    BLOCKED = "BLOCKED"


class DiffVerdict(StrEnum):
    PASS = "PASS"
    PASS_WITH_NOTES = "PASS_WITH_NOTES"
    FAIL_FIXABLE = "FAIL_FIXABLE"
    FAIL_COMPILER_BUG = "FAIL_COMPILER_BUG"
    BLOCKED = "BLOCKED"


class FixOwner(StrEnum):
    """The stage that must apply a fix the IR-diff analyst names."""

    KERNEL = "kernel"
    HOST = "host"


class InvestigationVerdict(StrEnum):
    FIXABLE = "FIXABLE"
    ALIGNED = "ALIGNED"
    BLOCKED = "BLOCKED"


class GateVerdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    AWAITING_GPU = "AWAITING_GPU"
    """Everything that needs no GPU passed; correctness and perf wait for a GPU run."""
    UNVERIFIED = "UNVERIFIED"
    """The service's word for a run that would pass on GPU results a GPU worker did not
    send (user-reported): never PASS, never a green commit status."""


class SamenessLevel(StrEnum):
    """How close a port's IR is to the reference, best first."""

    EXACT = "exact"
    SASS_IDENTICAL = "sass-identical"
    EQUIVALENT = "equivalent"
    DIFFERENT = "different"


PERF_RATIO_LIMIT: Final = 1.05
"""The geomean of port/baseline device times must not exceed this for DONE."""
