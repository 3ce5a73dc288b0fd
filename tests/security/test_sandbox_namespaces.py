"""Inside the sandbox a step cannot make a user namespace (uid 0 with every
capability in it, the first step of most kernel escapes), nor reach keyrings,
eBPF, io_uring or userfaultfd: the launcher's seccomp filter refuses them, while
threads and child processes, which every build and export needs, still work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolchain._sandbox_exec import DENIED, SYSCALLS, namespace_filter
from toolchain.sandbox import Sandbox, unavailable_reason

needs_sandbox = pytest.mark.skipif(
    unavailable_reason() is not None, reason=str(unavailable_reason())
)


def _run(box: Sandbox, argv: list[str]) -> subprocess.CompletedProcess[str]:
    launch = box.launch(argv)
    return subprocess.run(
        launch.argv, env=launch.env, capture_output=True, text=True, timeout=120, check=False
    )


@needs_sandbox
def test_no_user_namespace_inside_the_sandbox(tmp_path: Path) -> None:
    box = Sandbox(scratch=tmp_path)
    done = _run(box, ["unshare", "-Ur", "id", "-u"])
    assert done.returncode != 0 and "Operation not permitted" in done.stderr, done
    probe = (
        "import ctypes, os, subprocess, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "refused = libc.syscall(321, 0, 0, 0) == -1 and ctypes.get_errno() == 1\n"  # bpf
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "child = subprocess.run(['true']).returncode\n"
        "print(refused, child)\n"
    )
    done = _run(box, [sys.executable, "-I", "-c", probe])
    assert done.returncode == 0 and done.stdout.split() == ["True", "0"], done


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_the_filter_refuses_each_listed_call_and_clone_into_a_user_namespace(
    machine: str,
) -> None:
    program = namespace_filter(machine)
    compared = {k for code, _, _, k in program if code == 0x15}
    numbers = SYSCALLS[machine]
    assert {numbers[name] for name in [*DENIED, "clone", "clone3"]} <= compared
    assert len(set(numbers.values())) == len(numbers)  # no number written twice
    assert program[-1] == (0x06, 0, 0, 0x7FFF0000)  # anything else is allowed
    assert len(program) < 256  # well inside what one filter may hold
