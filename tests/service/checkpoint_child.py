"""One of many processes started together by test_checkpoints.py: waits for the
common start time, opens the service's checkpointer (its setup included) and runs
the scripted pipeline on its own thread through it.

    python checkpoint_child.py DATABASE_URL START_AT THREAD_ID RUN_DIR"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "graph")]

from pipeline_script import run_script  # noqa: E402

from app.worker.checkpoints import open_checkpointer  # noqa: E402


def main(url: str, start_at: float, thread_id: str, run_dir: Path) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    time.sleep(max(0.0, start_at - time.time()))
    with open_checkpointer(url) as saver:
        summary, _ = run_script(run_dir, checkpointer=saver, thread_id=thread_id)
    print(f"{thread_id}: {summary.gate_verdict}")
    return 0 if summary.gate_verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]), sys.argv[3], Path(sys.argv[4])))
