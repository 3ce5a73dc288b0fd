"""The aggregated kernel library: its generated C ABI, its wrapper, its build.

The library is the `ported` crate of a cargo workspace (`LibraryCrate`). The
checkout's own (`kernels_rs/`, `CHECKOUT`) changes only by hand
(`python -m nodes.host_builder`). A conversion never writes there: stage D and
`tileport gpu-bundle` copy the checkout's workspace into one of their own
(`create_workspace`: in the run directory, or a temporary one), add the run's
operator there and build that.

Layout inside a `ported` crate (everything under `src/ffi/` except
`runtime.rs`, `proven.rs` and `spec_arith.rs` is generated; `operators.json` lists the
operators):

    src/ffi/mod.rs          module list, the cdef and its fingerprint
    src/ffi/abi.rs          structs and codes (from abi.py)
    src/ffi/runtime.rs      hand-written checks, device, stream, panic guard
    src/ffi/proven.rs       hand-written launcher of proven entries (TileGym's too)
    src/ffi/spec_arith.rs   hand-written spec arithmetic (Python's) and launch facts
    src/ffi/<op>.rs         one launcher per operator (from its port spec)
    src/ffi/kernels/<op>.rs kernels the pipeline wrote, laid out by rustfmt
    src/ffi/operators.json  the manifest
    python/tileport_kernels.py   the cffi wrapper
    python/libtileport_kernels.so  (a workspace's) the library it built
    tests/pipeline/         the plain-Rust pipeline check, one module per operator

Builds: the checkout's crate builds into the cache's target directory
(`cargo_target_dir()`). A workspace holds a run's generated code: it builds in
a build area of its own (`build_areas_dir()`), in the sandbox
(`toolchain.sandbox.cargo_sandbox`: only the workspace and its area writable),
so no run can change what another run's build links or executes. An area
starts as a copy of the dependencies compiled once by a trusted build of the
checkout's workspace (`dependency_target_dir()`, outside the sandbox, which no
sandboxed step can write; started from the checkout's own release build, so only
what differs compiles; built again when the manifests change or a file a build
script read has, such as the CUDA headers of a new virtual environment), so only
the crate itself compiles per run; the
least recently used areas beyond `BUILD_AREAS_KEPT` are removed. Generation in
the checkout and every build run under one file lock, so concurrent host stages
never interleave writes or builds. The build is lazy: `ensure_built` rebuilds
only when a kernel or manifest source is newer than the library.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from nodes.host_builder import abi
from nodes.host_builder.binding import (
    BindingError,
    OperatorBinding,
    bind_operator,
    plan_for,
)
from nodes.host_builder.ffi_gen import TEMPLATES, generate_operator_rs
from nodes.host_builder.rust_entry import parse_kernel_source
from schemas.gpu import (
    LIBRARY_FILE,
    TENSOR_FACTS_SOURCE,
    LibraryArray,
    LibraryDim,
    LibraryManifest,
    LibraryOperator,
    LibraryScalar,
    LiteralDispatch,
)
from schemas.port_spec import ResolvedConfig, load_port_spec
from toolchain.env import (
    KERNELS_RS,
    REPO_ROOT,
    build_areas_dir,
    cache_dir,
    cargo_target_dir,
    dependency_target_dir,
    start_from_checkout_build,
    toolchain_env,
)
from toolchain.rustfmt import format_rust
from toolchain.sandbox import PATH, SandboxUnavailable, cargo_sandbox, unavailable_reason

CRATE_MEMBER = "ported"
INSTALLED_PREFIX = "ffi/kernels/"
RUST_EDITION = "2021"  # the workspace's (kernels_rs/Cargo.toml)
CRATE_PACKAGE = "tileport-kernels"
BUILD_TIMEOUT_S = 1800
SANDBOX_ENV = {"PATH": PATH, "LANG": "C.UTF-8"}  # a sandboxed build's, before the toolchain's
# In the workspace target directory: the digest of the sources built there last.
LAST_BUILT_SOURCES = "last-built-sources"
# The dependency seed's mark: the digest of the manifests and lock it was built from.
SEED_MARK = "seeded-from"
BUILD_AREAS_KEPT = 4


class LibraryBuildError(RuntimeError):
    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class LibraryCrate:
    """The library crate of one cargo workspace: the checkout's (`kernels_rs/`), or a
    workspace made from it for one run."""

    workspace: Path

    @property
    def root(self) -> Path:
        return self.workspace / CRATE_MEMBER

    @property
    def src_dir(self) -> Path:
        return self.root / "src"

    @property
    def ffi_dir(self) -> Path:
        return self.src_dir / "ffi"

    @property
    def kernels_dir(self) -> Path:
        return self.ffi_dir / "kernels"

    @property
    def manifest_path(self) -> Path:
        return self.ffi_dir / "operators.json"

    @property
    def wrapper_path(self) -> Path:
        return self.root / "python" / "tileport_kernels.py"

    @property
    def tensor_facts_path(self) -> Path:
        """The wrapper's optional reader of tensor facts (hand-written C++ source)."""
        return self.wrapper_path.with_name(TENSOR_FACTS_SOURCE)

    @property
    def pipeline_dir(self) -> Path:
        return self.root / "tests" / "pipeline"

    @property
    def in_checkout(self) -> bool:
        return self.workspace.resolve() == KERNELS_RS.resolve()

    @property
    def target_dir(self) -> Path:
        """The checkout's cargo target; a workspace's own build area."""
        if self.in_checkout:
            return cargo_target_dir()
        key = hashlib.sha256(str(self.workspace.resolve()).encode()).hexdigest()[:16]
        return build_areas_dir() / key

    @property
    def library_path(self) -> Path:
        """The built library: the checkout's where cargo leaves it, a workspace's beside
        its wrapper (cargo's copy in the shared target directory is the next build's)."""
        if self.in_checkout:
            return self.target_dir / "release" / LIBRARY_FILE
        return self.wrapper_path.with_name(LIBRARY_FILE)


CHECKOUT = LibraryCrate(KERNELS_RS)


# --- locking, workspaces and staleness ---------------------------------------------


@contextmanager
def library_lock() -> Iterator[None]:
    """Exclusive across processes: generation in the checkout, and every build."""
    path = cache_dir() / "locks" / "kernels-library.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def create_workspace(root: Path) -> LibraryCrate:
    """A fresh copy of the checkout's cargo workspace at `root` (emptied first): its
    manifest and its lock (so builds stay `--locked`), the library crate with the
    operators it holds, and every other member, never built but named by the lock."""
    with library_lock():
        return _copy_checkout(root)


def _copy_checkout(root: Path) -> LibraryCrate:
    """`create_workspace` under `library_lock`, which the caller holds."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    manifest = tomllib.loads((KERNELS_RS / "Cargo.toml").read_text(encoding="utf-8"))
    for name in ("Cargo.toml", "Cargo.lock"):
        _copy_source(KERNELS_RS / name, root / name)
    for member in manifest["workspace"]["members"]:
        for path in sorted((KERNELS_RS / member).rglob("*")):
            relative = path.relative_to(KERNELS_RS)
            if path.is_file() and not {"__pycache__", "target"} & set(relative.parts):
                _copy_source(path, root / relative)
    return LibraryCrate(root)


def _copy_source(source: Path, target: Path) -> None:
    """The file's bytes and times, not its permissions (a read-only checkout gives a
    workspace its run can write). Kept times let cargo take sources it built before
    as built."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    status = source.stat()
    os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns))


def source_files(crate: LibraryCrate) -> list[Path]:
    """What the library is built from: kernel and launcher sources and the manifests."""
    files = [*sorted(crate.src_dir.rglob("*.rs")), crate.manifest_path]
    files += [crate.root / "Cargo.toml", crate.workspace / "Cargo.toml"]
    files.append(crate.workspace / "Cargo.lock")
    return [path for path in files if path.exists()]


def is_stale(crate: LibraryCrate, library: Path | None = None) -> bool:
    target = library or crate.library_path
    if not target.exists():
        return True
    built = target.stat().st_mtime
    return any(path.stat().st_mtime > built for path in source_files(crate))


def _workspace_inputs(crate: LibraryCrate) -> list[Path]:
    """Every file of a workspace but its python/ folder (the wrapper, the library
    delivered there): whatever cargo may read."""
    python = crate.wrapper_path.parent
    return sorted(
        path
        for path in crate.workspace.rglob("*")
        if path.is_file() and not path.is_relative_to(python)
    )


def _claim_workspace_target(crate: LibraryCrate) -> None:
    """A workspace made again at the same path (`create_workspace` empties it and
    copies the checkout's files with their times) finds its area's compiled crate,
    and cargo judges it by file times alone: files older than the last build there
    would pass for built. Unless the last build there was of these very sources,
    their times become now, so cargo recompiles the crate (its dependencies stay
    built). Call under `library_lock`."""
    inputs = _workspace_inputs(crate)
    digest = hashlib.sha256()
    for path in inputs:
        data = path.read_bytes()
        name = path.relative_to(crate.workspace).as_posix()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    mark = crate.target_dir / LAST_BUILT_SOURCES
    if mark.is_file() and mark.read_text(encoding="utf-8") == digest.hexdigest():
        return
    now = time.time()
    for path in inputs:
        os.utime(path, (now, now))
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(digest.hexdigest(), encoding="utf-8")


def _seed_key() -> str:
    """What the dependencies' build depends on: the checkout's manifests and lock."""
    digest = hashlib.sha256()
    for path in sorted([*KERNELS_RS.glob("*/Cargo.toml"), KERNELS_RS / "Cargo.toml"]):
        digest.update(path.relative_to(KERNELS_RS).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    digest.update((KERNELS_RS / "Cargo.lock").read_bytes())
    return digest.hexdigest()


def seed_inputs_changed(seed: Path) -> bool:
    """Whether a file a dependency's build script named by its absolute path
    (`cargo:rerun-if-changed=`: the CUDA headers bindgen read, in the virtual
    environment) is newer than the seed's mark, or gone: every build area copied
    from the seed would then compile those crates and all above them again."""
    built = (seed / SEED_MARK).stat().st_mtime_ns
    for output in seed.glob("release/build/*/output"):
        for line in output.read_text(encoding="utf-8", errors="replace").splitlines():
            _, sep, named = line.partition("rerun-if-changed=")
            if not sep or not line.startswith("cargo:") or not named.startswith("/"):
                continue
            try:
                if Path(named).stat().st_mtime_ns > built:
                    return True
            except OSError:
                return True
    return False


def _dependency_seed() -> Path:
    """The library's dependencies compiled by a build of a pristine copy of the
    checkout's workspace (no run's code in it), outside the sandbox as the checkout's
    own build is; rebuilt when the manifests or the lock change, or a file a build
    script read (`seed_inputs_changed`). Call under `library_lock`."""
    seed = dependency_target_dir()
    key = _seed_key()
    mark = seed / SEED_MARK
    if mark.is_file() and mark.read_text(encoding="utf-8") == key and not seed_inputs_changed(seed):
        return seed
    shutil.rmtree(seed, ignore_errors=True)
    start_from_checkout_build(seed)
    with tempfile.TemporaryDirectory(prefix="tileport-dependencies-") as scratch:
        pristine = _copy_checkout(Path(scratch) / "workspace")
        command = _cargo_command(pristine, "build", "--lib", target_dir=seed)
        _run_cargo(pristine, command, None, sandboxed=False)
    mark.write_text(key, encoding="utf-8")
    return seed


def _prepare_build_area(crate: LibraryCrate) -> None:
    """The workspace's build area, made from the dependency seed when it has none, and
    marked as the most recently used. Call under `library_lock`."""
    refused = unavailable_reason()
    if refused is not None:
        raise LibraryBuildError(refused)  # before minutes of building what cannot be used
    area = crate.target_dir
    if not area.is_dir():
        seed = _dependency_seed()
        area.parent.mkdir(parents=True, exist_ok=True)
        kept = sorted(
            (path for path in area.parent.iterdir() if path.is_dir()),
            key=lambda path: path.stat().st_mtime,
            reverse=True,
        )
        for old in kept[BUILD_AREAS_KEPT - 1 :]:
            shutil.rmtree(old, ignore_errors=True)
        partial = area.with_name(f".{area.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        # Copy-on-write where the filesystem can (hundreds of megabytes otherwise).
        copy = ["cp", "-a", "--reflink=auto", str(seed), str(partial)]
        subprocess.run(copy, env={"PATH": PATH}, check=True)
        (partial / SEED_MARK).unlink()
        os.replace(partial, area)
    os.utime(area)
    _claim_workspace_target(crate)


def _cargo_command(
    crate: LibraryCrate, subcommand: str, *selection: str, target_dir: Path | None = None
) -> list[str]:
    return [
        "cargo",
        subcommand,
        "--release",
        "--locked",
        "--manifest-path",
        str(crate.workspace / "Cargo.toml"),
        "--target-dir",
        str(target_dir or crate.target_dir),
        "-p",
        CRATE_PACKAGE,
        *selection,
    ]


def build_library(crate: LibraryCrate, log_path: Path | None = None) -> Path:
    """`cargo build --release` of the crate's library (call under `library_lock`);
    returns `crate.library_path`."""
    if not crate.in_checkout:
        _prepare_build_area(crate)
    log = _run_cargo(crate, _cargo_command(crate, "build", "--lib"), log_path)
    built = crate.target_dir / "release" / LIBRARY_FILE
    if not built.exists():
        raise LibraryBuildError(f"cargo reported success but {built} is missing", log)
    if crate.in_checkout:
        # cargo leaves an up-to-date file untouched; mark it as newer than its sources.
        os.utime(built)
        return built
    # A new file, renamed into place: newer than its sources, and a copy already
    # loaded in this process keeps its own pages.
    partial = crate.library_path.with_name(f".{LIBRARY_FILE}.partial")
    shutil.copyfile(built, partial)
    os.replace(partial, crate.library_path)
    return crate.library_path


def _run_cargo(
    crate: LibraryCrate, command: list[str], log_path: Path | None, sandboxed: bool = True
) -> str:
    """cargo on the checkout's own crate (or the dependency seed's pristine copy) as
    it is; on a workspace, in the sandbox."""
    argv, env = command, toolchain_env()
    if sandboxed and not crate.in_checkout:
        box = cargo_sandbox(crate.workspace, crate.target_dir, toolchain_env(SANDBOX_ENV))
        try:
            argv, env = box.launch(command)
        except SandboxUnavailable as error:
            raise LibraryBuildError(str(error)) from None
    try:
        done = subprocess.run(
            argv,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise LibraryBuildError("cargo is not installed") from None
    except subprocess.TimeoutExpired:
        raise LibraryBuildError(f"{' '.join(command[:3])} timed out") from None
    log = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}"
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(log, encoding="utf-8")
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
        raise LibraryBuildError(
            f"{' '.join(command[:2])} failed: {errors[0] if errors else 'see the log'}", log
        )
    return log


def ensure_built(crate: LibraryCrate = CHECKOUT, log_path: Path | None = None) -> Path:
    """The library, rebuilt first (under the lock) if any source is newer; the
    checkout's by default (the generated wrapper's fallback inside the repository)."""
    with library_lock():
        if is_stale(crate):
            return build_library(crate, log_path)
        return crate.library_path


def load_wrapper(path: Path) -> ModuleType:
    """Imports a generated wrapper from its file; each file gets its own module name."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"tileport_kernels_{digest}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_pipeline_check(crate: LibraryCrate, operator: str, log_path: Path | None = None) -> str:
    """Runs the operator's plain-Rust pipeline check (cargo test); returns the log."""
    command = _cargo_command(crate, "test", "--test", "pipeline", "--", f"{operator}::")
    with library_lock():
        if not crate.in_checkout:
            _prepare_build_area(crate)
        return _run_cargo(crate, command, log_path)


# --- the manifest ------------------------------------------------------------------------


def read_manifest(crate: LibraryCrate) -> LibraryManifest:
    if not crate.manifest_path.exists():
        return LibraryManifest(abi_version=abi.ABI_VERSION)
    return LibraryManifest.model_validate_json(crate.manifest_path.read_text(encoding="utf-8"))


def library_arrays(binding: OperatorBinding) -> list[LibraryArray]:
    """The manifest's record of an operator's arrays (what the wrapper checks)."""
    arrays = []
    for array in binding.arrays:
        taken = {d for v in binding.variants for d in v.allowed_dtypes.get(array.name, ())}
        arrays.append(
            LibraryArray(
                name=array.name,
                rank=array.rank,
                dtypes=[d.spec_name for d in array.spec_dtypes if d in taken],
                spec_dtypes=[d.spec_name for d in array.spec_dtypes],
                unit_stride_dim=array.unit_stride_dim,
                dims=[
                    LibraryDim(
                        binds=rule.binds,
                        equals=None if rule.expected is None else str(rule.expected),
                    )
                    for rule in array.dims
                ],
                list_length=(
                    None
                    if array.length is None
                    else str(array.length.binds or array.length.expected)
                ),
            )
        )
    return arrays


def operator_entry(
    crate: LibraryCrate,
    binding: OperatorBinding,
    entries: dict[str, str] | None = None,
    literal_entries: list[LiteralDispatch] | None = None,
) -> LibraryOperator:
    return LibraryOperator(
        name=binding.operator,
        spec=_recorded_spec(crate, binding.spec_path),
        kernel=binding.kernel_path.resolve().relative_to(crate.src_dir.resolve()).as_posix(),
        rust_module_path=binding.rust_module_path,
        entries=entries,
        literal_entries=literal_entries,
        arrays=library_arrays(binding),
        scalars=[LibraryScalar(name=s.name, dtype=s.dtype.spec_name) for s in binding.scalars],
    )


def _recorded_spec(crate: LibraryCrate, path: Path) -> str:
    """The spec as the manifest records it: relative to the repository when it is in
    it, else (a workspace's operator: a run's input folder) its absolute path. The
    checkout's library holds operators of the repository only."""
    resolved, root = path.resolve(), REPO_ROOT.resolve()
    if resolved.is_relative_to(root):
        return resolved.relative_to(root).as_posix()
    if crate.in_checkout:
        raise BindingError(
            f"{path} is outside the repository: the checkout's library holds its own specs only"
        )
    return resolved.as_posix()


def binding_of(crate: LibraryCrate, operator: LibraryOperator) -> OperatorBinding:
    """Re-derive an operator's binding from its spec and kernel source."""
    spec_path = REPO_ROOT / operator.spec  # an absolute spec path stays as it is
    kernel = parse_kernel_source(crate.src_dir / operator.kernel)
    return bind_operator(
        load_port_spec(spec_path),
        spec_path,
        kernel,
        operator.rust_module_path,
        operator.entries,
        operator.literal_entries,
    )


def install_kernel(crate: LibraryCrate, operator: str, source: Path) -> tuple[Path, str]:
    """Copies a kernel the pipeline wrote into the crate as `src/ffi/kernels/<op>.rs`,
    laid out by rustfmt as every generated Rust file is (layout reaches only the IR's
    debug locations: tests/host/test_kernel_layout.py; unchanged files keep their mtime);
    returns its path and Rust module path. In the checkout, call under
    `library_lock`."""
    module = parse_kernel_source(source).module
    target = crate.kernels_dir / f"{operator}.rs"
    text = laid_out_kernel(source)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return target, f"crate::ffi::kernels::{operator}::{module}"


def laid_out_kernel(source: Path) -> str:
    """A kernel's text as the crate holds it: laid out by rustfmt."""
    return format_rust(source.read_text(encoding="utf-8"), RUST_EDITION)


def installed_operators(manifest: LibraryManifest) -> list[str]:
    return [op.name for op in manifest.operators if op.kernel.startswith(INSTALLED_PREFIX)]


# --- generation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratedLibrary:
    manifest: LibraryManifest
    cdef: str
    fingerprint: int
    written: list[Path]


def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def kernels_mod_rs(installed: list[str]) -> str:
    modules = "\n".join(f"pub mod {name};" for name in sorted(installed))
    return (
        "//! @generated by nodes/host_builder/library.py: the kernels the pipeline wrote,\n"
        "//! one module per operator, laid out by rustfmt (layout reaches only the IR's\n"
        "//! debug locations: tests/host/test_kernel_layout.py). Do not edit.\n\n"
        f"{modules}\n"
    )


def mod_rs(bindings: list[OperatorBinding], cdef: str, with_kernels: bool) -> str:
    names = [b.operator for b in bindings] + (["kernels"] if with_kernels else [])
    modules = "\n".join(f"pub mod {name};" for name in sorted(names))
    if '"#' in cdef:
        raise ValueError("the cdef cannot hold '\"#'")
    return (
        "//! @generated by nodes/host_builder/library.py: the C ABI of the aggregated library,\n"
        "//! one launcher module per operator. Do not edit.\n\n"
        "use std::ffi::{c_char, CStr};\n\n"
        "pub mod abi;\n"
        "pub mod proven;\n"
        "pub mod runtime;\n"
        "pub mod spec_arith;\n\n"
        f"{modules}\n\n"
        "/// The cffi declarations of this library, the single source of truth of its ABI.\n"
        f'pub static CDEF: &CStr = cr#"{cdef}"#;\n\n'
        "/// The fingerprint of CDEF; the Python wrapper refuses a library whose differs.\n"
        f"pub const FINGERPRINT: u64 = {abi.fingerprint(cdef):#x};\n\n"
        "/// The fingerprint of the cdef this library was generated from.\n"
        "#[no_mangle]\n"
        'pub extern "C" fn tileport_abi_fingerprint() -> u64 {\n'
        "    FINGERPRINT\n"
        "}\n\n"
        "/// The cdef itself, NUL-terminated, owned by the library.\n"
        "#[no_mangle]\n"
        'pub extern "C" fn tileport_cdef() -> *const c_char {\n'
        "    CDEF.as_ptr()\n"
        "}\n"
    )


LINE_LENGTH = 100


def _bracketed(head: str, items: list[str], tail: str, indent: int) -> str:
    """`head` + items + `tail` laid out as ruff formats a call or signature: on one
    line, else the items on one indented line, else one item per line."""
    pad = " " * indent
    one = f"{pad}{head}{', '.join(items)}{tail}"
    if len(one) <= LINE_LENGTH:
        return one
    inner = f"{pad}    {', '.join(items)}"
    if len(inner) <= LINE_LENGTH:
        return f"{pad}{head}\n{inner}\n{pad}{tail}"
    each = "\n".join(f"{pad}    {item}," for item in items)
    return f"{pad}{head}\n{each}\n{pad}{tail}"


def _operator_function(op: LibraryOperator) -> str:
    """The wrapper's module-level function of one operator."""
    names = [a.name for a in op.arrays] + [s.name for s in op.scalars]
    params = [f"{name}: object" for name in names] + ["*", "stream: object = None"]
    arguments = [
        f'"{op.name}"',
        _python_tuple([a.name for a in op.arrays]),
        _python_tuple([s.name for s in op.scalars]),
        "stream",
    ]
    summary = f"Launches `{op.symbol}`: the port of `{Path(op.spec).name}`, in place."
    lists = ", ".join(f"`{a.name}`" for a in op.arrays if a.list_length is not None)
    docstring = f'    """{summary}"""'
    if lists:
        note = f"{lists}: a sequence of tensors (or a TensorList)."
        docstring = f'    """{summary}\n\n    {note}\n    """'
    return "\n".join(
        [
            _bracketed(f"def {op.name}(", params, ") -> None:", 0),
            docstring,
            _bracketed("default_library().call(", arguments, ")", 4),
        ]
    )


def wrapper_py(manifest: LibraryManifest, cdef: str) -> str:
    functions = "".join(f"\n\n{_operator_function(op)}\n" for op in manifest.operators)
    operators = {
        op.name: json.loads(op.model_dump_json(include={"arrays", "scalars"}))
        for op in manifest.operators
    }
    return (
        _environment()
        .get_template("wrapper.py.j2")
        .render(
            cdef=cdef,
            fingerprint=f"0x{abi.fingerprint(cdef):016X}",
            abi_version=abi.ABI_VERSION,
            max_rank=abi.MAX_RANK,
            library_file=LIBRARY_FILE,
            tensor_facts_source=TENSOR_FACTS_SOURCE,
            status_names=_python_literal({s.value: s.name for s in abi.Status}),
            dtype_codes=_python_literal({d.spec_name: d.value for d in abi.DType}),
            operators=_python_literal(operators),
            operator_functions=functions,
        )
    )


def _python_literal(value: object, depth: int = 0) -> str:
    """A Python literal laid out as ruff formats it: one item per line with a trailing
    comma (which ruff keeps exploded), double quotes, sorted keys."""
    inner = "    " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [
            f"{inner}{_python_literal(key)}: {_python_literal(value[key], depth + 1)},"
            for key in sorted(value, key=str)
        ]
        return "{\n" + "\n".join(items) + "\n" + "    " * depth + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [f"{inner}{_python_literal(item, depth + 1)}," for item in value]
        return "[\n" + "\n".join(items) + "\n" + "    " * depth + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def render_library(crate: LibraryCrate, manifest: LibraryManifest) -> tuple[str, dict[Path, str]]:
    """The cdef and the text of every generated file of `crate` for `manifest`."""
    bindings = [binding_of(crate, op) for op in manifest.operators]
    cdef = abi.library_cdef([b.abi for b in bindings])
    outputs: dict[Path, str] = {
        crate.ffi_dir / "abi.rs": abi.rust_abi_module(),
        crate.ffi_dir / "mod.rs": mod_rs(bindings, cdef, bool(installed_operators(manifest))),
        crate.manifest_path: manifest.model_dump_json(indent=2) + "\n",
        crate.wrapper_path: wrapper_py(manifest, cdef),
        crate.pipeline_dir / "main.rs": pipeline_main_rs(bindings),
    }
    if installed_operators(manifest):
        outputs[crate.kernels_dir / "mod.rs"] = kernels_mod_rs(installed_operators(manifest))
    for binding in bindings:
        outputs[crate.ffi_dir / f"{binding.operator}.rs"] = generate_operator_rs(binding)
        outputs[crate.pipeline_dir / f"{binding.operator}.rs"] = pipeline_check_rs(binding)
    return cdef, outputs


def _python_tuple(names: list[str]) -> str:
    if len(names) == 1:
        return f"({names[0]},)"
    return f"({', '.join(names)})"


def generate_library(crate: LibraryCrate, manifest: LibraryManifest) -> GeneratedLibrary:
    """Writes every generated file of `crate` for `manifest` (in the checkout, call
    under the lock)."""
    cdef, outputs = render_library(crate, manifest)
    written = [path for path, text in outputs.items() if _write_if_changed(path, text)]
    _format_rust([p for p in written if p.suffix == ".rs"])
    return GeneratedLibrary(manifest, cdef, abi.fingerprint(cdef), written)


def stale_generated(crate: LibraryCrate) -> list[Path]:
    """Generated files that differ from what the manifest generates now (hand edits,
    or a generator changed without regenerating)."""
    _cdef, outputs = render_library(crate, read_manifest(crate))
    return [path for path, text in outputs.items() if not _same_after_format(path, text)]


def _write_if_changed(path: Path, text: str) -> bool:
    """Unchanged files keep their mtime, so a regeneration alone triggers no rebuild."""
    if _same_after_format(path, text):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def _same_after_format(path: Path, text: str) -> bool:
    if not path.exists():
        return False
    current = path.read_text(encoding="utf-8")
    if current == text:
        return True
    if path.suffix != ".rs":
        return False
    return current == _rustfmt_text(text)


def _rustfmt_text(text: str) -> str:
    done = subprocess.run(
        ["rustfmt", "--edition", RUST_EDITION, "--emit", "stdout", "--quiet"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else text


def _format_rust(paths: list[Path]) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing:
        subprocess.run(
            ["rustfmt", "--edition", RUST_EDITION, "--quiet", *existing],
            capture_output=True,
            check=False,
        )


def add_operator(
    crate: LibraryCrate,
    binding: OperatorBinding,
    entries: dict[str, str] | None = None,
    literal_entries: list[LiteralDispatch] | None = None,
) -> GeneratedLibrary:
    """Registers (or refreshes) one operator and regenerates the library's files.
    In the checkout, call under `library_lock`."""
    manifest = read_manifest(crate).with_operator(
        operator_entry(crate, binding, entries, literal_entries)
    )
    return generate_library(crate, manifest)


# --- the plain-Rust pipeline check ------------------------------------------------------


def pipeline_main_rs(bindings: list[OperatorBinding]) -> str:
    modules = "\n".join(f"mod {b.operator};" for b in sorted(bindings, key=lambda b: b.operator))
    return (
        "//! @generated by nodes/host_builder/library.py: the plain-Rust pipeline check of\n"
        "//! every operator (no FFI, no Python, no GPU): each variant's entry compiles to\n"
        "//! Tile IR with the generics and launch hints of each test configuration.\n\n"
        f"{modules}\n\n"
        "/// cutile's compiler recurses deeply; its own tests run it on a large stack.\n"
        "pub fn on_large_stack(check: impl FnOnce() + Send + 'static) {\n"
        "    std::thread::Builder::new()\n"
        "        .stack_size(64 << 20)\n"
        "        .spawn(check)\n"
        '        .expect("spawn the compiler thread")\n'
        "        .join()\n"
        '        .expect("the pipeline check panicked");\n'
        "}\n\n"
        "/// Writes the IR when TILEPORT_PIPELINE_IR_DIR names a directory.\n"
        "pub fn keep_ir(operator: &str, config: &str, ir: &str) {\n"
        '    if let Some(dir) = std::env::var_os("TILEPORT_PIPELINE_IR_DIR") {\n'
        '        let path = std::path::Path::new(&dir).join(format!("{operator}.{config}.mlir"));\n'
        '        std::fs::write(&path, ir).expect("write the IR");\n'
        "    }\n"
        "}\n"
    )


def _has_entry(binding: OperatorBinding, resolved: ResolvedConfig) -> bool:
    """Whether the port has an entry for this configuration's variant and dtypes."""
    try:
        variant = binding.variant_for(resolved)
    except BindingError:
        return False
    return all(
        resolved.arrays[name].dtype in {d.spec_name for d in allowed}
        for name, allowed in variant.allowed_dtypes.items()
    )


def pipeline_check_rs(binding: OperatorBinding) -> str:
    spec = load_port_spec(binding.spec_path)
    kernel = parse_kernel_source(binding.kernel_path)
    cases: list[dict[str, str]] = []
    skipped: list[str] = []
    for config in spec.test_configs:
        resolved = spec.resolve(config, "test")
        if not _has_entry(binding, resolved):
            skipped.append(config.name)
            continue
        plan = plan_for(binding, resolved)
        cases.append(
            {
                "config": config.name,
                "entry": binding.variants[plan.variant].entry,
                "generics": ", ".join(f'"{text}"' for text in plan.generic_texts),
            }
        )
    return (
        _environment()
        .get_template("pipeline_check.rs.j2")
        .render(
            operator=binding.operator,
            spec_name=binding.spec_path.name,
            kernel_name=binding.kernel_path.name,
            skipped=", ".join(skipped),
            module_path=binding.rust_module_path.replace("crate::", "tileport_kernels::", 1),
            module=kernel.module,
            cases=cases,
        )
    )
