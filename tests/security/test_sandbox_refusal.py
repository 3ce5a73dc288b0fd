"""Where no sandbox can be made (bwrap missing, namespaces refused), an untrusted
step is refused with a message that says how to fix it; it never runs without.
Only TILEPORT_SANDBOX=weak runs it with the weaker sandbox."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from scale_case import SCALE_SPEC

from app.errors import ApiError
from app.intake import check_kernel_source
from toolchain.env import REPO_ROOT
from toolchain.reference_export import ReferenceExportError, export_from_spec
from toolchain.sandbox import MODE_ENV, Limits, Sandbox, SandboxUnavailable

SPEC = SCALE_SPEC

KERNEL = """\
import cuda.tile as ct
from pathlib import Path

SCALE = len(Path({marker!r}).write_text("ran")) * 1.0


@ct.kernel
def scale_kernel(x, y, TILE: ct.Constant[int]):
    block = ct.bid(0)
    tile = ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(block,), tile=tile * SCALE)
"""


def export_marking(tmp_path: Path) -> tuple[Path, Path]:
    """A spec whose kernel, if it ran unsandboxed, would leave `marker`."""
    marker = tmp_path / "the-kernel-ran"
    (tmp_path / "kernel.py").write_text(KERNEL.format(marker=str(marker)))
    spec = tmp_path / "scale.port.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    return spec, marker


def fake_bwrap(folder: Path, message: str) -> Path:
    """A `bwrap` that fails the way bwrap does where namespaces are refused."""
    folder.mkdir()
    tool = folder / "bwrap"
    tool.write_text(f"#!/bin/sh\necho {message!r} >&2\nexit 1\n")
    tool.chmod(0o755)
    return folder


def without_bwrap(folder: Path) -> str:
    """A PATH with the system's tools but no bwrap."""
    folder.mkdir()
    for tool in ("unshare", "true", "env"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    return str(folder)


@pytest.fixture(autouse=True)
def _fresh_probe() -> None:
    from toolchain import sandbox

    sandbox._probe.cache_clear()


def test_export_without_bwrap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, marker = export_marking(tmp_path)
    monkeypatch.setenv("PATH", without_bwrap(tmp_path / "bin"))
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, tmp_path / "out")
    error = caught.value.error
    assert error.kind == "sandbox_unavailable"
    assert "bwrap is not installed" in error.message
    assert "apt-get install -y bubblewrap" in error.message
    assert f"{MODE_ENV}=weak" in error.message
    assert not marker.exists()


def test_export_where_namespaces_are_refused_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, marker = export_marking(tmp_path)
    said = "bwrap: No permissions to create new namespace"
    monkeypatch.setenv("PATH", f"{fake_bwrap(tmp_path / 'bin', said)}:/usr/bin:/bin")
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, tmp_path / "out")
    error = caught.value.error
    assert error.kind == "sandbox_unavailable" and said in error.message
    assert "unprivileged user namespaces" in error.message
    assert not marker.exists()


def test_a_machine_that_refuses_user_namespaces(tmp_path: Path) -> None:
    """Inside a bwrap that forbids further user namespaces, as an unprivileged user,
    the sandbox cannot be made: `launch` says so."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bwrap is not installed")
    probe = textwrap.dedent(
        """
        import json, tempfile
        from pathlib import Path
        from toolchain.sandbox import Sandbox, SandboxUnavailable
        try:
            Sandbox(scratch=Path(tempfile.mkdtemp())).launch(["true"])
            print(json.dumps("made"))
        except SandboxUnavailable as error:
            print(json.dumps(str(error)))
        """
    )
    outer = [bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--disable-userns"]
    outer += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    outer += ["--bind", str(tmp_path), str(tmp_path), "--setenv", "TMPDIR", str(tmp_path)]
    command = [*outer, "--chdir", str(REPO_ROOT), "--", sys.executable, "-c", probe]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "disable-userns" in done.stderr + done.stdout:
        pytest.skip(f"this bwrap cannot forbid user namespaces: {done.stderr.strip()}")
    if done.returncode != 0:
        pytest.skip(f"no user namespace for the test itself here: {done.stderr.strip()}")
    said = json.loads(done.stdout)
    assert said.startswith("the sandbox is unavailable: bwrap cannot create its namespaces")
    assert "TILEPORT_SANDBOX=weak" in said


def test_the_kernel_check_is_refused_without_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", without_bwrap(tmp_path / "bin"))
    with pytest.raises(ApiError) as caught:
        check_kernel_source(b"import cuda.tile as ct\n@ct.kernel\ndef k(x):\n    pass\n")
    assert caught.value.status == 503
    assert caught.value.code == "sandbox_unavailable"


def test_an_unknown_mode_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_ENV, "off")
    with pytest.raises(SandboxUnavailable, match="give bwrap"):
        Sandbox(scratch=tmp_path).launch(["true"])


def test_weak_mode_runs_with_limits_but_no_namespaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV, "weak")
    monkeypatch.setenv("PATH", without_bwrap(tmp_path / "bin"))
    probe = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    box = Sandbox(scratch=tmp_path, limits=Limits(address_space_bytes=2 << 30))
    launch = box.launch([sys.executable, "-I", "-c", probe])
    assert "bwrap" not in " ".join(launch.argv)
    done = subprocess.run(launch.argv, env=launch.env, capture_output=True, text=True)
    assert done.stdout.strip() == str(2 << 30)
