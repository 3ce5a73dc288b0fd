"""The blob store's objects are immutable and checked on every read: a changed or
missing object is detected (BlobCorrupt), never handed out; nothing is stored
through a link. (Serving a tampered artifact: tests/service/test_artifacts.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.storage.blobs import BlobCorrupt, BlobStore, sha256_bytes


def test_objects_are_read_only_and_never_replaced(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "objects")
    sha = store.put_bytes(b"pub fn kernel() {}\n")
    blob = store.path_for(sha)
    assert blob.stat().st_mode & 0o777 == 0o444
    inode = blob.stat().st_ino
    assert store.put_bytes(b"pub fn kernel() {}\n") == sha
    assert blob.stat().st_ino == inode
    assert sorted(p.name for p in (tmp_path / "objects").iterdir()) == [sha[:2]]


def test_a_tampered_object_is_detected(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "objects")
    sha = store.put_bytes(b"pub fn kernel() {}\n")
    blob = store.path_for(sha)
    blob.chmod(0o644)
    blob.write_bytes(b"pub fn kernel() { steal() }\n")
    with pytest.raises(BlobCorrupt) as caught:
        store.read(sha)
    assert caught.value.found == sha256_bytes(b"pub fn kernel() { steal() }\n")
    blob.unlink()
    with pytest.raises(BlobCorrupt, match="missing"):
        store.read(sha)


def test_nothing_is_stored_through_a_link(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "objects")
    secret = tmp_path / "api-token"
    secret.write_text("secret")
    link = tmp_path / "leak.txt"
    link.symlink_to(secret)
    with pytest.raises(OSError):
        store.put_file(link)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        store.put_file(fifo)
    assert not any(p.is_file() for p in (tmp_path / "objects").rglob("*"))
