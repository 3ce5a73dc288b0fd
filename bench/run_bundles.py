#!/usr/bin/env python3
"""Runs GPU job bundles one after another on a GPU host and packs what they wrote.

    python3 bench/run_bundles.py BUNDLE... --out DIR [--deadline-s 540] [--limit-s 240]

Each bundle runs as `python3 BUNDLE/run.py --out DIR/<name>` (name: the bundle's
operator), alone on the GPU so no run disturbs another's timing, under its own time
limit; a bundle is not started once the deadline leaves less than its limit.
`DIR/batch.json` records every bundle's exit code, wall time and whether it was
started, and `DIR/results.tar.gz` holds every result folder (the form a GPU host's
results travel back in). Standard library only: the GPU host has no tileport
package, and each bundle carries its own runner.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def operator_of(bundle: Path) -> str:
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    return str(manifest["operator"])


def run_one(bundle: Path, out: Path, limit_s: float) -> dict[str, object]:
    name = operator_of(bundle)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (folder / "console.log").open("w", encoding="utf-8") as log:
        try:
            done = subprocess.run(
                [sys.executable, str(bundle / "run.py"), "--out", str(folder)],
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=limit_s,
                check=False,
            )
            code: int | None = done.returncode
        except subprocess.TimeoutExpired:
            code = None
    return {
        "operator": name,
        "bundle": bundle.name,
        "started": True,
        "exit_code": code,
        "timed_out": code is None,
        "wall_s": round(time.monotonic() - started, 1),
    }


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
    args = parser.parse_args(argv)
    missing = [str(b) for b in args.bundles if not (b / "run.py").is_file()]
    if missing:
        print(f"run_bundles: not a bundle (no run.py): {', '.join(missing)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    rows: list[dict[str, object]] = []
    for bundle in args.bundles:
        left = args.deadline_s - (time.monotonic() - start)
        if left < min(args.limit_s, 60.0):
            rows.append({"operator": operator_of(bundle), "bundle": bundle.name, "started": False})
            continue
        row = run_one(bundle, args.out, min(args.limit_s, left))
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / "batch.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    with tarfile.open(args.out / "results.tar.gz", "w:gz") as tar:
        for row in rows:
            folder = args.out / str(row["operator"])
            if folder.is_dir():
                tar.add(folder, arcname=folder.name)
        tar.add(args.out / "batch.json", arcname="batch.json")
    ran = sum(1 for r in rows if r.get("started"))
    print(f"ran {ran} of {len(rows)} bundles in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
