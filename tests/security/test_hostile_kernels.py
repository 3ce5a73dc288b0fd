"""Hostile kernels against the sandbox (toolchain.sandbox): code a kernel needs runs
at export, so each attack is a module constant the kernel reads. The attack
reports what it managed by raising, and the export's error carries the report.
Each test would fail with the sandbox off: the files are there, the fork and the
allocation would succeed, the listener answers."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from scale_case import SCALE_SPEC

from schemas.reference_export import ExportError
from toolchain.env import REPO_ROOT
from toolchain.reference_export import ReferenceExportError, SandboxLimits, export_from_spec
from toolchain.sandbox import MODE_ENV, python_paths

QUICK = SandboxLimits(timeout_s=120)
SECRET = "tok-3f6c1d0e9b2a"

KERNEL = """\
import cuda.tile as ct
import json, os

def _attack():
    report = {{}}
{body}
    raise RuntimeError("REPORT" + json.dumps(report))

SCALE = _attack()


@ct.kernel
def scale_kernel(x, y, TILE: ct.Constant[int]):
    block = ct.bid(0)
    tile = ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(block,), tile=tile * SCALE)
"""

SPEC = SCALE_SPEC

# Helpers the attacks share: each records what it got, or the error it met.
TRY = """\
    def attempt(name, action):
        try:
            report[name] = ["ok", action()]
        except BaseException as error:
            report[name] = ["refused", type(error).__name__]
"""


def export_failure(case: Path, body: str, limits: SandboxLimits = QUICK) -> ExportError:
    case.mkdir(exist_ok=True)
    indented = textwrap.indent(textwrap.dedent(TRY) + textwrap.dedent(body), "    ")
    (case / "kernel.py").write_text(KERNEL.format(body=indented))
    spec = case / "scale.port.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, case / "out", limits=limits)
    return caught.value.error


def attack(case: Path, body: str, limits: SandboxLimits = QUICK) -> dict[str, Any]:
    error = export_failure(case, body, limits)
    assert "REPORT" in error.message, error.one_line()
    report: dict[str, Any] = json.loads(error.message.split("REPORT", 1)[1])
    return report


@pytest.fixture
def service(tmp_path: Path) -> dict[str, Path]:
    """A service's data directory as `tileport serve` lays it out, with another run."""
    data = tmp_path / "data"
    runs = data / "artifacts" / "runs"
    (runs / "other" / "input").mkdir(parents=True)
    token = data / "api-token"
    token.write_text(SECRET + "\n")
    token.chmod(0o600)
    database = data / "tileport.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE secrets (value TEXT)")
        db.execute("INSERT INTO secrets VALUES (?)", (SECRET,))
    (runs / "other" / "input" / "kernel.py").write_text(f"# {SECRET}\n")
    objects = data / "artifacts" / "objects" / "ab"
    objects.mkdir(parents=True)
    blob = objects / ("ab" + "0" * 62)
    blob.write_text("pub fn kernel() {}\n")
    return {
        "token": token,
        "database": database,
        "other_run": runs / "other" / "input" / "kernel.py",
        "blob": blob,
    }


def test_the_sandbox_is_on_by_default() -> None:
    assert os.environ.get(MODE_ENV, "bwrap") == "bwrap"


def test_no_secret_of_the_service_is_readable(
    tmp_path: Path, service: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_TOKENS", f"ci:{SECRET}")
    home = Path.home()
    body = f"""\
    for name, path in {json.dumps({k: str(v) for k, v in service.items()})}.items():
        attempt(name, lambda: open(path, "rb").read().decode(errors="replace"))
    attempt("data_dir", lambda: os.listdir({str(service["token"].parent)!r}))
    attempt("passwd", lambda: open("/etc/passwd").read())
    attempt("home", lambda: sorted(os.listdir({str(home)!r})))
    def environments():
        found = []
        for pid in os.listdir("/proc"):
            try:
                found.append(open(f"/proc/{{pid}}/environ", "rb").read().decode())
            except (OSError, ValueError):
                pass
        return [env for env in found if {SECRET!r} in env]
    attempt("environ", environments)
    attempt("own_env", lambda: [k for k, v in os.environ.items() if {SECRET!r} in v])
    status = open("/proc/self/status").read()
    report["uid"] = os.getuid()
    report["caps"] = [ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff")]
    """
    report = attack(tmp_path / "case", body)
    assert SECRET not in json.dumps(report)
    for name in ("token", "database", "other_run", "blob", "data_dir"):
        assert report[name][0] == "refused", name
    assert report["passwd"] == ["refused", "FileNotFoundError"]
    # Only what leads to the toolchain's read-only paths is there in the home directory.
    bound = [*python_paths(), REPO_ROOT]
    reachable = {p.relative_to(home).parts[0] for p in bound if p.is_relative_to(home)}
    assert report["home"][0] == "refused" or set(report["home"][1]) <= reachable
    assert report["environ"] == ["ok", []] and report["own_env"] == ["ok", []]
    assert report["uid"] != 0
    assert report["caps"] == ["0000000000000000"]


def test_nothing_outside_the_scratch_directory_is_writable(
    tmp_path: Path, service: dict[str, Path]
) -> None:
    case = tmp_path / "case"
    outside = tmp_path / "outside.txt"
    host_tmp = Path("/tmp") / f"tileport-stolen-{os.getpid()}.txt"
    body = f"""\
    def write(path):
        with open(path, "w") as out:
            out.write({SECRET!r})
        return path
    attempt("outside", lambda: write({str(outside)!r}))
    attempt("blob", lambda: write({str(service["blob"])!r}))
    attempt("new_blob", lambda: write({str(service["blob"].parent / "cd")!r}))
    attempt("source", lambda: write({str(case / "kernel.py")!r}))
    attempt("repository", lambda: write({str(REPO_ROOT / "toolchain" / "stolen.py")!r}))
    attempt("host_tmp", lambda: write({str(host_tmp)!r}))
    attempt("scratch", lambda: write("mine.txt"))
    """
    report = attack(case, body)
    for name in ("outside", "blob", "new_blob", "source", "repository"):
        assert report[name][0] == "refused", name
    assert report["scratch"][0] == "ok"  # its own directory stays writable
    assert not outside.exists() and not host_tmp.exists()
    assert not (REPO_ROOT / "toolchain" / "stolen.py").exists()
    assert service["blob"].read_text() == "pub fn kernel() {}\n"
    assert (case / "kernel.py").read_text().startswith("import cuda.tile as ct\n")
    assert sorted(p.name for p in service["blob"].parent.iterdir()) == [service["blob"].name]


def test_a_fork_bomb_hits_the_process_limit(tmp_path: Path) -> None:
    body = """\
    import signal, time
    children = []
    try:
        for _ in range(400):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
        report["stopped_by"] = None
    except OSError as error:
        report["stopped_by"] = type(error).__name__
    report["forked"] = len(children)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    """
    report = attack(tmp_path / "case", body, SandboxLimits(timeout_s=120, processes=64))
    assert report["stopped_by"] == "BlockingIOError"
    assert report["forked"] < 64


def test_a_huge_allocation_fails(tmp_path: Path) -> None:
    body = """\
    attempt("allocate", lambda: len(bytearray(6 << 30)))
    """
    limits = SandboxLimits(timeout_s=120, address_space_bytes=3 << 30)
    assert attack(tmp_path / "case", body, limits)["allocate"] == ["refused", "MemoryError"]


def test_no_network_connection(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        body = f"""\
        import socket
        attempt("loopback", lambda: socket.create_connection(("127.0.0.1", {port}), 5).close())
        attempt("outside", lambda: socket.create_connection(("1.1.1.1", 443), 5).close())
        """
        report = attack(tmp_path / "case", body)
    assert report["loopback"][0] == "refused" and report["outside"][0] == "refused"


def test_a_link_left_in_scratch_reads_nothing_of_the_service(
    tmp_path: Path, service: dict[str, Path]
) -> None:
    """The service reads back the child's files by name: a symlink in their place
    (to the token, which the service itself can read) is refused, not followed."""
    body = f"""\
    for name in ("stderr.log", "response.json"):
        if os.path.exists(name):
            os.remove(name)
        os.symlink({str(service["token"])!r}, name)
    os._exit(1)
    """
    error = export_failure(tmp_path / "case", body)
    assert error.kind == "crash"
    assert SECRET not in error.one_line()
