"""Run a command with every `cuda.tile.launch` of its Python processes recorded.

    summary = run_capture(["python3", "-m", "pytest", "tests/ops/test_softmax.py"],
                          Path("launches.jsonl"), append=True)

`toolchain/launch_hook.py` goes into a temporary folder as `sitecustomize.py`,
put first on the child's PYTHONPATH; each Python process writes its launches to
a file of its own in a second temporary folder, and when the command ends these
are merged, each distinct launch once, into the output (`LaunchRecord` lines).
The command's exit status is the summary's; the recorder never changes what the
command does.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from pydantic import ValidationError

from schemas.launch_capture import LaunchRecord, LaunchRecordError, read_launch_records
from toolchain.launch_hook import DIR_VARIABLE, SOURCE_ROOT_VARIABLE

HOOK_SOURCE: Final = Path(__file__).with_name("launch_hook.py")
IMPORT_CHECK_TIMEOUT_S: Final = 300
_PYTHON_NAME: Final = re.compile(r"python(\d+(\.\d+)?)?")
_FORWARDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP)


class CaptureError(Exception):
    """The capture cannot start: a bad argument or environment, said plainly."""


@dataclass
class CaptureSummary:
    """What one capture recorded; `exit_code` is the command's."""

    exit_code: int
    out: str
    distinct_launches: int = 0
    new_records: int = 0
    records_in_file: int = 0
    kernels: list[str] = field(default_factory=list)
    launches_made: int = 0
    compiles_seen: int = 0
    processes: int = 0
    failures: int = 0
    problems: list[str] = field(default_factory=list)
    import_failures: list[str] = field(default_factory=list)
    symbol_mismatches: int = 0
    symbols_missing: int = 0

    def render(self) -> str:
        lines = [
            f"tileport capture: {self.distinct_launches} distinct launches of "
            f"{len(self.kernels)} kernels ({self.new_records} new; {self.records_in_file} "
            f"records in {self.out}); {self.launches_made} launches made by "
            f"{self.processes} processes ({self.compiles_seen} compiled); "
            f"command exit {self.exit_code}"
        ]
        if self.failures:
            lines.append(f"  {self.failures} recorder failures, first: {self.problems[0]}")
        if self.symbols_missing:
            lines.append(f"  {self.symbols_missing} records without an entry symbol")
        if self.symbol_mismatches:
            lines.append(
                f"  {self.symbol_mismatches} symbols predicted differently from what "
                "cuTile compiled (the compiled one was recorded)"
            )
        if self.import_failures:
            lines.append(f"  cuda.tile failed to import: {self.import_failures[0]}")
        elif not self.processes:
            lines.append(
                "  no process launched a cuTile kernel (does the command run Python "
                "that honours PYTHONPATH and imports cuda.tile?)"
            )
        return "\n".join(lines)


def run_capture(
    command: Sequence[str],
    out: Path,
    *,
    append: bool = False,
    check_import: bool = True,
    source_root: Path | None = None,
) -> CaptureSummary:
    """Run `command` recording its launches into `out`; raises `CaptureError`
    before running anything when the command or the output is unusable. With
    `source_root`, kernel files are recorded relative to it (absolute outside it),
    wherever the command runs from."""
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise CaptureError("no command given: tileport capture --out FILE -- COMMAND...")
    existing = _check_output(out, append)
    _resolve(argv[0])
    env = dict(os.environ)
    env.pop(SOURCE_ROOT_VARIABLE, None)
    if source_root is not None:
        if not source_root.is_dir():
            raise CaptureError(f"the source root {source_root} is not a directory")
        env[SOURCE_ROOT_VARIABLE] = os.path.realpath(source_root)
    if check_import:
        _check_cuda_tile(argv, env)
    with tempfile.TemporaryDirectory(prefix="tileport-capture-") as scratch:
        hook_dir = Path(scratch, "hook")
        records_dir = Path(scratch, "records")
        hook_dir.mkdir()
        records_dir.mkdir()
        shutil.copyfile(HOOK_SOURCE, hook_dir / "sitecustomize.py")
        previous = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(hook_dir) + (os.pathsep + previous if previous else "")
        env[DIR_VARIABLE] = str(records_dir)
        exit_code = _run(argv, env)
        summary = CaptureSummary(exit_code=exit_code, out=str(out))
        merged = _merge(records_dir, existing, summary)
    _write(out, merged, append=append and out.exists())
    summary.records_in_file = len(existing) + summary.new_records
    return summary


def _check_output(out: Path, append: bool) -> list[LaunchRecord]:
    """The records already in `out` when appending (checked, for deduplication)."""
    if out.is_dir():
        raise CaptureError(f"--out {out} is a directory; name a file")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise CaptureError(f"the output directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CaptureError(f"the output directory {parent} is not writable")
    if out.exists() and not os.access(out, os.W_OK):
        raise CaptureError(f"the output file {out} is not writable")
    if not (append and out.exists()):
        return []
    try:
        return read_launch_records(out)
    except LaunchRecordError as error:
        raise CaptureError(f"cannot append to a malformed launch file: {error}") from error


def _resolve(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise CaptureError(f"{program}: command not found")
    return found


def _check_cuda_tile(argv: list[str], env: dict[str, str]) -> None:
    python = command_python(argv)
    if python is None:
        return
    try:
        done = subprocess.run(
            [python, "-c", "import cuda.tile"],
            env=env,
            capture_output=True,
            text=True,
            timeout=IMPORT_CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CaptureError(f"could not run {python} to check for cuda.tile: {error}") from error
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit {done.returncode}"
        raise CaptureError(
            f"cuda.tile is not importable by the command's Python ({python}): {reason}"
        )


def command_python(argv: Sequence[str]) -> str | None:
    """The Python interpreter a command runs, when it can be told: `python3 ...`,
    a script whose `#!` line names Python, either behind `timeout`/`env`."""
    rest = _strip_wrappers(list(argv))
    if not rest:
        return None
    program = rest[0]
    if _PYTHON_NAME.fullmatch(os.path.basename(program)):
        return shutil.which(program) or program
    path = shutil.which(program)
    if path is None:
        return None
    shebang = _shebang(Path(path))
    if not shebang:
        return None
    words = shlex.split(shebang)
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if words and _PYTHON_NAME.fullmatch(os.path.basename(words[0])):
        return shutil.which(words[0]) or words[0]
    return None


def _strip_wrappers(argv: list[str]) -> list[str]:
    while argv:
        name = os.path.basename(argv[0])
        if name == "timeout":
            argv = argv[1:]
            while argv and argv[0].startswith("-"):
                takes_value = argv[0] in ("-s", "-k", "--signal", "--kill-after")
                argv = argv[2:] if takes_value else argv[1:]
            argv = argv[1:]  # the duration
        elif name == "env":
            argv = argv[1:]
            while argv and (argv[0].startswith("-") or "=" in argv[0]):
                argv = argv[1:]
        else:
            return argv
    return argv


def _shebang(path: Path) -> str | None:
    try:
        with path.open("rb") as stream:
            first = stream.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].decode("utf-8", "replace").strip()


def _run(argv: list[str], env: dict[str, str]) -> int:
    """Run the command; SIGTERM/SIGHUP are passed on to it (the merge still runs),
    Ctrl-C reaches it through the terminal."""
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as error:
        raise CaptureError(f"could not start {argv[0]}: {error}") from error

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED_SIGNALS}
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGINT, previous_int)
    return 128 - code if code < 0 else code


def _entries(records_dir: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(records_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as stream:
            for text in stream:
                if not text.endswith("\n"):
                    break  # a process killed mid-line
                try:
                    entry = json.loads(text)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict):
                    yield path, entry


def _merge(
    records_dir: Path, existing: list[LaunchRecord], summary: CaptureSummary
) -> list[dict[str, Any]]:
    """This run's new records, in launch order, each distinct launch once."""
    known = {record.identity() for record in existing}
    this_run: set[str] = set()
    kernels: set[str] = set()
    processes: set[Path] = set()
    new: list[dict[str, Any]] = []
    for path, entry in _entries(records_dir):
        if "launch" in entry:
            processes.add(path)
            try:
                record = LaunchRecord.model_validate(entry["launch"])
            except ValidationError as error:
                summary.failures += 1
                summary.problems.append(f"a recorded launch is malformed: {error}")
                continue
            identity = record.identity()
            if identity in this_run:
                continue
            this_run.add(identity)
            kernels.add(record.kernel)
            summary.symbols_missing += record.symbol is None
            if identity not in known:
                known.add(identity)
                new.append(entry["launch"])
        elif "stats" in entry:
            processes.add(path)
            summary.launches_made += int(entry["stats"].get("launches", 0))
            summary.compiles_seen += int(entry["stats"].get("compiles", 0))
        elif "problem" in entry:
            summary.failures += 1
            summary.problems.append(str(entry["problem"]))
        elif "import_failed" in entry:
            summary.import_failures.append(str(entry["import_failed"]))
        elif "symbol_mismatch" in entry:
            summary.symbol_mismatches += 1
    summary.distinct_launches = len(this_run)
    summary.new_records = len(new)
    summary.kernels = sorted(kernels)
    summary.processes = len(processes)
    return new


def _write(out: Path, records: list[dict[str, Any]], *, append: bool) -> None:
    lines = "".join(json.dumps(record) + "\n" for record in records)
    if append:
        with out.open("a", encoding="utf-8") as stream:
            stream.write(lines)
        return
    parent = out.parent if str(out.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{out.name}.", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(lines)
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
