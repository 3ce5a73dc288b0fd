"""TileGym's own test file of each op this project added, run with the cutile-rs
backend on a GPU host (`tileport tilegym test`).

The crate is built once first (or, with `--no-build`, on the build machine: a GPU
host without cargo runs `python3 -m nodes.tilegym_backend.test_run`); the tests
then run with `CUTILE_RS_AUTOBUILD=0`, so every test file loads that one library
and none rebuilds it mid-run. The counts come from pytest's summary line.
"""

from __future__ import annotations

import argparse
import ast
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
from schemas.tilegym_backend import MARKER, OpTestResult, TestRunReport

CRATE = CUTILE_RS / "cutile_kernels"
LIBRARY = CRATE / "target" / "release" / "libcutile_kernels.so"
USAGE_ERROR = 2
# TileGym's benchmarks (`test_perf*`): run apart (`--benchmarks`), since they time
# every backend and take longer than the op's tests.
BENCHMARKS = "test_perf"
NO_GPU = 4
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


def open_checkout(checkout: Path) -> tuple[str, str]:
    """The GPU and driver, with this process set to call the checkout's ops on the
    library the build machine made (`tilegym` imported from its `src/`, no rebuild);
    NoGpu where there is no GPU."""
    gpu, driver = gpu_and_driver()
    os.environ["CUTILE_RS_AUTOBUILD"] = "0"
    sys.path.insert(0, str(checkout / "src"))
    return gpu, driver


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


def toolchain(checkout: Path, built_here: bool) -> str:
    manifest = (checkout / CRATE / "Cargo.toml").read_text(encoding="utf-8")
    pin = _PIN.search(manifest)
    cutile = f"cutile {pin.group(1) if pin else '?'}"
    if not built_here:
        return f"library built on the build machine; {cutile}"
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=False)
    return f"{rustc.stdout.strip() or 'rustc: not found'}; {cutile}"


def build_crate(checkout: Path, log: Path) -> Path:
    """`cargo build --release` of the crate with the CUDA headers and libclang cutile's
    bindings need, the library then placed where TileGym's loader looks (the crate's
    target/release/). The crate commits no lock file, so this project's (the one the
    ports were proven with) is put beside it first; the build goes to one cargo
    target for every TileGym checkout, so a second checkout does not rebuild cutile
    (and the first starts from this checkout's own release build)."""
    from toolchain.env import (  # the build machine's
        REPO_ROOT,
        cache_dir,
        start_from_checkout_build,
        toolchain_env,
    )

    crate = checkout / CRATE
    lock = crate / "Cargo.lock"
    if not lock.exists():
        shutil.copy(REPO_ROOT / "kernels_rs" / "Cargo.lock", lock)  # TileGym ignores it
    target = cache_dir() / "target-tilegym"
    start_from_checkout_build(target)
    env = {**toolchain_env(), "CARGO_TARGET_DIR": str(target)}
    with log.open("w") as out:
        done = subprocess.run(
            ["cargo", "build", "--release"],
            cwd=crate,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"cargo build --release of {CRATE} failed: see {log}")
    placed = checkout / LIBRARY
    placed.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(target / "release" / LIBRARY.name, placed)
    return placed


def op_tests(checkout: Path, test: Path, op: str, *, benchmarks: bool = False) -> list[str]:
    """The pytest node ids of the test functions in `test` that call `op`
    (`tilegym.ops.<op>(...)`, or `<op>(...)` imported), benchmarks left out (or only
    them, with `benchmarks`); the whole file when no test does (no benchmark: none).
    A file can hold several ops' tests (experimental/test_mhc.py holds three)."""
    tree = ast.parse((checkout / test).read_text(encoding="utf-8"))
    ids: list[str] = []
    scopes: list[ast.Module | ast.ClassDef] = [tree]
    scopes += [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for scope in scopes:
        prefix = f"{test}::{scope.name}::" if isinstance(scope, ast.ClassDef) else f"{test}::"
        tests = [
            n
            for n in scope.body
            if isinstance(n, ast.FunctionDef)
            and n.name.startswith("test")
            and n.name.startswith(BENCHMARKS) == benchmarks
        ]
        ids += [
            prefix + node.name
            for node in tests
            if any(
                (isinstance(n, ast.Attribute) and n.attr == op)
                or (isinstance(n, ast.Name) and n.id == op)
                for n in ast.walk(node)
            )
        ]
    return ids or ([] if benchmarks else [str(test)])


def run_op(
    checkout: Path, op: str, timeout_s: int, log_dir: Path, *, benchmarks: bool = False
) -> OpTestResult | None:
    """One op's tests (its benchmarks: None where it has none); pytest's output goes to
    `log_dir/<op>.log` (`<op>-benchmarks.log`)."""
    test = find_test(checkout, op)
    selected = op_tests(checkout, test, op, benchmarks=benchmarks)
    if not selected:
        return None
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *selected,
        "-q",
        "-rfEs",  # each failure's and skip's one-line reason in the log
        "-k",
        "cutile_rs",  # TileGym's test ids spell the backend so
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
        partial = expired.stdout or ""
        output = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        output, code = output + f"\n(stopped after {timeout_s} s)\n", 124
    log = f"{op}-benchmarks.log" if benchmarks else f"{op}.log"
    (log_dir / log).write_text(output, encoding="utf-8")
    counts = parse_counts(output)
    return OpTestResult(
        op=op,
        command="CUTILE_RS_AUTOBUILD=0 " + shlex.join(["python3", *argv[1:]]),
        exit_code=code,
        seconds=round(time.monotonic() - started, 1),
        **counts,
    )


def run_tests(
    checkout: Path,
    ops: list[str],
    log_dir: Path,
    timeout_s: int,
    *,
    build: bool = True,
    benchmarks: bool = False,
) -> TestRunReport:
    """Every op's tests (or benchmarks); `build=False` takes the library already in the
    crate's target (FileNotFoundError when there is none)."""
    gpu, driver = gpu_and_driver()
    log_dir.mkdir(parents=True, exist_ok=True)
    if build:
        build_crate(checkout, log_dir / "cargo-build.log")
    elif not (checkout / LIBRARY).is_file():
        raise FileNotFoundError(f"no library at {checkout / LIBRARY}: build the crate first")
    return TestRunReport(
        date=date.today().isoformat(),
        tilegym=checkout.name,
        gpu=gpu,
        driver=driver,
        toolchain=toolchain(checkout, build),
        ops=[
            result
            for op in ops
            if (result := run_op(checkout, op, timeout_s, log_dir, benchmarks=benchmarks))
        ],
    )


def merged(earlier: Path, report: TestRunReport) -> TestRunReport:
    """`report` with the ops of the run recorded at `earlier` that it did not rerun."""
    if not earlier.is_file():
        return report
    before = TestRunReport.model_validate_json(earlier.read_text(encoding="utf-8"))
    if (before.gpu, before.driver, before.date) != (report.gpu, report.driver, report.date):
        raise RuntimeError(f"{earlier} is another day's or another GPU's run: not merged")
    rerun = {r.op for r in report.ops}
    kept = [r for r in before.ops if r.op not in rerun]
    return report.model_copy(update={"ops": kept + list(report.ops)})


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


def add_test_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="*", metavar="OP")
    parser.add_argument("--tilegym", required=True, type=Path, metavar="CHECKOUT")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per test file")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the ops of an earlier run of the same day on the same GPU in the results "
        "file (several runs, each within a time limit, make one table)",
    )
    parser.add_argument(
        "--no-build",
        action="store_true",
        help=f"use the library already at {LIBRARY} (built on the build machine; a GPU "
        "host without cargo)",
    )
    parser.add_argument(
        "--benchmarks",
        action="store_true",
        help="run the ops' benchmarks (`test_perf*`, every backend timed) instead of their "
        "tests; results in tilegym-benchmarks-<date>.{json,md}",
    )


def test_command(args: argparse.Namespace) -> int:
    checkout = args.tilegym.resolve()
    ops = args.ops or added_ops(checkout)
    if not ops:
        print(f"tileport tilegym test: no op added to {checkout}", file=sys.stderr)
        return USAGE_ERROR
    try:
        report = run_tests(
            checkout,
            ops,
            args.out / "logs",
            args.timeout,
            build=not args.no_build,
            benchmarks=args.benchmarks,
        )
    except NoGpu as error:
        print(f"skipped: {error}; run it on a GPU host", file=sys.stderr)
        return NO_GPU
    except (FileNotFoundError, RuntimeError) as error:
        print(f"tileport tilegym test: {error}", file=sys.stderr)
        return USAGE_ERROR
    kind = "benchmarks" if args.benchmarks else "tests"
    stem = args.out / f"tilegym-{kind}-{report.date}"
    if args.merge:
        report = merged(stem.with_suffix(".json"), report)
    stem.with_suffix(".json").write_text(report.model_dump_json(indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {stem}.json and {stem}.md", file=sys.stderr)
    return 1 if any(r.failed or r.errors or r.exit_code for r in report.ops) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m nodes.tilegym_backend.test_run", description=__doc__
    )
    add_test_arguments(parser)
    return test_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
