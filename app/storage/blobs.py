"""Content-addressed storage of artifact bytes on disk: `objects/ab/abcdef...`.
The database keeps the metadata (path, kind, hash, size); equal files share one
object.

Objects are immutable: each is written once, under a temporary name, then linked
to its hash (an existing object is never replaced) and left read-only. No
sandboxed step can reach the store (toolchain.sandbox); the worker copies a run's
files in only after its steps have ended. Every read checks the bytes against
their name, so a changed or missing object is detected (BlobCorrupt), never
handed out."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import IO

CHUNK = 1 << 20
SPOOL_BYTES = 8 << 20  # a verified copy larger than this goes to a temporary file
INCOMING_PREFIX = ".incoming-"  # in the store's root: the same filesystem as the objects


class BlobCorrupt(Exception):
    """A stored object is missing, or its bytes no longer hash to its name."""

    def __init__(self, sha256: str, found: str | None) -> None:
        what = "missing" if found is None else f"its bytes hash to {found}"
        super().__init__(f"object {sha256} is {what}")
        self.sha256 = sha256
        self.found = found


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_verified(path: Path, sha256: str) -> IO[bytes]:
    """A private copy of the object at `path`, checked against `sha256`: what is
    served is what was checked. Raises BlobCorrupt."""
    with contextlib.ExitStack() as cleanup:
        copy = cleanup.enter_context(tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES))
        digest = hashlib.sha256()
        try:
            with path.open("rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
                    copy.write(chunk)
        except FileNotFoundError:
            raise BlobCorrupt(sha256, None) from None
        if digest.hexdigest() != sha256:
            raise BlobCorrupt(sha256, digest.hexdigest())
        copy.seek(0)
        cleanup.pop_all()  # the caller closes it
        return copy


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
        with self._incoming() as temp:
            temp.write(data)
            return self._publish(temp, sha256_bytes(data))

    def put_file(self, source: Path) -> tuple[str, int]:
        """Store a regular file (never through a symlink); the hash is of the bytes
        stored, read once."""
        handle = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(handle, "rb") as data, self._incoming() as temp:
            if not stat.S_ISREG(os.fstat(data.fileno()).st_mode):
                raise ValueError(f"{source} is not a regular file")
            digest, size = hashlib.sha256(), 0
            while chunk := data.read(CHUNK):
                digest.update(chunk)
                temp.write(chunk)
                size += len(chunk)
            return self._publish(temp, digest.hexdigest()), size

    def read(self, sha256: str) -> bytes:
        """The object's bytes, checked against its hash. Raises BlobCorrupt."""
        with open_verified(self.path_for(sha256), sha256) as handle:
            return handle.read()

    def _incoming(self) -> IO[bytes]:
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
        return tempfile.NamedTemporaryFile(dir=self.root, prefix=INCOMING_PREFIX)

    def _publish(self, temp: IO[bytes], sha256: str) -> str:
        """Give the written temporary file its hash's name, read-only, unless an object
        of that name exists (it is never replaced)."""
        target = self.path_for(sha256)
        if os.path.lexists(target):
            return sha256
        temp.flush()
        os.fsync(temp.fileno())  # durable before it has its name: a named object is whole
        os.fchmod(temp.fileno(), 0o444)
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.link(temp.name, target)
        return sha256
