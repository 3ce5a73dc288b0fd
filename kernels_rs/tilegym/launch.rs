//! How a tileport symbol in TileGym's cutile-rs backend reads the launch its wrapper
//! packed (in C++, `tileport_launch.cpp`, or in Python, `struct.Struct("<...")`): one
//! buffer of little-endian 8-byte words, every `ct.launch` argument in the kernel's
//! order (a tensor as its address, ffi_util dtype code, extents and strides), then the
//! grid, the device and the stream.
//! Hand-written; copied as it is into a TileGym checkout as `tileport_launch.rs`
//! beside `ffi_util.rs`, whose `TensorDesc` it fills. Every op's `ffi.rs` uses it.

use crate::ffi_util::TensorDesc;

/// ffi_util's `TensorDesc` holds five extents.
const MAX_RANK: usize = 5;

/// A port-spec expression's value (tileport's `spec_arith`, Python's semantics), or
/// the launch refused with why: never a wrapped or truncated value.
macro_rules! checked {
    ($symbol:literal, $value:expr) => {
        match $value {
            Ok(value) => value,
            Err(error) => {
                eprintln!("{}: {}", $symbol, error);
                return $crate::ffi_util::rc::INVALID_ARGS;
            }
        }
    };
}
pub(crate) use checked;

/// The `N` words of a launch, or None for a null pointer.
///
/// # Safety
/// A non-null `launch` points at `8 * N` readable bytes.
pub unsafe fn launch_words<const N: usize>(launch: *const u8) -> Option<[u64; N]> {
    if launch.is_null() {
        return None;
    }
    let mut words = [0u64; N];
    for (index, word) in words.iter_mut().enumerate() {
        // SAFETY: within the `8 * N` bytes the caller vouches for; no alignment assumed.
        let bytes = unsafe { launch.add(8 * index).cast::<[u8; 8]>().read_unaligned() };
        *word = u64::from_le_bytes(bytes);
    }
    Some(words)
}

/// A word packed from a Python int, as the narrower integer the launch takes it in,
/// or None where it does not fit.
pub fn narrow<T: TryFrom<i64>>(word: u64) -> Option<T> {
    T::try_from(word as i64).ok()
}

/// A tensor's descriptor from its `2 + 2 * R` words: address, dtype code, `R`
/// extents, `R` strides; None where the dtype code is no i32.
pub fn descriptor<const R: usize>(words: &[u64]) -> Option<TensorDesc> {
    const { assert!(R <= MAX_RANK) };
    let mut desc = TensorDesc {
        ptr: words[0],
        ndim: R as i32,
        shape: [0; MAX_RANK],
        strides: [0; MAX_RANK],
        dtype: narrow(words[1])?,
    };
    for dim in 0..R {
        desc.shape[dim] = words[2 + dim] as i64;
        desc.strides[dim] = words[2 + R + dim] as i64;
    }
    Some(desc)
}
