"""`tileport convert` from a checkout nobody may write to: a kernel the checkout's
library does not hold reaches the GPU boundary, and the tree is byte for byte what
it was.

The code runs from a copy of the working tree (tracked files and new ones git does
not ignore), made read-only by a read-only bind mount in a mount namespace of its
own where `unshare --mount` can make one (as root, whom permissions do not stop),
else by taking away write permission. Either way every file is hashed before and
after, and git must see nothing new, not even an ignored file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNEL = "vector_add"  # not in the checkout's library
CONVERT_TIMEOUT_S = 900
GIT_IDENTITY = ("-c", "user.name=tileport tests", "-c", "user.email=tests@tileport.invalid")
# Mounts the tree ($0) read-only over itself, then runs the command.
READ_ONLY_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'

pytestmark = pytest.mark.slow


def _git(tree: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_IDENTITY, *args], cwd=tree, capture_output=True, text=True, check=True
    )
    return done.stdout


def checkout_copy(target: Path) -> Path:
    """The working tree as git sees it, as a repository of its own with one commit."""
    listed = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "the tree under test")
    return target


def tree_digest(root: Path) -> dict[str, str]:
    """Every directory and the sha256 of every file under `root`, git's own aside."""
    digest: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] == ".git":
            continue
        if path.is_dir():
            digest[relative.as_posix()] = "directory"
        else:
            digest[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def read_only_mount(tree: Path) -> list[str] | None:
    """A command prefix that runs its command with `tree` mounted read-only, or None
    where no mount namespace can be made here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    prefix = [unshare, "--mount", "sh", "-c", READ_ONLY_MOUNT, str(tree)]
    probe = tree / "write-probe"
    tried = subprocess.run([*prefix, "touch", str(probe)], capture_output=True, check=False)
    works = subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode == 0
    if probe.exists():
        probe.unlink()
        return None
    return prefix if works and tried.returncode != 0 else None


def _set_writable(tree: Path, writable: bool) -> None:
    for path in [tree, *tree.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~write)


@pytest.fixture
def read_only_tree(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """The copied checkout and the command prefix that keeps it read-only."""
    tree = checkout_copy(tmp_path / "checkout")
    prefix = read_only_mount(tree)
    if prefix is not None:
        yield tree, prefix
        return
    _set_writable(tree, False)
    try:
        yield tree, []
    finally:
        _set_writable(tree, True)


def convert_to_the_gpu_boundary(
    tree: Path, prefix: list[str], spec: str, run: Path
) -> dict[str, object]:
    """`tileport convert SPEC --no-gpu` run from `tree` (under `prefix`): exit 4, the
    GPU boundary; its JSON summary."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "app.cli", "convert", spec, "--no-gpu", "--out", str(run)]
    done = subprocess.run(
        [*prefix, *command, "--json"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=CONVERT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 4, (spec, done.stderr[-4000:])
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


def test_a_new_kernel_converts_from_a_read_only_checkout(
    read_only_tree: tuple[Path, list[str]], tmp_path: Path
) -> None:
    tree, prefix = read_only_tree
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    where = subprocess.run(
        [*prefix, sys.executable, "-c", "import toolchain.env as e; print(e.REPO_ROOT)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()) == tree, "the code under test runs from the copy"
    before = tree_digest(tree)
    run = tmp_path / "run"
    summary = convert_to_the_gpu_boundary(tree, prefix, f"examples/kernels/{KERNEL}.port.yaml", run)
    assert summary["exit_code"] == 4 and summary["reached_gpu_boundary"]
    assert tree_digest(tree) == before
    assert _git(tree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    host = json.loads((run / "reports" / "host_build.json").read_text(encoding="utf-8"))
    assert host["c_symbol"] == f"cutile_{KERNEL}"
    assert (run / host["library"]).is_file()
    assert (run / "host" / "library" / "ported" / "src" / "ffi" / f"{KERNEL}.rs").is_file()


TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO.parent / "shared" / "tilegym"))
LAUNCHES = Path(
    os.environ.get("TILEPORT_TILEGYM_LAUNCHES", REPO.parent / "shared" / "tilegym-launches")
)
# relu ports exact; rms_norm's static persistent kernel and swiglu forward sass-identical
TILEGYM_KERNELS = ("relu_fwd_kernel", "rms_norm_kernel_static_persistent", "swiglu_forward_kernel")


@pytest.mark.timeout(1800)  # three conversions; the first may build the workspace's crates
@pytest.mark.skipif(
    not (TILEGYM / "src").is_dir() or not (LAUNCHES / "launches.jsonl").is_file(),
    reason="the TileGym snapshot and its recorded launches are not beside the checkout",
)
def test_tilegym_kernels_convert_from_a_read_only_checkout(
    read_only_tree: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Specs generated from TileGym's recorded launches name modules of the unmodified
    library; each converts to the GPU boundary and the checkout is left as it was."""
    tree, prefix = read_only_tree
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    specs = tmp_path / "specs"
    generate = [sys.executable, "-m", "app.cli", "specs", str(LAUNCHES / "launches.jsonl")]
    generate += ["--source-root", str(TILEGYM / "src"), "--out", str(specs)]
    made = subprocess.run(
        [*prefix, *generate], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    before = tree_digest(tree)
    for kernel in TILEGYM_KERNELS:
        spec = str(specs / f"{kernel}.port.yaml")
        assert convert_to_the_gpu_boundary(tree, prefix, spec, tmp_path / kernel)[
            "reached_gpu_boundary"
        ], kernel
    assert tree_digest(tree) == before
    assert _git(tree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
