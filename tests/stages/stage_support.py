"""Helpers for the stage tests: a fresh run directory and its pipeline state."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from schemas.pipeline import RunOptions, Stage
from schemas.run_layout import RunLayout
from schemas.state import PipelineState

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "kernels"


def fresh_state(
    spec: Path,
    run_dir: Path,
    *,
    options: RunOptions | None = None,
    attempts: dict[Stage, int] | None = None,
    verdicts: dict[Stage, str] | None = None,
) -> PipelineState:
    RunLayout(run_dir).prepare_fresh()
    return PipelineState(
        run_id="run-under-test",
        operator=spec.name.split(".")[0],
        spec_path=str(spec.resolve()),
        run_dir=str(run_dir.resolve()),
        options=options or RunOptions(no_gpu=True),
        started_at=datetime.now(UTC),
        attempts=attempts or {},
        verdicts=verdicts or {},
    )


def copy_example(name: str, into: Path) -> Path:
    """Copy an example kernel and its spec, so a test may edit them; returns the spec."""
    for suffix in (".py", ".port.yaml"):
        shutil.copyfile(EXAMPLES / f"{name}{suffix}", into / f"{name}{suffix}")
    return into / f"{name}.port.yaml"
