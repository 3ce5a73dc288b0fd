//! The arithmetic of port-spec expressions, with Python's semantics and checked,
//! and the launch facts cuTile Python states.
//!
//! Every launcher computes a launch's constants, grid and variant from its
//! arguments with these (the expressions `nodes/host_builder/rust_expr.py` writes),
//! so a derived value is what the cuTile Python host computes: `//` and `%` round
//! as Python's do, and an overflow or a division by zero is an error, never a
//! wrapped value or a panic. It depends on `core` and `std` alone: the pipeline's
//! launchers reach it through `runtime`, and `tileport tilegym add` copies it as
//! it is into a TileGym crate.

use std::fmt;

/// An expression that has no value for these arguments, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError(pub String);

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub type ExprResult<T> = Result<T, ExprError>;

fn refuse<T>(message: String) -> ExprResult<T> {
    Err(ExprError(message))
}

fn overflow<T>(what: &str) -> ExprResult<T> {
    refuse(format!("{what} overflows 64-bit integers"))
}

fn checked(value: Option<i64>, what: &str) -> ExprResult<i64> {
    value.map_or_else(|| overflow(what), Ok)
}

pub fn add(a: i64, b: i64) -> ExprResult<i64> {
    checked(a.checked_add(b), "an addition")
}

pub fn sub(a: i64, b: i64) -> ExprResult<i64> {
    checked(a.checked_sub(b), "a subtraction")
}

pub fn mul(a: i64, b: i64) -> ExprResult<i64> {
    checked(a.checked_mul(b), "a multiplication")
}

fn nonzero(b: i64, what: &str) -> ExprResult<()> {
    if b == 0 {
        return refuse(format!("{what} by zero"));
    }
    Ok(())
}

/// Python's `//`: the quotient rounded toward negative infinity.
pub fn floordiv(a: i64, b: i64) -> ExprResult<i64> {
    nonzero(b, "integer division")?;
    let quotient = checked(a.checked_div(b), "a division")?;
    // Rust truncates toward zero: one less when the signs differ and it was inexact.
    let inexact = a % b != 0;
    Ok(if inexact && ((a < 0) != (b < 0)) {
        quotient - 1
    } else {
        quotient
    })
}

/// Python's `%`: the remainder takes the divisor's sign.
pub fn modulo(a: i64, b: i64) -> ExprResult<i64> {
    nonzero(b, "modulo")?;
    let remainder = checked(a.checked_rem(b), "a modulo")?;
    Ok(if remainder != 0 && ((remainder < 0) != (b < 0)) {
        remainder + b
    } else {
        remainder
    })
}

/// `cdiv(a, b)`: the ceiling of a / b, as `-(-a // b)`.
pub fn cdiv(a: i64, b: i64) -> ExprResult<i64> {
    let negated = checked(a.checked_neg(), "a negation")?;
    checked(floordiv(negated, b)?.checked_neg(), "a negation")
}

/// `next_pow2(n)`: 1 for n <= 1, else the least power of two >= n.
pub fn next_pow2(n: i64) -> ExprResult<i64> {
    if n <= 1 {
        return Ok(1);
    }
    let power = u64::try_from(n)
        .ok()
        .and_then(u64::checked_next_power_of_two)
        .and_then(|value| i64::try_from(value).ok());
    checked(power, "next_pow2")
}

/// Python's `**` on integers (a negative exponent would give a float: refused).
pub fn pow(base: i64, exponent: i64) -> ExprResult<i64> {
    let Ok(exponent) = u32::try_from(exponent) else {
        return refuse(format!("integer power with exponent {exponent}"));
    };
    checked(base.checked_pow(exponent), "a power")
}

/// Python's `<<`: refused where the value does not fit, never wrapped.
pub fn shift_left(a: i64, b: i64) -> ExprResult<i64> {
    if b < 0 {
        return refuse(format!("left shift by {b}"));
    }
    if a == 0 {
        return Ok(0);
    }
    match u32::try_from(b) {
        Ok(bits) if bits < 63 && (a << bits) >> bits == a => Ok(a << bits),
        _ => overflow("a left shift"),
    }
}

/// Python's `>>`: an arithmetic shift, any non-negative distance.
pub fn shift_right(a: i64, b: i64) -> ExprResult<i64> {
    if b < 0 {
        return refuse(format!("right shift by {b}"));
    }
    Ok(a >> b.min(63))
}

/// Python's `/`.
pub fn true_div(a: f64, b: f64) -> ExprResult<f64> {
    if b == 0.0 {
        return refuse("division by zero".to_string());
    }
    Ok(a / b)
}

/// A derived value passed to an `i32` kernel parameter or generic; one that does not
/// fit is refused, never truncated.
pub fn to_i32(value: i64, what: &str) -> ExprResult<i32> {
    i32::try_from(value)
        .map_err(|_| ExprError(format!("{what} = {value} does not fit the kernel's i32")))
}

/// Whether an extent or stride fits what a kernel takes it as: cuTile's kernels
/// index with `i32`, and an extent or a stride is never negative.
pub fn fits_kernel_i32(value: i64) -> bool {
    (0..=i64::from(i32::MAX)).contains(&value)
}

/// The alignment, in bytes, behind every launch fact of cuTile Python: the one
/// place the launchers hold it (`FACT_ALIGNMENT` in `nodes/host_builder/binding.py`
/// is the Python side's).
pub const FACT_ALIGNMENT: i64 = 16;

/// The divisibility a cuTile launch states for an extent: 16 when the extent is a
/// multiple of 16, else nothing (1).
pub fn shape_fact(extent: i64) -> i64 {
    if extent % FACT_ALIGNMENT == 0 {
        FACT_ALIGNMENT
    } else {
        1
    }
}

/// The divisibility (in elements) a cuTile launch states for a stride: 16 bytes
/// counted in elements when the stride in bytes is a multiple of 16; a unit
/// stride is a constant instead, so it states nothing (1).
pub fn stride_fact(stride: i64, itemsize: i64) -> i64 {
    if stride == 1 || (stride * itemsize) % FACT_ALIGNMENT != 0 {
        1
    } else {
        (FACT_ALIGNMENT / itemsize).max(1)
    }
}

/// The divisibility (in bytes) a cuTile launch states for a base address.
pub fn address_fact(address: u64) -> i64 {
    if address.is_multiple_of(FACT_ALIGNMENT as u64) {
        FACT_ALIGNMENT
    } else {
        1
    }
}
