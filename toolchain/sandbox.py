"""The sandbox of every untrusted step (a kernel's export, the static kernel check,
a build of generated Rust, a GPU job): bubblewrap (`bwrap`), with the toolchain
read-only and one scratch directory writable.

What a step sees (the `bwrap` arguments `Sandbox.launch` builds):

- an empty root; `/usr` read-only and `/bin`, `/sbin`, `/lib*` as on the host
  (symlinks into `/usr`, or read-only binds); of `/etc` only the dynamic linker's
  cache and configuration and `alternatives` (no `passwd`, no host files);
- a `/proc` of its own pid namespace, a minimal `/dev`, empty `/tmp` and `/dev/shm`;
- the Python installation and virtual environment read-only, and what the step
  names read-only (the repository packages it imports, the kernel's sources);
- its scratch directory read-write, as its working directory, and what it names
  writable (a build cache);
- its environment only (`--clearenv`), no network (an empty network namespace), its
  own pid, IPC and UTS namespaces, a new session, killed with its parent.

Inside, `toolchain._sandbox_exec` sets the resource limits (address space,
process count, file size, CPU time, no core dumps) and, where the service runs as
root, becomes an unprivileged user (`sandbox_user`) before it executes the step:
bwrap then runs without a user namespace, and the step never runs as root.
Elsewhere bwrap makes a user namespace and the step keeps the service's own
unprivileged user, without capabilities.

Where bwrap is missing or cannot make its namespaces, `Sandbox.launch` raises
SandboxUnavailable, saying how to fix it: a step never runs unsandboxed.
`TILEPORT_SANDBOX=weak`, for a development machine only, runs steps with the
limits (all but the process count, which would count all the user's processes),
a private directory, a clean environment and, where `unshare -n` works, no
network, but the filesystem open.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, NamedTuple

MODE_ENV = "TILEPORT_SANDBOX"
USER_ENV = "TILEPORT_SANDBOX_USER"
BWRAP = "bwrap"
WEAK = "weak"
DEFAULT_USER = "65534:65534"
PRIVATE_UIDS = range(2_000_000_000, 2_001_000_000)  # no account has these
LAUNCHER = Path(__file__).with_name("_sandbox_exec.py")
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
# Mounted before the step's own paths: no directory is made in them, or for them.
SYSTEM_MOUNTS = (Path("/usr"), Path("/etc"), Path("/proc"), Path("/dev"), Path("/tmp"))
FIXED = (Path("/usr"), Path("/proc"))  # read-only: nothing can be created inside
BIND_KINDS = ("--ro-bind", "--bind", "--dev-bind")  # weakest first
PATH = "/usr/local/bin:/usr/bin:/bin"
PROBE_TIMEOUT_S = 30.0
HOW_TO_FIX = (
    "install bubblewrap (Debian: apt-get install -y bubblewrap) and let it create "
    "namespaces: run the service as root, or allow unprivileged user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1; Ubuntu: "
    "kernel.apparmor_restrict_unprivileged_userns=0; in a container, a seccomp profile "
    f"that allows them). On a development machine only, {MODE_ENV}={WEAK} runs untrusted "
    "steps with resource limits but the filesystem open"
)


class SandboxUnavailable(Exception):
    """No sandbox can be made here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed step may use; None: the limit is not set."""

    address_space_bytes: int | None = 4 << 30
    processes: int = 256
    cpu_s: int | None = None
    file_size_bytes: int | None = 2 << 30


CARGO_LIMITS = Limits(address_space_bytes=None, processes=512)  # rustc reserves much
GPU_LIMITS = Limits(address_space_bytes=None, processes=512)  # so does the CUDA driver
GPU_DEVICES = "/dev/nvidia*"


class Launch(NamedTuple):
    """The command line and environment to start a sandboxed step with."""

    argv: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class Sandbox:
    """One untrusted step's view of the machine: `scratch` (its working directory)
    is the only writable path unless `writable` names more; `devices` are bound
    as they are (a GPU's device files)."""

    scratch: Path
    env: Mapping[str, str] = field(default_factory=dict)
    read_only: Sequence[Path] = ()
    writable: Sequence[Path] = ()
    devices: Sequence[Path] = ()
    limits: Limits = Limits()

    def launch(self, argv: list[str]) -> Launch:
        """`argv` wrapped to run in this sandbox. Where the service runs as root, hands
        the scratch directory over to the sandbox user. Raises SandboxUnavailable."""
        current = mode()
        env = {"PATH": PATH, **self.env}
        if current == WEAK:
            prefix = ["unshare", "-n", "--"] if network_isolation_works() else []
            launcher = _launcher(self, processes=False, user=None)
            return Launch([*prefix, *launcher, *argv], env)
        bwrap = usable_bwrap()
        as_root = os.geteuid() == 0
        user = sandbox_user(shared=bool(self.writable)) if as_root else None
        if user is not None:
            _check_readable(self.read_only, user)
            for path in [self.scratch, *self.writable]:
                _hand_over(path, user)
        args = [
            bwrap,
            *_namespaces(as_root),
            *_system_mounts(),
            *_step_mounts(self),
            "--clearenv",
        ]
        for name, value in env.items():
            args += ["--setenv", name, value]
        launcher = _launcher(self, processes=True, user=user)
        return Launch([*args, "--", *launcher, *argv], {"PATH": PATH})


def usable_bwrap() -> str:
    """The path of a bwrap that can create the sandbox's namespaces here. Raises
    SandboxUnavailable saying why not and how to fix it."""
    bwrap = shutil.which(BWRAP)
    if bwrap is None:
        raise SandboxUnavailable(
            f"the sandbox is unavailable: bwrap is not installed; {HOW_TO_FIX}"
        )
    refused = _probe(bwrap, os.geteuid() == 0)
    if refused is not None:
        raise SandboxUnavailable(
            f"the sandbox is unavailable: bwrap cannot create its namespaces here "
            f"({refused}); {HOW_TO_FIX}"
        )
    return bwrap


def unavailable_reason() -> str | None:
    """None when untrusted steps can run here (in the configured mode), else why
    not and how to fix it: what `tileport doctor` and /readyz report."""
    try:
        if mode() == WEAK:
            return None
        usable_bwrap()
    except SandboxUnavailable as error:
        return str(error)
    return None


def mode() -> str:
    """`bwrap` (the default) or `weak`, from TILEPORT_SANDBOX."""
    value = os.environ.get(MODE_ENV, "").strip() or BWRAP
    if value not in (BWRAP, WEAK):
        raise SandboxUnavailable(f"{MODE_ENV}={value!r}: give {BWRAP} (the default) or {WEAK}")
    return value


def sandbox_user(shared: bool) -> str:
    """`UID:GID` a step runs as where the service runs as root (never root's): the
    sandbox user (TILEPORT_SANDBOX_USER) for a step that writes a shared folder (a
    build cache it must own), else a user of its own drawn from PRIVATE_UIDS, so that
    the process-count limit, which counts a user's processes, is the step's alone."""
    value = os.environ.get(USER_ENV, "").strip() or DEFAULT_USER
    parts = value.split(":")
    if len(parts) != 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise SandboxUnavailable(f"{USER_ENV}={value!r}: give UID:GID of an unprivileged user")
    uid, gid = (int(part) for part in parts)
    if not shared:
        uid = PRIVATE_UIDS.start + secrets.randbelow(len(PRIVATE_UIDS))
    return f"{uid}:{gid}"


def python_paths() -> list[Path]:
    """The Python installation and virtual environment a step's interpreter needs."""
    found = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        found.add(Path(sysconfig.get_paths()[key]))
    return sorted(found)


def cargo_sandbox(crate: Path, target_dir: Path, env: Mapping[str, str]) -> Sandbox:
    """A sandbox for `cargo build --offline` of `crate` (its scratch directory) into
    `target_dir` (writable): the crate registry and the installed toolchains
    read-only, without cargo's credentials."""
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    rustup_home = Path(os.environ.get("RUSTUP_HOME", Path.home() / ".rustup"))
    paths = [cargo_home / name for name in ("bin", "registry", "git", "config.toml", "config")]
    paths += [rustup_home / name for name in ("toolchains", "update-hashes", "settings.toml")]
    # The cargo this machine runs may live outside CARGO_HOME (rustup installed it
    # under ~/.cargo/bin, and CARGO_HOME was moved since): its folder comes along.
    found = shutil.which("cargo")
    tools = [Path(found).parent] if found else []
    search = ":".join(str(folder) for folder in dict.fromkeys([cargo_home / "bin", *tools]))
    return Sandbox(
        scratch=crate,
        env={
            **env,
            "HOME": str(crate),
            "CARGO_HOME": str(cargo_home),
            "RUSTUP_HOME": str(rustup_home),
            "CARGO_TARGET_DIR": str(target_dir),
            "PATH": f"{search}:{env.get('PATH', PATH)}",
        },
        read_only=[path for path in dict.fromkeys([*paths, *tools]) if path.exists()],
        writable=[target_dir],
        limits=CARGO_LIMITS,
    )


def gpu_sandbox(scratch: Path, read_only: Sequence[Path], env: Mapping[str, str]) -> Sandbox:
    """A sandbox for a GPU job: the GPU's device files and `/sys` (the driver reads
    the device's topology there) besides `read_only`; `scratch` writable."""
    devices = sorted(Path(path) for path in glob.glob(GPU_DEVICES))
    return Sandbox(
        scratch=scratch,
        env={**env, "HOME": str(scratch)},
        read_only=[Path("/sys"), *read_only],
        devices=devices,
        limits=GPU_LIMITS,
    )


@lru_cache(maxsize=1)
def network_isolation_works() -> bool:
    """Whether `unshare -n` can give a process an empty network namespace here."""
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def open_output(scratch: Path, name: str) -> BinaryIO:
    """A file a step left in its scratch directory, opened for reading: a plain name
    and a regular file, never a link (which could point at the service's files)."""
    if not name or name in {".", ".."} or "/" in name or "\x00" in name:
        raise ValueError(f"not a plain file name: {name!r}")
    handle = os.open(scratch / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise ValueError(f"{name} is not a regular file")
    return os.fdopen(handle, "rb")


def _launcher(box: Sandbox, *, processes: bool, user: str | None) -> list[str]:
    limits = box.limits
    argv = [sys.executable, "-I", "-S", str(LAUNCHER), "--chdir", str(box.scratch)]
    if limits.address_space_bytes is not None:
        argv += ["--as", str(limits.address_space_bytes)]
    if limits.cpu_s is not None:
        argv += ["--cpu", str(limits.cpu_s)]
    if limits.file_size_bytes is not None:
        argv += ["--fsize", str(limits.file_size_bytes)]
    if processes:
        argv += ["--nproc", str(limits.processes)]
    if user is not None:
        argv += ["--user", user]
    return [*argv, "--"]


def _namespaces(as_root: bool) -> list[str]:
    common = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net"]
    common += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if as_root:
        # No user namespace: the launcher keeps only what it needs to drop root.
        caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        return [*common, *caps]
    return [*common, "--unshare-user"]


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in TOP_LEVEL:
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    args += ["--perms", "0755", "--dir", "/etc"]
    for etc in ETC_PATHS:
        if Path(etc).exists():
            args += ["--ro-bind", etc, etc]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm"]
    return [*args, "--perms", "1777", "--tmpfs", "/tmp"]


def _under(path: Path, bases: Iterable[Path]) -> bool:
    return any(path == base or path.is_relative_to(base) for base in bases)


def _step_mounts(box: Sandbox) -> list[str]:
    """Binds of the step's paths, each on its own path, parents before children; the
    directories made above them are world-searchable, whatever they are on the host."""
    wanted = [
        *((p, "--ro-bind") for p in [*python_paths(), LAUNCHER, *box.read_only]),
        *((p, "--bind") for p in [box.scratch, *box.writable]),
        *((p, "--dev-bind") for p in box.devices),
    ]
    binds: dict[Path, str] = {}
    for given, kind in wanted:
        path = Path(os.path.abspath(given))
        if not os.path.lexists(path) or (kind == "--ro-bind" and _under(path, FIXED)):
            continue
        binds[path] = max(kind, binds.get(path, kind), key=BIND_KINDS.index)
    # A read-only path inside another read-only one is there already.
    read_only = [path for path, kind in binds.items() if kind == "--ro-bind"]
    for path in read_only:
        if _under(path, [other for other in read_only if other != path]):
            del binds[path]
    parents = {
        parent
        for path in binds
        for parent in path.parents
        if parent != Path("/")
        and parent not in SYSTEM_MOUNTS
        and not _under(parent, [*FIXED, *binds])
    }
    args: list[str] = []
    for parent in sorted(parents, key=lambda p: p.parts):
        args += ["--perms", "0755", "--dir", str(parent)]
    for path in sorted(binds, key=lambda p: p.parts):
        args += [binds[path], str(path), str(path)]
    return args


def _check_readable(paths: Iterable[Path], user: str) -> None:
    """Each read-only path must be readable (a directory: listable) by the sandbox user."""
    uid, gid = (int(part) for part in user.split(":"))
    for path in paths:
        if not path.exists():
            continue
        info = path.stat()
        shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
        needed = 0o5 if stat.S_ISDIR(info.st_mode) else 0o4
        if (info.st_mode >> shift) & needed != needed:
            raise SandboxUnavailable(
                f"the sandbox user {user} cannot read {path} (mode "
                f"{stat.filemode(info.st_mode)}): make it readable to others (chmod o+rX)"
            )


def _hand_over(directory: Path, user: str) -> None:
    """Make a writable directory and everything in it the sandbox user's (a build
    cache may have gained files from a build outside the sandbox)."""
    uid, gid = (int(part) for part in user.split(":"))
    directory.mkdir(parents=True, exist_ok=True)
    for root, dirs, files in os.walk(directory):
        for path in [root, *(os.path.join(root, name) for name in [*dirs, *files])]:
            if os.lstat(path).st_uid != uid:
                os.lchown(path, uid, gid)


@lru_cache(maxsize=4)
def _probe(bwrap: str, as_root: bool) -> str | None:
    """None when bwrap can create the sandbox's namespaces here, else what it said."""
    argv = [bwrap, *_namespaces(as_root), *_system_mounts(), "--", "true"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env={"PATH": PATH}
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"
