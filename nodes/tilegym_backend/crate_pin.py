"""TileGym's `cutile_kernels` crate moved to the cutile version tileport's ports are
written and proven against (`kernels_rs/Cargo.toml`'s pin).

TileGym pins `=0.2.0`, which lacks what a port uses (`shape!`). Moving to 0.5.0
changes the crate in three places, each found by its text in HEAD and refused
when it is not there (TileGym changed: nothing is guessed):

- the five cutile pins in `cutile_kernels/Cargo.toml`;
- `ffi_util.rs`: a borrowed stream hangs off a `cuda_core::Context` (the device's
  primary context, the one PyTorch uses), and `borrow_tensor` borrows through
  `Tensor::borrow_raw_parts`, which takes that context and never frees;
- each of TileGym's own ops' `ffi.rs`: `borrow_tensor` gets the context its
  `setup_device_stream!` bound.

The texts are computed from HEAD, so a second run, or a second op, writes the
same thing, and a crate already at the pin is left alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from nodes.tilegym_backend.checkout import CUTILE_RS, head_text
from toolchain.env import REPO_ROOT

CARGO_TOML = CUTILE_RS / "cutile_kernels/Cargo.toml"
FFI_UTIL = CUTILE_RS / "ffi_util.rs"
_PROJECT_MANIFEST = REPO_ROOT / "kernels_rs" / "Cargo.toml"
_CRATES = ("cutile", "cutile-compiler", "cutile-macro", "cuda-core", "cuda-async")
_MOVES_FROM = "0.2.0"  # the one pin this module knows how to move

_SETUP_OLD = "let $dev = match Device::new(($device_id) as usize) {"
_SETUP_NEW = "let $dev = match cuda_core::Context::new(($device_id) as usize) {"
_SETUP_MESSAGE = (
    '"cutile-rs: Device::new failed: {e:?}"',
    '"cutile-rs: Context::new failed: {e:?}"',
)
_BORROW = re.compile(
    r"pub unsafe fn borrow_tensor<E: DType>\(d: &TensorDesc\) -> ManuallyDrop<Tensor<E>> \{\n"
    r"    ManuallyDrop::new\(unsafe \{\n"
    r"        Tensor::<E>::from_raw_parts\(d\.ptr, d\.nbytes\(\), 0, "
    r"d\.shape_i32\(\), d\.strides_i32\(\)\)\n"
    r"    \}\)\n"
    r"\}\n"
)
_BORROW_NEW = """pub unsafe fn borrow_tensor<E: DType>(
    d: &TensorDesc,
    context: &std::sync::Arc<cuda_core::Context>,
) -> ManuallyDrop<Tensor<E>> {
    // cutile 0.5.0: a borrow over `context` that never frees `d.ptr`.
    ManuallyDrop::new(unsafe {
        Tensor::<E>::borrow_raw_parts(d.ptr, context.clone(), d.shape_i32(), d.strides_i32())
    })
}
"""
_CALL = re.compile(r"borrow_tensor::<([^>]+)>\((\w+)\)")
_SETUP_CALL = re.compile(r"crate::setup_device_stream!\((\w+),")


class CratePinError(ValueError):
    """The crate cannot be moved to the ports' cutile version; says why."""


def project_pin() -> str:
    """The cutile version the ports are written against."""
    found = re.search(r'^cutile = "=([^"]+)"', _PROJECT_MANIFEST.read_text(), re.MULTILINE)
    if found is None:
        raise CratePinError(f"{_PROJECT_MANIFEST}: no exact cutile pin")
    return found.group(1)


def _pins(manifest: str) -> dict[str, str]:
    return {
        crate: m.group(1)
        for crate in _CRATES
        if (m := re.search(rf'^{re.escape(crate)} = "=([^"]+)"', manifest, re.MULTILINE))
    }


def migrated_crate(checkout: Path) -> dict[Path, str]:
    """The crate's files as they must read for the ports to build; {} when HEAD's
    crate is already at the pin."""
    manifest = head_text(checkout, CARGO_TOML)
    if manifest is None:
        raise CratePinError(f"{CARGO_TOML} is not in HEAD")
    ours = project_pin()
    pins = _pins(manifest)
    if set(pins.values()) == {ours} and len(pins) == len(_CRATES):
        return {}
    if set(pins) != set(_CRATES) or set(pins.values()) != {_MOVES_FROM}:
        raise CratePinError(
            f"{CARGO_TOML} pins {pins or 'no cutile crates'}; tileport moves a crate pinned "
            f"to ={_MOVES_FROM} to its ports' ={ours}, and knows no other move"
        )
    texts = {CARGO_TOML: manifest.replace(f'"={_MOVES_FROM}"', f'"={ours}"')}
    ffi_util = head_text(checkout, FFI_UTIL) or ""
    if _SETUP_OLD not in ffi_util or not _BORROW.search(ffi_util):
        raise CratePinError(
            f"{FFI_UTIL}: its device setup or borrow_tensor is not the one tileport moves "
            f"to cutile {ours}"
        )
    ffi_util = ffi_util.replace(_SETUP_OLD, _SETUP_NEW).replace(*_SETUP_MESSAGE)
    texts[FFI_UTIL] = _BORROW.sub(lambda _: _BORROW_NEW, ffi_util)
    for path in sorted((checkout / CUTILE_RS).glob("*_kernel/ffi.rs")):
        relative = path.relative_to(checkout)
        text = head_text(checkout, relative)
        if text is None or not _CALL.search(text):
            continue
        setups = set(_SETUP_CALL.findall(text))
        if len(setups) != 1:
            raise CratePinError(f"{relative}: borrow_tensor without one setup_device_stream!")
        [device] = setups
        texts[relative] = _CALL.sub(rf"borrow_tensor::<\1>(\2, &{device})", text)
    return texts
