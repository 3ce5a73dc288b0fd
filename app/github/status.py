"""The PR bot's commit status: its context per operator, and the state and the
description a settled conversion gets."""

from __future__ import annotations

from app.storage.models import Conversion
from schemas.api import ConversionStatus
from schemas.verdicts import GateVerdict

STATUS_CONTEXT = "tileport/{operator}"
DESCRIPTION_LIMIT = 140  # GitHub's limit for a status description


def status_context(operator: str) -> str:
    return STATUS_CONTEXT.format(operator=operator)


def commit_state(conversion: Conversion) -> tuple[str, str]:
    """GitHub status state and description. A run awaiting a GPU is `pending`, not a
    failure: it names the level reached and that the GPU run is still to come."""
    status = ConversionStatus(conversion.status)
    level = conversion.headline.get("level")
    if status is ConversionStatus.AWAITING_GPU:
        reached = f"{level}; " if level else "every check that needs no GPU passed; "
        return "pending", (reached + "GPU run pending")[:DESCRIPTION_LIMIT]
    if status is ConversionStatus.FINISHED:
        passed = conversion.gate_verdict == GateVerdict.PASS
        description = f"gate {conversion.gate_verdict}, outcome {conversion.outcome}"
        if conversion.gate_verdict == GateVerdict.UNVERIFIED:
            description = "GPU results were reported by a user, not a GPU worker: unverified"
        if passed and level:
            description = f"{level}; correct and timed on a GPU"
        return "success" if passed else "failure", description[:DESCRIPTION_LIMIT]
    if status is ConversionStatus.CANCELLED:
        return "error", "cancelled"
    return "error", (conversion.error or "the run failed")[:DESCRIPTION_LIMIT]
