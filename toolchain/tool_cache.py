"""Outputs of deterministic tool runs, kept by content.

A port is proven by assembling the reference's and the port's bytecode with tileiras
and reading both cubins with cuobjdump, for every configuration and target; adding an
op, re-running a port or porting a kernel whose configurations share code assembles
the same bytes again. A run whose output depends only on its input bytes, its flags
and the tool binary (tileiras without address randomisation, cuobjdump) is looked up
here first, under a key of all three. Runs on bytes someone submitted never read or
write it, nor do tileiras's randomised samples, whose point is to vary.

The cache is `$TILEPORT_CACHE/tools/` (toolchain.env.cache_dir); deleting it is always
safe. `TILEPORT_TOOL_CACHE=off` turns it off (a cold timing, say)."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from toolchain.env import cache_dir

SWITCH = "TILEPORT_TOOL_CACHE"


def enabled() -> bool:
    return os.environ.get(SWITCH, "on").lower() not in ("off", "0", "no")


@functools.cache
def _tool_identity(tool: str) -> str:
    # A reinstalled or upgraded tool has another size or modification time.
    status = Path(tool).stat()
    return f"{tool}\0{status.st_size}\0{status.st_mtime_ns}"


def content_key(tool: str, flags: Sequence[str], content: bytes) -> str:
    """The key of running `tool` with `flags` on a file holding `content`."""
    digest = hashlib.sha256()
    for part in (_tool_identity(tool), *flags):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(content)
    return digest.hexdigest()


def _entry(kind: str, key: str) -> Path:
    return cache_dir() / "tools" / kind / key[:2] / key


def restore(kind: str, key: str) -> bytes | None:
    """The kept output of `key`, or None when none is kept."""
    entry = _entry(kind, key)
    if not enabled() or not entry.is_file():
        return None
    return entry.read_bytes()


def keep(kind: str, key: str, output: bytes) -> None:
    """Keep `output` as the output of `key`; written whole or not at all, so a
    concurrent reader never sees part of an entry."""
    if not enabled():
        return
    entry = _entry(kind, key)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=entry.parent, delete=False) as partial:
        partial.write(output)
    os.replace(partial.name, entry)
