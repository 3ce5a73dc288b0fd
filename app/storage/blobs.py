"""Content-addressed storage of artifact bytes on disk: `objects/ab/abcdef...`.
The database keeps the metadata (path, kind, hash, size); equal files share one
object."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()

    def put_bytes(self, data: bytes) -> str:
        sha256 = sha256_bytes(data)
        if not self.has(sha256):
            self._write_atomically(self.path_for(sha256), data)
        return sha256

    def put_file(self, source: Path) -> tuple[str, int]:
        sha256 = sha256_file(source)
        size = source.stat().st_size
        if not self.has(sha256):
            self._write_atomically(self.path_for(sha256), source.read_bytes())
        return sha256, size

    def read(self, sha256: str) -> bytes:
        return self.path_for(sha256).read_bytes()

    @staticmethod
    def _write_atomically(target: Path, data: bytes) -> None:
        # Write then rename, so a reader never sees half an object.
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
