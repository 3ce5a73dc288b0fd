#!/usr/bin/env python3
"""Runs GPU job bundles one after another on a GPU host and packs what they wrote.

    python3 bench/run_bundles.py BUNDLE... --out DIR [--deadline-s 540] [--limit-s 240]
                                 [--warm-jobs 8] [--keep-cubins] [--l2-flush kernel|copy]
                                 [--placements N] [--tensor-facts build|python|FILE]

First, with --warm-jobs N, every bundle not yet run warms its reference and its
port (`run.py --warm-only`), N at a time: both JITs compile each specialisation
on the CPU into their disk caches. Then each bundle runs as
`python3 BUNDLE/run.py --out DIR/<name>` (name: the bundle's operator), alone on
the GPU so no run disturbs another's timing, under its own time limit; a bundle
is not started once the deadline leaves less than its limit. A bundle started
before (its folder holds `console.log`) is not run again, so a second command
with the same arguments carries on where the first stopped. `DIR/batch-<time>.json` records
every bundle's exit code, wall time and whether it was started (and the warm
pass's, under "warm"), and `DIR/results.tar.gz` holds every result folder (the
form a GPU host's results travel back in). Before all that, the wrappers' compiled
tensor-facts reader is built once against the host's torch (`--tensor-facts build`,
the default; its outcome is in the batch record) and every run uses it through
$TILEPORT_TENSOR_FACTS; `python` times the key read in Python. Standard library only: the GPU host
has no tileport package, and each bundle carries its own runner.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

STARTED_FILE = "console.log"  # written when a run starts


def operator_of(bundle: Path) -> str:
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    return str(manifest["operator"])


def _logged(command: list[str], log_path: Path, limit_s: float) -> tuple[int | None, float]:
    """Runs `command` with its output in `log_path`; its exit code (None: it reached
    `limit_s`) and wall seconds."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        try:
            done = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, timeout=limit_s, check=False
            )
            code: int | None = done.returncode
        except subprocess.TimeoutExpired:
            code = None
    return code, round(time.monotonic() - started, 1)


def run_one(bundle: Path, out: Path, limit_s: float, extra: list[str]) -> dict[str, object]:
    folder = out / operator_of(bundle)
    command = [sys.executable, str(bundle / "run.py"), "--out", str(folder), *extra]
    code, wall_s = _logged(command, folder / STARTED_FILE, limit_s)
    return {
        "operator": folder.name,
        "bundle": bundle.name,
        "started": True,
        "exit_code": code,
        "timed_out": code is None,
        "wall_s": wall_s,
    }


def warm_one(bundle: Path, out: Path, limit_s: float) -> dict[str, object]:
    folder = out / operator_of(bundle)
    command = [sys.executable, str(bundle / "run.py"), "--warm-only"]
    code, wall_s = _logged(command, folder / "warm.log", limit_s)
    return {"operator": folder.name, "exit_code": code, "wall_s": wall_s}


def warm_all(bundles: list[Path], out: Path, jobs: int, limit_s: float) -> list[dict[str, object]]:
    """Every bundle's references compiled, `jobs` bundles at a time."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(lambda bundle: warm_one(bundle, out, limit_s), bundles))
    for row in rows:
        print(json.dumps({"warm": row}), flush=True)
    return rows


FACTS_ENV = "TILEPORT_TENSOR_FACTS"


def tensor_facts(bundle: Path, out: Path, choice: str) -> dict[str, object]:
    """Sets $TILEPORT_TENSOR_FACTS for every run: the reader built here once by the
    first bundle's wrapper ("build"; Python keys when that fails), none ("python"),
    or a file built elsewhere for this host's torch. Says what it chose."""
    if choice == "python":
        os.environ[FACTS_ENV] = "python"
        return {"reader": "python"}
    if choice != "build":
        os.environ[FACTS_ENV] = str(Path(choice).resolve())
        return {"reader": os.environ[FACTS_ENV]}
    wrapper = bundle / "py" / "tileport_kernels.py"
    command = [sys.executable, str(wrapper), "build-tensor-facts", str(out / "tensor-facts")]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        os.environ[FACTS_ENV] = "python"
        return {"reader": "python", "build_error": "the build ran past 600 s"}
    wall_s = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        os.environ[FACTS_ENV] = "python"
        return {"reader": "python", "build_error": done.stderr[-2000:], "build_s": wall_s}
    os.environ[FACTS_ENV] = done.stdout.strip().splitlines()[-1]
    return {"reader": os.environ[FACTS_ENV], "build_s": wall_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument(
        "--deadline-s", type=float, default=540.0, help="start no bundle after this (default 540)"
    )
    parser.add_argument(
        "--limit-s", type=float, default=240.0, help="one bundle's time limit (default 240)"
    )
    parser.add_argument(
        "--warm-jobs",
        type=int,
        default=0,
        help="bundles warming their references at once before the runs (default 0: no warm pass)",
    )
    parser.add_argument(
        "--keep-cubins",
        action="store_true",
        help="each run keeps the cubins both JITs compile (gpu-run --keep-cubins)",
    )
    parser.add_argument(
        "--l2-flush",
        choices=("kernel", "copy"),
        default="kernel",
        help="how each run flushes the L2 before a timed call (gpu-run --l2-flush)",
    )
    parser.add_argument(
        "--placements",
        type=int,
        default=None,
        metavar="N",
        help="the modules each timed side rotates through (gpu-run --placements; "
        "default: gpu-run's)",
    )
    parser.add_argument(
        "--tensor-facts",
        default="build",
        metavar="build|python|FILE",
        help="the wrappers' tensor-facts reader: built here (default), none, or this file",
    )
    args = parser.parse_args(argv)
    missing = [str(b) for b in args.bundles if not (b / "run.py").is_file()]
    if missing:
        print(f"run_bundles: not a bundle (no run.py): {', '.join(missing)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    pending = [b for b in args.bundles if not (args.out / operator_of(b) / STARTED_FILE).is_file()]
    facts = tensor_facts(args.bundles[0], args.out, args.tensor_facts)
    print(json.dumps({"tensor_facts": facts}), flush=True)
    warmed: list[dict[str, object]] = []
    if args.warm_jobs > 0 and pending:
        warmed = warm_all(pending, args.out, args.warm_jobs, args.limit_s)
    rows: list[dict[str, object]] = []
    for bundle in pending:
        left = args.deadline_s - (time.monotonic() - start)
        if left < min(args.limit_s, 60.0):
            rows.append({"operator": operator_of(bundle), "bundle": bundle.name, "started": False})
            continue
        extra = ["--keep-cubins"] if args.keep_cubins else []
        extra += ["--l2-flush", args.l2_flush]
        if args.placements is not None:
            extra += ["--placements", str(args.placements)]
        row = run_one(bundle, args.out, min(args.limit_s, left), extra)
        rows.append(row)
        print(json.dumps(row), flush=True)
    batch = args.out / f"batch-{int(time.time())}.json"
    batch.write_text(
        json.dumps({"runs": rows, "warm": warmed, "tensor_facts": facts}, indent=2) + "\n",
        encoding="utf-8",
    )
    with tarfile.open(args.out / "results.tar.gz", "w:gz") as tar:
        for bundle in args.bundles:
            folder = args.out / operator_of(bundle)
            if folder.is_dir():
                tar.add(folder, arcname=folder.name)
        for record in sorted(args.out.glob("batch-*.json")):
            tar.add(record, arcname=record.name)
    ran = sum(1 for r in rows if r.get("started"))
    print(
        f"ran {ran} of {len(rows)} bundles not run before ({len(args.bundles)} given) "
        f"in {time.monotonic() - start:.0f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
