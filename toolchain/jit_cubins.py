"""The cubins both JITs compiled in one GPU run, kept for stage F.

A port proven SASS-identical on the build host can still run other machine code
on the GPU: each side's JIT assembles its own bytecode with its own `tileiras`
flags (cuTile Python adds `--lineinfo`; cutile-rs does not). `keep_compiles`
makes a run keep what actually ran:

- the reference: cuTile Python's disk cache (`CUDA_TILE_CACHE_DIR`), an SQLite
  table of cubins whose metadata names the kernels each holds, pointed at
  `OUT/cubins/reference`;
- the port: cutile-rs runs the `tileiras` that `CUTILE_TILEIRAS_PATH` names (read
  once per process), pointed at a script written to `OUT/cubins/tileiras` that runs
  the real one and copies the cubin it wrote, and the bytecode it read, into
  `OUT/cubins/port`.

Both must be set before either JIT first compiles. The readers below take a result
folder on any host; cubins are data there, never loaded.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import stat
from pathlib import Path

CUBINS_DIR = "cubins"
CACHE_FILE = "cache.db"  # cuTile Python's disk cache (cutile_cache._cache)
_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.MULTILINE)


def keep_compiles(out: Path) -> Path:
    """Points both JITs of this process at `out/cubins`; returns that folder."""
    folder = out / CUBINS_DIR
    (folder / "port").mkdir(parents=True, exist_ok=True)
    (folder / "reference").mkdir(exist_ok=True)
    real = os.environ.get("CUTILE_TILEIRAS_PATH") or shutil.which("tileiras")
    if real is None:
        raise FileNotFoundError("no tileiras to record: CUTILE_TILEIRAS_PATH is unset")
    script = folder / "tileiras"
    script.write_text(_recorder(Path(real), folder / "port"), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    os.environ["CUDA_TILE_CACHE_DIR"] = str(folder / "reference")
    os.environ["CUTILE_TILEIRAS_PATH"] = str(script)
    return folder


def _recorder(real: Path, keep: Path) -> str:
    return (
        "#!/bin/sh\n"
        "# tileiras, keeping a copy of the cubin it writes (tileport gpu-run --keep-cubins)\n"
        'out= previous=\nfor arg in "$@"; do\n'
        '  [ "$previous" = "-o" ] && out=$arg\n  previous=$arg\ndone\n'
        f'{shlex.quote(str(real))} "$@" || exit $?\n'
        f'if [ -n "$out" ]; then cp "$out" {shlex.quote(str(keep))}/; fi\n'
        "# the bytecode it was given (the last argument), beside the cubin\n"
        "for input; do :; done\n"
        f'case "$input" in *.bc) cp "$input" {shlex.quote(str(keep))}/ ;; esac\n'
    )


def reference_cubins(folder: Path) -> dict[str, bytes]:
    """Kernel symbol -> the cubin cuTile Python compiled for it, from the kept cache."""
    path = folder / CUBINS_DIR / "reference" / CACHE_FILE
    if not path.is_file():
        return {}
    found: dict[str, bytes] = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        for blob, metadata in connection.execute("SELECT blob, metadata FROM cache"):
            try:
                names = json.loads(metadata or "{}").get("kernel_names") or []
            except json.JSONDecodeError:
                continue
            for name in names:
                if isinstance(name, str) and name:
                    found[name] = bytes(blob)
    return found


def port_cubins(listing: dict[Path, str]) -> dict[str, list[Path]]:
    """Kernel symbol -> the kept cubins that define it (one per specialisation the
    launcher compiled); `listing` holds each kept cubin's `cuobjdump -sass` text."""
    found: dict[str, list[Path]] = {}
    for cubin, text in sorted(listing.items()):
        for name in _FUNCTION.findall(text):
            found.setdefault(name, []).append(cubin)
    return found


def kept_port_cubins(folder: Path) -> list[Path]:
    return sorted((folder / CUBINS_DIR / "port").glob("*.cubin"))
