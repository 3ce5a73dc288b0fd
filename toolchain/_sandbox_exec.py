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


# The system calls refused (EPERM): namespaces (a user namespace gives uid 0 with
# every capability inside it), kernel keyrings, eBPF, io_uring, userfaultfd.
DENIED = (
    "unshare",
    "setns",
    "add_key",
    "request_key",
    "keyctl",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
# clone's flags are checked; clone3's sit behind a pointer, so it answers ENOSYS and
# the C library falls back to clone.
SYSCALLS = {
    "x86_64": {
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
        "clone": 56,
        "clone3": 435,
    },
    "aarch64": {  # the generic table
        "unshare": 97,
        "setns": 268,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "bpf": 280,
        "userfaultfd": 282,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "clone": 220,
        "clone3": 435,
    },
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000  # x86-64's x32 calls: none allowed
CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38
# Classic BPF, as seccomp runs it over `struct seccomp_data` (nr at 0, arch at 4,
# the first argument's low word at 16 on a little-endian machine).
LOAD_WORD, JUMP_EQUAL, JUMP_AT_LEAST, JUMP_ANY_BIT, RETURN = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, SECCOMP_MODE_FILTER = 22, 38, 2


def namespace_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jump if true, jump if false, operand) for
    `machine` (`platform.machine()`)."""
    numbers = SYSCALLS[machine]
    deny = (RETURN, 0, 0, ERRNO | EPERM)
    program = [
        (LOAD_WORD, 0, 0, 4),
        (JUMP_EQUAL, 1, 0, AUDIT_ARCH[machine]),
        deny,  # another ABI's entry into the kernel (32-bit): nothing allowed
        (LOAD_WORD, 0, 0, 0),
    ]
    if machine == "x86_64":
        program += [(JUMP_AT_LEAST, 0, 1, X32_BIT), deny]
    for name in DENIED:
        program += [(JUMP_EQUAL, 0, 1, numbers[name]), deny]
    program += [(JUMP_EQUAL, 0, 1, numbers["clone3"]), (RETURN, 0, 0, ERRNO | ENOSYS)]
    program += [
        (JUMP_EQUAL, 0, 3, numbers["clone"]),
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

    machine = platform.machine()
    if machine not in SYSCALLS:
        raise SystemExit(f"sandbox: no seccomp filter is written for {machine}")

    class Instruction(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]

    instructions = namespace_filter(machine)
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
