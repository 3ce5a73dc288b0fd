"""`/tileport port <op>` on a pull request of a TileGym-layout repository.

The op is delivered as TileGym's own cutile-rs backend (`tileport tilegym add`),
from the pull request's head: the files the delivery reads (the cutile and
cutile-rs backends under `src/tilegym/ops/`, the op tests under `tests/ops/`,
and the launch records the repository ships) are fetched from the head commit's
tree into a scratch git checkout, the op is added there, and the files it
changed become one commit on the branch `tileport/<op>`, its parent the head
commit (GitHub's git data API: blobs, a tree over the head's, a commit, the
ref). A comment on the pull request gives the branch and the evidence: every
kernel's port verdict and how it compares with the cuTile Python reference.

Nothing of the repository is imported or run here: the op's source is read as
syntax, and the kernels are exported and checked in the kernel writer's sandbox.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from app.github.client import GitHubClient, GitHubError
from nodes.tilegym_backend.checkout import CRATE_LIB
from nodes.tilegym_backend.stage import add_op
from schemas.launch_capture import read_launch_records
from schemas.tilegym_backend import AddOutcome, AddResult

log = logging.getLogger("tileport.webhook")

# What `tilegym add` reads of a checkout, besides the launch records.
READ_PREFIXES = ("src/tilegym/ops/", "tests/ops/")
MAX_FILES = 5000


class DeliveryError(Exception):
    """The pull request's head cannot be delivered from; says why."""


@dataclass(frozen=True)
class TileGymDelivery:
    """How one op's delivery ended: the branch and commit, or why not."""

    op: str
    result: AddResult
    branch: str = ""
    commit: str = ""


def is_tilegym_layout(client: GitHubClient, repo: str, sha: str) -> bool:
    """Whether the commit has TileGym's cutile-rs crate (the layout ops are added to)."""
    try:
        client.file_content(repo, str(CRATE_LIB), sha)
    except GitHubError as error:
        if error.status == 404:
            return False
        raise
    return True


def _git(checkout: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(checkout),
            "-c",
            "user.name=tileport",
            "-c",
            "user.email=tileport@localhost",
            *args,
        ],
        check=True,
        capture_output=True,
    )


def fetch_checkout(client: GitHubClient, repo: str, sha: str, launches: str, where: Path) -> Path:
    """A git checkout at `where` of the files a delivery reads at `sha`, committed."""
    wanted = [
        entry
        for entry in client.tree(repo, sha)
        if entry.get("type") == "blob"
        and (str(entry["path"]).startswith(READ_PREFIXES) or entry["path"] == launches)
    ]
    if len(wanted) > MAX_FILES:
        raise DeliveryError(f"{len(wanted)} files to read at {sha[:12]}; more than {MAX_FILES}")
    if not any(entry["path"] == launches for entry in wanted):
        raise DeliveryError(
            f"no launch records at {launches} in {sha[:12]}: record the op's launches with "
            "`tileport capture` and commit them there"
        )
    for entry in wanted:
        relative = PurePosixPath(str(entry["path"]))
        if relative.is_absolute() or ".." in relative.parts:
            raise DeliveryError(f"refusing the tree entry {relative}")
        path = where / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(client.blob(repo, str(entry["sha"])))
    _git(where, "init", "-q")
    _git(where, "add", "-A")
    _git(where, "commit", "-q", "-m", f"{repo} at {sha}")
    return where


def deliver_op(
    client: GitHubClient, repo: str, head_sha: str, op: str, launches: str
) -> TileGymDelivery:
    """Add `op` at the PR's head and push the change as a commit on `tileport/<op>`."""
    with tempfile.TemporaryDirectory(prefix="tileport-tilegym-") as scratch:
        checkout = fetch_checkout(client, repo, head_sha, launches, Path(scratch) / "checkout")
        records = read_launch_records(checkout / launches)
        signatures = [(checkout / launches).with_name("signatures.jsonl"), checkout / launches]
        result = add_op(checkout, op, records, signatures, Path(scratch) / "work")
        if result.outcome is not AddOutcome.ADDED:
            return TileGymDelivery(op, result)
        blobs = {
            path: client.create_blob(repo, (checkout / path).read_bytes())
            for path in result.changed
        }
    tree = client.create_tree(repo, client.commit_tree(repo, head_sha), blobs)
    message = f"cutile-rs {op}: ported by tileport from src/tilegym/ops/cutile\n\n" + "\n".join(
        f"{k.kernel}: {k.verdict} ({k.summary})" for k in result.kernels
    )
    commit = client.create_commit(repo, message, tree, head_sha)
    branch = f"tileport/{op}"
    client.set_branch(repo, branch, commit)
    return TileGymDelivery(op, result, branch, commit)


def comment_for(delivery: TileGymDelivery, head_sha: str) -> str:
    """The pull request comment: the branch and the evidence table, or the refusal."""
    result = delivery.result
    if not delivery.branch:
        if result.outcome is AddOutcome.UNCHANGED:
            return (
                f"tileport: `{delivery.op}` already has tileport's cutile-rs backend at "
                f"{head_sha[:12]}."
            )
        return f"tileport could not deliver `{delivery.op}` as a cutile-rs backend: {result.reason}"
    lines = [
        f"tileport ported `{delivery.op}` to TileGym's cutile-rs backend: branch "
        f"`{delivery.branch}`, commit {delivery.commit[:12]} on top of {head_sha[:12]}.",
        "",
        "| kernel | verdict | against the cuTile Python reference |",
        "|---|---|---|",
        *(f"| `{k.kernel}` | {k.verdict} | {k.summary} |" for k in result.kernels),
        "",
        "Files: " + ", ".join(f"`{path}`" for path in result.changed),
        "",
        "TileGym's own tests of the op run with backend cutile-rs on a GPU host: "
        f"`tileport tilegym test {delivery.op} --tilegym CHECKOUT`.",
    ]
    return "\n".join(lines)
