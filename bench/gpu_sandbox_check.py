"""Run GPU work on a GPU host inside the sandbox the service's GPU worker uses
(`toolchain.sandbox.gpu_sandbox`: bubblewrap namespaces, root dropped, the seccomp
filter, only the results folder writable), then outside it, and say whether both
ran on the GPU alike.

    python3 bench/gpu_sandbox_check.py OUT                 # a torch CUDA probe
    python3 bench/gpu_sandbox_check.py OUT --bundle BUNDLE # a GPU job bundle

A bundle runs with its own runner (`BUNDLE/run.py`, what `tileport gpu-run` runs),
the toolchain taken from the environment (the GPU host's env.sh); the verdict
compared is its correctness. The probe needs torch only. Writes
OUT/sandbox-check.json; exit 0 when both sides agree."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from toolchain.sandbox import PATH, gpu_sandbox

# What the work needs of the GPU host's environment (its toolchain, its wheels).
PASSED_ENV = (
    "CUDA_HOME",
    "CUDA_TOOLKIT_PATH",
    "CUDA_PATH",
    "CUTILE_TILEIRAS_PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
)
RUN_TIMEOUT_S = 480
# A matmul on the GPU, its checksum, the device's name and the driver's answer to a
# stream and an event: what a GPU job asks of the driver first.
PROBE = """
import json, torch
a = torch.arange(1 << 20, device="cuda", dtype=torch.float32).reshape(1024, 1024) / 1e6
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    start.record(); b = a @ a; end.record()
torch.cuda.synchronize()
print(json.dumps({"device": torch.cuda.get_device_name(), "checksum": float(b.sum()),
                  "ms": round(start.elapsed_time(end), 3)}))
"""


def run(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    started = time.monotonic()
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    return {
        "returncode": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "stdout_tail": done.stdout[-2000:],
        "stderr_tail": done.stderr[-2000:],
    }


def outcome(part: dict[str, object], results: Path, bundle: Path | None) -> object:
    """What is compared: the bundle's correctness verdict, or the probe's checksum."""
    if bundle is not None:
        report = results / "correctness.json"
        return json.loads(report.read_text()).get("verdict") if report.is_file() else None
    lines = str(part["stdout_tail"]).strip().splitlines()
    return json.loads(lines[-1]).get("checksum") if part["returncode"] == 0 and lines else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpu_sandbox_check")
    parser.add_argument("out", type=Path)
    parser.add_argument("--bundle", type=Path, default=None)
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    bundle = args.bundle.resolve() if args.bundle else None
    out.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", PATH), "LANG": "C.UTF-8"}
    env.update({key: os.environ[key] for key in PASSED_ENV if key in os.environ})
    readable = {Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(":") if p}
    if "CUDA_HOME" in os.environ:
        readable.add(Path(os.environ["CUDA_HOME"]).resolve())
    torch = importlib.util.find_spec("torch")
    if torch is not None and torch.origin is not None:
        readable.add(Path(torch.origin).parents[1])  # its site-packages, wherever it is
    if bundle is not None:
        readable.add(bundle)
    report: dict[str, object] = {}
    for side in ("sandboxed", "plain"):
        results = out / side
        results.mkdir(exist_ok=True)
        work = [sys.executable, "-c", PROBE]
        if bundle is not None:
            work = [sys.executable, str(bundle / "run.py"), "--out", str(results)]
        if side == "sandboxed":
            launch = gpu_sandbox(results, sorted(readable), env).launch(work)
            part = run(launch.argv, launch.env)
        else:
            part = run(work, dict(os.environ))
        report[side] = {**part, "outcome": outcome(part, results, bundle)}
    (out / "sandbox-check.json").write_text(json.dumps(report, indent=2) + "\n")
    boxed, plain = (report[side]["outcome"] for side in ("sandboxed", "plain"))  # type: ignore[index]
    print(json.dumps({"sandboxed": boxed, "plain": plain}))
    return 0 if plain is not None and boxed == plain else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
