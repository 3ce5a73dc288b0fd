"""`tileport doctor`: every requirement of the pipeline, with version and path.

This is the preflight stage's engine: a requirement that is missing comes back
with one line saying how to fix it."""

from __future__ import annotations

import ctypes
import importlib.metadata
import re
import shutil
import subprocess
from collections.abc import Callable

from schemas.doctor import Check, DoctorReport
from toolchain import sandbox
from toolchain.env import KERNELS_RS, find_toolchain, rs_export_binary, toolchain_env
from toolchain.tools import version_line

PYTHON_PACKAGES = (
    "langgraph",
    "langchain-openai",
    "pydantic",
    "fastapi",
    "uvicorn",
    "cffi",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "cuda-tile",
)
MIN_TILEIRAS = (13, 3)
MIN_RUSTC = (1, 89)
SETUP_FIX = "run `make setup`"


def _version_tuple(text: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else ()


def check_python_packages() -> list[Check]:
    checks = []
    for name in PYTHON_PACKAGES:
        try:
            version = importlib.metadata.version(name)
            checks.append(Check(name=f"python:{name}", ok=True, version=version))
        except importlib.metadata.PackageNotFoundError:
            checks.append(Check(name=f"python:{name}", ok=False, fix=SETUP_FIX))
    return checks


def _tool_check(tool: str, minimum: tuple[int, int] | None = None) -> Check:
    path = find_toolchain().tool(tool)
    if not path.exists():
        return Check(name=tool, ok=False, fix=f"{SETUP_FIX} (installs the 13.4.92 toolkit wheels)")
    version = version_line(tool)
    if not version:
        return Check(name=tool, ok=False, path=str(path), fix=f"{tool} does not run; {SETUP_FIX}")
    ok = minimum is None or _version_tuple(version) >= minimum
    fix = None if ok else f"{tool} {version} is older than {minimum}; {SETUP_FIX}"
    return Check(name=tool, ok=ok, version=version, path=str(path), fix=fix)


def check_cuda_tools() -> list[Check]:
    checks = [
        _tool_check("tileiras", MIN_TILEIRAS),
        _tool_check("tileirdisasm"),
        _tool_check("ptxas", MIN_TILEIRAS),
        _tool_check("cuobjdump"),
        _tool_check("nvdisasm"),
    ]
    lib_dir = find_toolchain().cuda_root / "lib"
    found = sorted(lib_dir.glob("libnvvm.so*")) if lib_dir.exists() else []
    checks.append(
        Check(
            name="libnvvm",
            ok=bool(found),
            path=str(found[0]) if found else None,
            version=importlib.metadata.version("nvidia-nvvm") if found else None,
            fix=None if found else SETUP_FIX,
        )
    )
    return checks


def _command_version(args: list[str]) -> str | None:
    if shutil.which(args[0]) is None:
        return None
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def check_rust() -> list[Check]:
    checks = []
    for tool, minimum in (("cargo", MIN_RUSTC), ("rustc", MIN_RUSTC)):
        version = _command_version([tool, "--version"])
        ok = version is not None and _version_tuple(version) >= minimum
        fix = None if ok else f"install Rust ≥ {minimum[0]}.{minimum[1]} with rustup"
        checks.append(Check(name=tool, ok=ok, version=version, path=shutil.which(tool), fix=fix))
    checks.append(_cutile_version())
    exporter = rs_export_binary()
    checks.append(
        Check(
            name="tileport-rs-export",
            ok=exporter.exists(),
            path=str(exporter),
            fix=None if exporter.exists() else SETUP_FIX,
        )
    )
    return checks


def _cutile_version() -> Check:
    """The cutile version cargo resolved, read from the workspace lock file."""
    lock = KERNELS_RS / "Cargo.lock"
    if not lock.exists():
        return Check(name="cutile", ok=False, fix=SETUP_FIX)
    match = re.search(r'name = "cutile"\nversion = "([^"]+)"', lock.read_text())
    if not match:
        return Check(name="cutile", ok=False, fix="kernels_rs/Cargo.lock names no cutile")
    return Check(name="cutile", ok=True, version=match.group(1), path=str(lock))


def check_headers() -> list[Check]:
    include = find_toolchain().cuda_root / "include"
    checks = []
    for header, macro in (("cuda.h", "CUDA_VERSION"), ("curand.h", "CURAND_VER_MAJOR")):
        path = include / header
        if not path.exists():
            checks.append(Check(name=header, ok=False, fix=SETUP_FIX))
            continue
        match = re.search(rf"#define\s+{macro}\s+(\d+)", path.read_text(errors="replace"))
        version = match.group(1) if match else None
        checks.append(Check(name=header, ok=True, version=version, path=str(path)))
    return checks


def check_libclang() -> Check:
    libclang = find_toolchain().libclang_dir / "libclang.so"
    if not libclang.exists():
        return Check(name="libclang", ok=False, fix=SETUP_FIX)
    return Check(
        name="libclang", ok=True, version=importlib.metadata.version("libclang"), path=str(libclang)
    )


def check_triton_tileir() -> Check:
    """Triton with the Tile IR backend is optional: it is a second reference."""
    try:
        import triton  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return Check(
            name="triton-tileir",
            ok=True,
            optional=True,
            version=None,
            note="not installed: Triton-TileIR references cannot be exported or timed here",
        )
    version = importlib.metadata.version("triton")
    has_backend = _triton_has_tile_backend()
    note = "Tile IR backend present" if has_backend else "plain Triton, no Tile IR backend"
    return Check(name="triton-tileir", ok=True, optional=True, version=version, note=note)


def _triton_has_tile_backend() -> bool:
    try:
        from triton.backends import backends  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    return any("tile" in str(name).lower() for name in backends)


def check_gpu() -> Check:
    """The GPU is optional on a build machine; the report says plainly if none."""
    smi = shutil.which("nvidia-smi")
    if smi:
        query = "--query-gpu=name,compute_cap,driver_version"
        done = subprocess.run(
            [smi, query, "--format=csv,noheader"], capture_output=True, text=True, check=False
        )
        if done.returncode == 0 and done.stdout.strip():
            first = done.stdout.strip().splitlines()[0]
            return Check(name="gpu", ok=True, optional=True, version=first, path=smi)
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return Check(name="gpu", ok=True, optional=True, note="no GPU (no CUDA driver found)")
    return Check(name="gpu", ok=True, optional=True, note="CUDA driver present, no nvidia-smi")


def check_sandbox() -> Check:
    """Untrusted steps (a kernel's export, a build of generated Rust) run only in
    the sandbox; without it every conversion stops at its first such step."""
    reason = sandbox.unavailable_reason()
    if reason is not None:
        return Check(name="sandbox", ok=False, fix=reason)
    if sandbox.mode() == sandbox.WEAK:
        return Check(name="sandbox", ok=True, version=sandbox.WEAK, note="filesystem open")
    return Check(name="sandbox", ok=True, version=sandbox.BWRAP, path=shutil.which(sandbox.BWRAP))


CHECK_GROUPS: tuple[Callable[[], list[Check]], ...] = (
    check_python_packages,
    check_cuda_tools,
    check_rust,
    check_headers,
    lambda: [check_libclang(), check_sandbox(), check_triton_tileir(), check_gpu()],
)


def run_doctor() -> DoctorReport:
    checks = [check for group in CHECK_GROUPS for check in group()]
    env = toolchain_env()
    return DoctorReport(
        checks=checks, cuda_toolkit_path=env["CUDA_TOOLKIT_PATH"], ok=all(c.ok for c in checks)
    )


def render_human(report: DoctorReport) -> str:
    lines = []
    for check in report.checks:
        mark = "ok  " if check.ok else "MISSING"
        detail = " ".join(
            part for part in (check.version, check.path and f"({check.path})") if part
        )
        note = f" - {check.note}" if check.note else ""
        lines.append(f"{mark:8}{check.name:20} {detail}{note}".rstrip())
    failures = [c for c in report.checks if not c.ok]
    if failures:
        lines.append("")
        lines.extend(f"missing: {c.name}: {c.fix}" for c in failures)
    return "\n".join(lines)
