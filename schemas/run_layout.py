"""The fixed layout of one run directory, shared by every stage and by the gate.

    <run>/reference/   reference Tile IR per variant, baseline data      (analyzer)
    <run>/generated/   kernel.rs, generated Tile IR per variant          (kernel writer)
    <run>/host/        ffi.rs, the cffi wrapper, the library, GPU bundle (host builder)
    <run>/reports/     one JSON report per stage, history/, summary.json
    <run>/logs/        one log per stage execution

A fresh run empties these five directories first, so nothing an earlier run
left there can count; files the caller keeps elsewhere in the directory are
never touched. A resumed run keeps them: they belong to the run being resumed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from schemas.pipeline import Stage

REFERENCE_DIR: Final = "reference"
GENERATED_DIR: Final = "generated"
HOST_DIR: Final = "host"
REPORTS_DIR: Final = "reports"
LOGS_DIR: Final = "logs"
RUN_SUBDIRS: Final = (REFERENCE_DIR, GENERATED_DIR, HOST_DIR, REPORTS_DIR, LOGS_DIR)

SUMMARY_FILE: Final = "summary.json"
HISTORY_DIR: Final = "history"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class RunPathError(ValueError):
    """A path that would escape the run directory or is not a plain relative path."""


def check_run_relative(path: str) -> str:
    """Accept only plain relative POSIX paths (`a/b.json`) that stay inside the run
    directory: no absolute path, no `..`, no `.` or empty components."""
    if not path or "\\" in path:
        raise RunPathError(f"not a relative POSIX path: {path!r}")
    components = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in components):
        raise RunPathError(f"path must stay inside the run directory: {path!r}")
    return path


def safe_name(name: str) -> str:
    """A variant or file name that is safe to use as one path component."""
    if not _SAFE_NAME.match(name):
        raise RunPathError(f"not a safe file name: {name!r}")
    return name


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class RunLayout:
    root: Path

    @property
    def reference_dir(self) -> Path:
        return self.root / REFERENCE_DIR

    @property
    def generated_dir(self) -> Path:
        return self.root / GENERATED_DIR

    @property
    def host_dir(self) -> Path:
        return self.root / HOST_DIR

    @property
    def reports_dir(self) -> Path:
        return self.root / REPORTS_DIR

    @property
    def logs_dir(self) -> Path:
        return self.root / LOGS_DIR

    @property
    def summary_path(self) -> Path:
        return self.reports_dir / SUMMARY_FILE

    def report_path(self, file_name: str) -> Path:
        return self.reports_dir / safe_name(file_name)

    def history_path(self, file_name: str, attempt: int) -> Path:
        """Where the report of one particular execution is kept (the latest is
        also at report_path)."""
        stem = Path(safe_name(file_name)).stem
        return self.reports_dir / HISTORY_DIR / f"{stem}.{attempt}.json"

    def stage_log(self, stage: Stage, attempt: int) -> Path:
        return self.logs_dir / f"{stage.value}.{attempt}.log"

    def reference_ir(self, variant: str) -> Path:
        return self.reference_dir / f"{safe_name(variant)}.mlir"

    def generated_ir(self, variant: str) -> Path:
        return self.generated_dir / f"{safe_name(variant)}.mlir"

    @property
    def kernel_rs(self) -> Path:
        return self.generated_dir / "kernel.rs"

    @property
    def ffi_rs(self) -> Path:
        return self.host_dir / "ffi.rs"

    @property
    def wrapper_py(self) -> Path:
        return self.host_dir / "wrapper.py"

    def resolve(self, relative: str) -> Path:
        """The absolute path of a run-relative path recorded in a report."""
        return self.root / check_run_relative(relative)

    def relative(self, path: Path) -> str:
        """The run-relative form of a path inside the run directory, as reports record it."""
        try:
            rel = path.resolve().relative_to(self.root.resolve())
        except ValueError as exc:
            raise RunPathError(f"{path} is outside the run directory {self.root}") from exc
        return check_run_relative(rel.as_posix())

    def prepare_fresh(self) -> None:
        """Start a new run here: empty the stage directories, keep everything else."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name in RUN_SUBDIRS:
            target = self.root / name
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            target.mkdir()

    def ensure(self) -> None:
        """Make sure the directories exist without removing anything (resumed runs)."""
        for name in RUN_SUBDIRS:
            (self.root / name).mkdir(parents=True, exist_ok=True)
