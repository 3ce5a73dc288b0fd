"""The first process of a sandboxed step (see `toolchain.sandbox`): sets the step's
resource limits, becomes the sandbox user when started as root, then executes
the step in its scratch directory. The standard library only: it runs as `python -I -S`.

    python -I -S _sandbox_exec.py --chdir DIR [--as BYTES] [--nproc N] [--cpu S]
                                  [--fsize BYTES] [--user UID:GID] -- COMMAND...
"""

from __future__ import annotations

import argparse
import os
import resource
import sys


def limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def become(user: str) -> None:
    """Drop root for good: no supplementary groups, then the group, then the user."""
    uid, gid = (int(part) for part in user.split(":"))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
        raise SystemExit("sandbox: could not become the sandbox user")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="_sandbox_exec")
    parser.add_argument("--as", dest="address_space", type=int)
    parser.add_argument("--nproc", type=int)
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--fsize", type=int)
    parser.add_argument("--user")
    parser.add_argument("--chdir", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    limit(resource.RLIMIT_CORE, 0)
    if args.address_space is not None:
        limit(resource.RLIMIT_AS, args.address_space)
    if args.cpu is not None:
        limit(resource.RLIMIT_CPU, args.cpu)
    if args.fsize is not None:
        limit(resource.RLIMIT_FSIZE, args.fsize)
    if args.nproc is not None:
        limit(resource.RLIMIT_NPROC, args.nproc)
    if args.user is not None:
        become(args.user)
    os.chdir(args.chdir)
    os.environ.pop("PWD", None)  # bwrap's own; the step gets the environment it was given
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"sandbox: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
