"""The first process of a sandboxed step (see `toolchain.sandbox`): sets the step's
resource limits, becomes the sandbox user when started as root, installs a seccomp
filter refusing new user namespaces and the kernel interfaces a namespace escape
starts from, then executes the step in its scratch directory. The standard library
only: it runs as `python -I -S`.

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


# The x86-64 system calls refused (EPERM): namespaces (a user namespace gives uid 0
# with every capability inside it), kernel keyrings, eBPF, io_uring, userfaultfd.
DENIED_SYSCALLS = {
    "unshare": 272,
    "setns": 308,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}
CLONE, CLONE3 = 56, 435  # clone's flags are checked; clone3's sit behind a pointer
CLONE_NEWUSER = 0x10000000
AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
EPERM, ENOSYS = 1, 38
# Classic BPF, as seccomp runs it over `struct seccomp_data` (nr at 0, arch at 4,
# the first argument's low word at 16 on a little-endian machine).
LOAD_WORD, JUMP_EQUAL, JUMP_AT_LEAST, JUMP_ANY_BIT, RETURN = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, SECCOMP_MODE_FILTER = 22, 38, 2


def namespace_filter() -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jump if true, jump if false, operand)."""
    deny = (RETURN, 0, 0, ERRNO | EPERM)
    program = [
        (LOAD_WORD, 0, 0, 4),
        (JUMP_EQUAL, 1, 0, AUDIT_ARCH_X86_64),
        deny,  # a 32-bit entry into the kernel: nothing allowed
        (LOAD_WORD, 0, 0, 0),
        (JUMP_AT_LEAST, 0, 1, X32_BIT),
        deny,
    ]
    for number in DENIED_SYSCALLS.values():
        program += [(JUMP_EQUAL, 0, 1, number), deny]
    # clone3's flags cannot be read: ENOSYS, and the C library falls back to clone.
    program += [(JUMP_EQUAL, 0, 1, CLONE3), (RETURN, 0, 0, ERRNO | ENOSYS)]
    program += [
        (JUMP_EQUAL, 0, 3, CLONE),
        (LOAD_WORD, 0, 0, 16),
        (JUMP_ANY_BIT, 0, 1, CLONE_NEWUSER),
        deny,
        (RETURN, 0, 0, ALLOW),
    ]
    return program


def deny_namespaces() -> None:
    """Install `namespace_filter` for this process and what it executes (after
    PR_SET_NO_NEW_PRIVS, which also keeps set-user-ID programs from gaining any)."""
    import ctypes  # only where the filter is installed
    import platform

    if platform.machine() != "x86_64":
        raise SystemExit("sandbox: the seccomp filter is written for x86-64 only")

    class Instruction(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]

    instructions = namespace_filter()
    table = (Instruction * len(instructions))(*(Instruction(*i) for i in instructions))
    program = Program(len(instructions), table)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit(f"sandbox: no_new_privs refused: {os.strerror(ctypes.get_errno())}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        raise SystemExit(f"sandbox: seccomp refused: {os.strerror(ctypes.get_errno())}")


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
    deny_namespaces()
    os.environ.pop("PWD", None)  # bwrap's own; the step gets the environment it was given
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"sandbox: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
