//! Kernels ported to cutile-rs. Each operator lives in its own module; the
//! hand-written softmax is the reference port that proves the IR engine.

pub mod ffi;
pub mod softmax;
