"""Fixtures of the host/FFI tests: the real library, built by cargo, and its
generated cffi wrapper; and a library of its own holding an operator with a
list of arrays (`tests/host/data/pick_rows.*`), built beside it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nodes.host_builder import abi
from nodes.host_builder.binding import OperatorBinding, bind_operator
from nodes.host_builder.ffi_gen import generate_operator_rs
from nodes.host_builder.library import (
    CHECKOUT,
    binding_of,
    ensure_built,
    kernels_mod_rs,
    library_arrays,
    load_wrapper,
    mod_rs,
    read_manifest,
    wrapper_py,
)
from nodes.host_builder.rust_entry import parse_kernel_source
from schemas.gpu import LibraryManifest, LibraryOperator
from schemas.port_spec import load_port_spec
from toolchain.env import KERNELS_RS, cargo_target_dir, toolchain_env

# The scripted pipeline of tests/graph makes the run directories `gpu-bundle --runs` reads.
sys.path.insert(0, str(Path(__file__).parent.parent / "graph"))

DATA = Path(__file__).parent / "data"
LIST_SPEC = DATA / "pick_rows.port.yaml"
LIST_KERNEL = DATA / "pick_rows.rs"
# Its own package and library name: built into the shared target directory, it
# reuses the compiled dependencies and never replaces the library of the crate.
SCRATCH_PACKAGE = "tileport-kernels-listcheck"
SCRATCH_LIB = "tileport_kernels_listcheck"
SCRATCH_CARGO = f"""[package]
name = "{SCRATCH_PACKAGE}"
version = "0.1.0"
edition = "2021"

[lib]
name = "{SCRATCH_LIB}"
crate-type = ["cdylib"]

[dependencies]
cutile = "=0.5.0"

[profile.release]
debug = false

[workspace]
"""


@pytest.fixture(scope="session")
def library_file() -> Path:
    """The aggregated library, rebuilt first if a source is newer (cargo; slow once)."""
    return ensure_built()


@pytest.fixture(scope="session")
def wrapper() -> ModuleType:
    return load_wrapper(CHECKOUT.wrapper_path)


@pytest.fixture(scope="session")
def library(wrapper: ModuleType, library_file: Path) -> Any:
    return wrapper.Library(library_file)


@pytest.fixture(scope="session")
def softmax_binding() -> OperatorBinding:
    """The softmax port the library holds now: the hand port, or the kernel writer's
    port once the pipeline has run; expectations that depend on it come from here."""
    return binding_of(CHECKOUT, read_manifest(CHECKOUT).operator("softmax"))


@dataclass(frozen=True)
class ListLibrary:
    """A built library whose one operator, `pick_rows`, takes a list of arrays."""

    binding: OperatorBinding
    wrapper: ModuleType
    library: Any
    crate: Path


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _scratch_crate(crate: Path) -> tuple[OperatorBinding, str]:
    """Writes a crate holding the generated C ABI of `pick_rows` and its kernel."""
    ffi = crate / "src" / "ffi"
    kernel = ffi / "kernels" / "pick_rows.rs"
    _write(kernel, LIST_KERNEL.read_text(encoding="utf-8"))
    module = f"crate::ffi::kernels::pick_rows::{parse_kernel_source(kernel).module}"
    binding = bind_operator(
        load_port_spec(LIST_SPEC), LIST_SPEC, parse_kernel_source(kernel), module
    )
    cdef = abi.library_cdef([binding.abi])
    _write(crate / "Cargo.toml", SCRATCH_CARGO)
    shutil.copyfile(KERNELS_RS / "Cargo.lock", crate / "Cargo.lock")
    _write(crate / "src" / "lib.rs", "pub mod ffi;\n")
    _write(ffi / "mod.rs", mod_rs([binding], cdef, with_kernels=True))
    _write(ffi / "abi.rs", abi.rust_abi_module())
    for hand_written in ("runtime.rs", "proven.rs", "spec_arith.rs"):
        shutil.copyfile(CHECKOUT.ffi_dir / hand_written, ffi / hand_written)
    _write(ffi / "pick_rows.rs", generate_operator_rs(binding))
    _write(ffi / "kernels" / "mod.rs", kernels_mod_rs(["pick_rows"]))
    return binding, cdef


@pytest.fixture(scope="session")
def list_library(tmp_path_factory: pytest.TempPathFactory) -> ListLibrary:
    """The generated launcher, wrapper and runtime of a list operator, built by cargo
    (slow once: the crate itself; the dependencies are shared)."""
    crate = tmp_path_factory.mktemp("list_library")
    binding, cdef = _scratch_crate(crate)
    operator = LibraryOperator(
        name=binding.operator,
        spec=LIST_SPEC.name,
        kernel="ffi/kernels/pick_rows.rs",
        rust_module_path=binding.rust_module_path,
        arrays=library_arrays(binding),
    )
    manifest = LibraryManifest(abi_version=abi.ABI_VERSION, operators=[operator])
    _write(crate / "python" / "tileport_kernels.py", wrapper_py(manifest, cdef))
    done = subprocess.run(
        ["cargo", "build", "--release", "--manifest-path", str(crate / "Cargo.toml"), "--lib"],
        env=toolchain_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    built = cargo_target_dir() / "release" / f"lib{SCRATCH_LIB}.so"
    wrapper = load_wrapper(crate / "python" / "tileport_kernels.py")
    return ListLibrary(binding, wrapper, wrapper.Library(built), crate)
