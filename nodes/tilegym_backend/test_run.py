"""TileGym's own test file of each op this project added, run with the cutile-rs
backend on a GPU host (`tileport tilegym test`).

The crate is built once first; the tests then run with `CUTILE_RS_AUTOBUILD=0`,
so every test file loads that one library and none rebuilds it mid-run. The
counts come from pytest's summary line.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from nodes.tilegym_backend.checkout import CUTILE_RS, find_test
from nodes.tilegym_backend.wrapper_py import MARKER
from schemas.tilegym_backend import OpTestResult, TestRunReport

CRATE = CUTILE_RS / "cutile_kernels"
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b")
_PIN = re.compile(r'^cutile\s*=\s*"([^"]+)"', re.MULTILINE)


class NoGpu(RuntimeError):
    """There is no GPU here to run the tests on; says how that was found."""


def gpu_and_driver() -> tuple[str, str]:
    """The first GPU's name and the driver version, from nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise NoGpu("no GPU: nvidia-smi is not installed")
    done = subprocess.run(
        [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    first = done.stdout.strip().splitlines()[:1]
    if done.returncode != 0 or not first:
        raise NoGpu(f"no GPU: nvidia-smi found none ({done.stderr.strip() or 'no output'})")
    name, _, driver = first[0].partition(",")
    return name.strip(), driver.strip()


def added_ops(checkout: Path) -> list[str]:
    """The ops whose cutile-rs wrapper this project wrote."""
    return sorted(
        path.stem
        for path in (checkout / CUTILE_RS).glob("*.py")
        if MARKER in path.read_text(encoding="utf-8")
    )


def parse_counts(output: str) -> dict[str, int]:
    """passed / failed / skipped / errors from pytest's last summary line."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    summary = [line for line in output.splitlines() if _COUNT.search(line)]
    if not summary:
        return counts
    for number, word in _COUNT.findall(summary[-1]):
        key = "errors" if word.startswith("error") else word
        if key in counts:
            counts[key] += int(number)
    return counts


def toolchain(checkout: Path) -> str:
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=False)
    manifest = (checkout / CRATE / "Cargo.toml").read_text(encoding="utf-8")
    pin = _PIN.search(manifest)
    return f"{rustc.stdout.strip() or 'rustc: not found'}; cutile {pin.group(1) if pin else '?'}"


def build_crate(checkout: Path, log: Path) -> None:
    """`cargo build --release` of the crate, where TileGym's loader looks for the library."""
    with log.open("w") as out:
        done = subprocess.run(
            ["cargo", "build", "--release"],
            cwd=checkout / CRATE,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"cargo build --release of {CRATE} failed: see {log}")


def run_op(checkout: Path, op: str, timeout_s: int) -> OpTestResult:
    test = find_test(checkout, op)
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(test),
        "-q",
        "-k",
        "cutile-rs",
        "-p",
        "no:cacheprovider",
    ]
    env = {
        **os.environ,
        "CUTILE_RS_AUTOBUILD": "0",
        "PYTHONPATH": os.pathsep.join([str(checkout / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        output, code = str(expired.stdout or ""), 124
    counts = parse_counts(output)
    return OpTestResult(
        op=op,
        command="CUTILE_RS_AUTOBUILD=0 " + shlex.join(["python3", *argv[1:]]),
        exit_code=code,
        seconds=round(time.monotonic() - started, 1),
        **counts,
    )


def run_tests(checkout: Path, ops: list[str], log_dir: Path, timeout_s: int) -> TestRunReport:
    gpu, driver = gpu_and_driver()
    log_dir.mkdir(parents=True, exist_ok=True)
    build_crate(checkout, log_dir / "cargo-build.log")
    return TestRunReport(
        date=date.today().isoformat(),
        tilegym=checkout.name,
        gpu=gpu,
        driver=driver,
        toolchain=toolchain(checkout),
        ops=[run_op(checkout, op, timeout_s) for op in ops],
    )


def markdown(report: TestRunReport) -> str:
    lines = [
        f"# TileGym tests with the cutile-rs backend, {report.date}",
        "",
        f"GPU {report.gpu}, driver {report.driver}; {report.toolchain}.",
        "",
        "| op | passed | failed | skipped | errors | exit | s | command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.op} | {r.passed} | {r.failed} | {r.skipped} | {r.errors} | {r.exit_code} "
        f"| {r.seconds} | `{r.command}` |"
        for r in report.ops
    ]
    return "\n".join(lines) + "\n"
