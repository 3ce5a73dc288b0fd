"""rustfmt over text: generated Rust is laid out by the formatter, not by hand."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


class RustfmtError(RuntimeError):
    """rustfmt is missing or refused the text; the message carries its errors."""


def _rustfmt() -> str:
    found = shutil.which("rustfmt") or str(Path.home() / ".cargo/bin/rustfmt")
    if not Path(found).is_file():
        raise RustfmtError("rustfmt is not installed (rustup component add rustfmt)")
    return found


def format_rust(text: str, edition: str = "2024") -> str:
    done = subprocess.run(
        [_rustfmt(), "--edition", edition, "--emit", "stdout"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RustfmtError(f"rustfmt failed: {done.stderr.strip()}")
    return done.stdout
