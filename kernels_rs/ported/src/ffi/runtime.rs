//! What every generated launcher shares: descriptor checks, the arithmetic of
//! port-spec expressions (`spec_arith.rs`, re-exported here), the device checks, the borrowed stream, the panic
//! guard and the last error message.
//!
//! Ownership: a launcher only reads descriptors and passes their addresses to
//! the kernel. Nothing here allocates device memory or frees what the caller
//! owns; the caller's stream is borrowed, never synchronised. The one copy is a
//! list's table: its rows are written into the caller's table on the caller's
//! stream, right before the launch.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

use cutile::cuda_core::sys;

use super::abi::{Dtype, Plan, Status, Tensor, MAX_GENERICS, MAX_RANK};
use super::proven::{self, LaunchError, LaunchFailure};
pub use super::proven::{param, Device, ProvenEntry};
pub use super::spec_arith::*;

/// A refused or failed call: the status code returned and the message kept
/// for `tileport_last_error`.
#[derive(Debug, Clone)]
pub struct AbiError {
    pub status: Status,
    pub message: String,
}

pub type AbiResult<T> = Result<T, AbiError>;

impl From<LaunchError> for AbiError {
    fn from(error: LaunchError) -> Self {
        let status = match error.kind {
            LaunchFailure::Device => Status::Device,
            LaunchFailure::Compile | LaunchFailure::Launch => Status::Launch,
        };
        AbiError {
            status,
            message: error.message,
        }
    }
}

pub fn fail<T>(status: Status, message: impl Into<String>) -> AbiResult<T> {
    Err(AbiError {
        status,
        message: message.into(),
    })
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|slot| *slot.borrow_mut() = message);
}

/// Runs one exported call: its status code, with any panic caught here so that
/// none crosses the C boundary. The message of a failure is kept per thread.
pub fn guard(symbol: &str, body: impl FnOnce() -> AbiResult<()>) -> i32 {
    let outcome = catch_unwind(AssertUnwindSafe(body));
    let error = match outcome {
        Ok(Ok(())) => {
            set_last_error(String::new());
            return Status::Ok as i32;
        }
        Ok(Err(error)) => error,
        Err(panic) => AbiError {
            status: Status::Panic,
            message: format!("panic: {}", panic_message(panic.as_ref())),
        },
    };
    set_last_error(format!("{symbol}: {}", error.message));
    error.status as i32
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_string()))
        .unwrap_or_else(|| "unknown panic payload".to_string())
}

/// Copies the calling thread's last error message into `buffer` (NUL-terminated,
/// truncated to `capacity - 1` bytes) and returns its full length in bytes.
///
/// # Safety
/// `buffer` must be null or valid for writes of `capacity` bytes.
#[no_mangle]
pub unsafe extern "C" fn tileport_last_error(buffer: *mut c_char, capacity: usize) -> usize {
    LAST_ERROR.with(|slot| {
        let message = slot.borrow();
        let bytes = message.as_bytes();
        if !buffer.is_null() && capacity > 0 {
            let copied = bytes.len().min(capacity - 1);
            // SAFETY: the caller guarantees `capacity` writable bytes at `buffer`.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer.cast::<u8>(), copied);
                *buffer.add(copied) = 0;
            }
        }
        bytes.len()
    })
}

thread_local! {
    static QUIET_PANIC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics inside the guard, so a test can prove that no panic crosses the boundary.
/// The panic is expected: it is not printed (the message stays in the last error).
#[no_mangle]
pub extern "C" fn tileport_selftest_panic() -> i32 {
    static QUIET_HOOK: OnceLock<()> = OnceLock::new();
    QUIET_HOOK.get_or_init(|| {
        let printing = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANIC.with(std::cell::Cell::get) {
                printing(info);
            }
        }));
    });
    QUIET_PANIC.with(|quiet| quiet.set(true));
    let status = guard("tileport_selftest_panic", || {
        panic!("deliberate panic of the self-test");
    });
    QUIET_PANIC.with(|quiet| quiet.set(false));
    status
}

/// Keeps every kernel this process compiles from now on in cutile's per-user disk
/// cache (`~/.cache/cutile/kernels`, a `0700` directory; content-addressed by the
/// Tile IR bytecode, the target and tileiras), and looks there before compiling.
/// Off unless called: a GPU host that runs many processes of one library (a warm
/// pass, then the timed run) compiles each entry once.
#[no_mangle]
pub extern "C" fn tileport_enable_disk_cache() -> i32 {
    guard("tileport_enable_disk_cache", || {
        cutile::jit_cache::enable_default().or_else(|error| {
            fail(
                Status::Launch,
                format!("no per-user cache directory for compiled kernels: {error}"),
            )
        })
    })
}

// --- descriptors --------------------------------------------------------------------

/// One checked array argument: a descriptor whose dtype is known, whose rank is
/// the parameter's and whose extents and strides fit the kernel's `i32`.
#[derive(Debug, Clone, Copy)]
pub struct TensorArg {
    pub name: &'static str,
    /// The position in its list, for an element of a list of arrays.
    pub index: Option<usize>,
    pub data: u64,
    pub dtype: Dtype,
    rank: usize,
    shape: [i64; MAX_RANK],
    strides: [i64; MAX_RANK],
}

/// How messages name an argument: `x`, or `weights[3]` for a list's element.
#[derive(Debug, Clone, Copy)]
pub struct Label {
    name: &'static str,
    index: Option<usize>,
}

impl fmt::Display for Label {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(index) => write!(out, "{}[{index}]", self.name),
            None => write!(out, "{}", self.name),
        }
    }
}

/// Reads and checks a descriptor; no CUDA call.
///
/// # Safety
/// `descriptor` must be null or point to a readable `Tensor`.
pub unsafe fn tensor_arg(
    descriptor: *const Tensor,
    name: &'static str,
    rank: usize,
) -> AbiResult<TensorArg> {
    // SAFETY: forwarded from the caller.
    unsafe { read_tensor(descriptor, Label { name, index: None }, rank) }
}

/// # Safety
/// `descriptor` must be null or point to a readable `Tensor`.
unsafe fn read_tensor(
    descriptor: *const Tensor,
    label: Label,
    rank: usize,
) -> AbiResult<TensorArg> {
    // SAFETY: the caller passes null or a readable descriptor.
    let Some(raw) = (unsafe { descriptor.as_ref() }) else {
        return fail(
            Status::NullDescriptor,
            format!("descriptor `{label}` is null"),
        );
    };
    let Some(dtype) = Dtype::from_code(raw.dtype) else {
        return fail(
            Status::UnknownDtype,
            format!(
                "`{label}` has dtype code {}, not in the ABI table",
                raw.dtype
            ),
        );
    };
    if usize::try_from(raw.ndim).ok() != Some(rank) {
        return fail(
            Status::BadRank,
            format!(
                "`{label}` has ndim {}, the kernel takes rank {rank}",
                raw.ndim
            ),
        );
    }
    for dim in 0..rank {
        check_fits_i32(label, "shape", dim, raw.shape[dim], Status::BadShape)?;
        check_fits_i32(label, "strides", dim, raw.strides[dim], Status::BadStride)?;
    }
    Ok(TensorArg {
        name: label.name,
        index: label.index,
        data: raw.data,
        dtype,
        rank,
        shape: raw.shape,
        strides: raw.strides,
    })
}

fn check_fits_i32(
    label: Label,
    what: &str,
    dim: usize,
    value: i64,
    status: Status,
) -> AbiResult<()> {
    if !fits_kernel_i32(value) {
        return fail(
            status,
            format!("`{label}.{what}[{dim}]` = {value} is outside 0..=i32::MAX"),
        );
    }
    Ok(())
}

impl TensorArg {
    /// `x`, or `weights[3]` for a list's element.
    pub fn label(&self) -> Label {
        Label {
            name: self.name,
            index: self.index,
        }
    }

    pub fn dim(&self, dim: usize) -> i64 {
        self.shape[dim]
    }

    pub fn stride(&self, dim: usize) -> i64 {
        self.strides[dim]
    }

    /// The extent as the kernel's `i32`; `tensor_arg` checked that it fits.
    pub fn shape_i32(&self, dim: usize) -> i32 {
        self.shape[dim] as i32
    }

    /// The stride as the kernel's `i32`; `tensor_arg` checked that it fits.
    pub fn stride_i32(&self, dim: usize) -> i32 {
        self.strides[dim] as i32
    }

    pub fn is_empty(&self) -> bool {
        self.shape[..self.rank].contains(&0)
    }

    /// One past the last byte the array's elements occupy (its extents and strides
    /// from its address); saturates rather than wrapping.
    pub fn byte_end(&self) -> u64 {
        let span = (0..self.rank).fold(1_i64, |span, dim| {
            span.saturating_add(
                (self.shape[dim] - 1)
                    .max(0)
                    .saturating_mul(self.strides[dim]),
            )
        });
        let bytes = span.saturating_mul(self.dtype.itemsize());
        self.data
            .saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX))
    }

    pub fn require_dim(&self, dim: usize, expected: i64, what: &str) -> AbiResult<()> {
        if self.shape[dim] != expected {
            return fail(
                Status::BadShape,
                format!(
                    "`{}.shape[{dim}]` = {} but {what} = {expected}",
                    self.label(),
                    self.shape[dim]
                ),
            );
        }
        Ok(())
    }

    /// The innermost dimension in memory must have unit stride (extents of 0 or 1
    /// excepted, whose stride is never used).
    pub fn require_unit_stride(&self, dim: usize) -> AbiResult<()> {
        if self.strides[dim] != 1 && self.shape[dim] > 1 {
            return fail(
                Status::BadStride,
                format!(
                    "`{}.strides[{dim}]` = {}: the kernel needs unit stride there",
                    self.label(),
                    self.strides[dim]
                ),
            );
        }
        Ok(())
    }

    pub fn require_dtype(&self, allowed: &[Dtype]) -> AbiResult<()> {
        if allowed.contains(&self.dtype) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|dtype| dtype.name()).collect();
        fail(
            Status::UnsupportedDtype,
            format!(
                "`{}` is {}; the port takes {}",
                self.label(),
                self.dtype.name(),
                names.join(", ")
            ),
        )
    }

    /// A base-address alignment (bytes) the port's kernel assumes.
    pub fn require_address_divisible(&self, bytes: u64) -> AbiResult<()> {
        if !self.data.is_multiple_of(bytes) && !self.is_empty() {
            return fail(
                Status::Misaligned,
                format!(
                    "`{}` at {:#x} is not {bytes}-byte aligned, as the port assumes",
                    self.label(),
                    self.data
                ),
            );
        }
        Ok(())
    }

    /// A divisibility of an extent or stride (elements) the port's kernel assumes.
    pub fn require_divisible(&self, what: Extent, dim: usize, divisor: i64) -> AbiResult<()> {
        let value = match what {
            Extent::Shape => self.shape[dim],
            Extent::Stride => self.strides[dim],
        };
        if value % divisor != 0 {
            let field = match what {
                Extent::Shape => "shape",
                Extent::Stride => "strides",
            };
            return fail(
                Status::Misaligned,
                format!(
                    "`{}.{field}[{dim}]` = {value} is not divisible by {divisor}, as the port assumes",
                    self.label()
                ),
            );
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Extent {
    Shape,
    Stride,
}

/// Arrays that share one element type generic must agree on it.
pub fn require_same_dtype(arrays: &[&TensorArg], generic: &str) -> AbiResult<Dtype> {
    let first = arrays[0];
    for other in &arrays[1..] {
        if other.dtype != first.dtype {
            return fail(
                Status::UnsupportedDtype,
                format!(
                    "`{}` is {} but `{}` is {}; both take the element type {generic}",
                    first.label(),
                    first.dtype.name(),
                    other.label(),
                    other.dtype.name()
                ),
            );
        }
    }
    Ok(first.dtype)
}

// --- lists of arrays -------------------------------------------------------------------

/// One checked list-of-arrays argument: its elements (each checked as an array
/// argument, all of one dtype) and the caller's device table the kernel reads
/// them from, an int64 tensor of shape (len, 1 + 2 * rank) whose row i is
/// element i's address, extents and strides (cuTile Python's list layout).
#[derive(Debug, Clone)]
pub struct ListArg {
    pub name: &'static str,
    /// The elements' common dtype.
    pub dtype: Dtype,
    pub elements: Vec<TensorArg>,
    pub table: TensorArg,
    rank: usize,
}

/// Reads and checks a list: its element descriptors, their number and its table;
/// no CUDA call.
///
/// # Safety
/// `elements` must be null or point to `len` readable `Tensor`s; `table` must be
/// null or point to a readable `Tensor`.
pub unsafe fn list_arg(
    elements: *const Tensor,
    len: i32,
    table: *const Tensor,
    names: [&'static str; 3],
    rank: usize,
) -> AbiResult<ListArg> {
    let [name, len_name, table_name] = names;
    if elements.is_null() {
        return fail(
            Status::NullDescriptor,
            format!("the element array `{name}` is null"),
        );
    }
    let Ok(count @ 1..) = usize::try_from(len) else {
        return fail(
            Status::BadShape,
            format!("`{len_name}` = {len}: a list holds at least one array"),
        );
    };
    let mut checked: Vec<TensorArg> = Vec::with_capacity(count);
    for index in 0..count {
        let label = Label {
            name,
            index: Some(index),
        };
        // SAFETY: the caller passes `len` readable descriptors at `elements`.
        let element = unsafe { read_tensor(elements.add(index), label, rank)? };
        if let Some(first) = checked.first().filter(|first| first.dtype != element.dtype) {
            return fail(
                Status::UnsupportedDtype,
                format!(
                    "`{}` is {} but `{}` is {}: a list's arrays share one dtype",
                    element.label(),
                    element.dtype.name(),
                    first.label(),
                    first.dtype.name()
                ),
            );
        }
        checked.push(element);
    }
    // SAFETY: the caller passes null or a readable descriptor.
    let table = unsafe { tensor_arg(table, table_name, 2)? };
    check_table(&table, len, rank)?;
    Ok(ListArg {
        name,
        dtype: checked[0].dtype,
        elements: checked,
        table,
        rank,
    })
}

/// The table is a contiguous int64 (len, 1 + 2 * rank) tensor.
fn check_table(table: &TensorArg, len: i32, rank: usize) -> AbiResult<()> {
    if table.dtype != Dtype::Int64 {
        return fail(
            Status::UnsupportedDtype,
            format!(
                "`{}` is {}; a list's table is int64",
                table.name,
                table.dtype.name()
            ),
        );
    }
    let columns = 1 + 2 * rank as i64;
    let shape = [table.dim(0), table.dim(1)];
    if shape != [i64::from(len), columns] {
        return fail(
            Status::BadShape,
            format!(
                "`{}` has shape {shape:?}; the table of {len} arrays of rank {rank} is [{len}, {columns}]",
                table.name
            ),
        );
    }
    table.require_unit_stride(1)?;
    if table.dim(0) > 1 && table.stride(0) != columns {
        return fail(
            Status::BadStride,
            format!(
                "`{}.strides[0]` = {}: the table's rows must be contiguous ({columns})",
                table.name,
                table.stride(0)
            ),
        );
    }
    Ok(())
}

impl ListArg {
    /// The number of arrays, as the kernel's `i32` (`list_arg` took it as one).
    pub fn len_i32(&self) -> i32 {
        self.elements.len() as i32
    }

    pub fn len(&self) -> i64 {
        self.elements.len() as i64
    }

    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    /// The first element: it binds the list's dimension symbols and its dtype.
    pub fn first(&self) -> &TensorArg {
        &self.elements[0]
    }

    /// The first element's extent; `require_dim` holds the others to it.
    pub fn dim(&self, dim: usize) -> i64 {
        self.first().dim(dim)
    }

    pub fn require_dim(&self, dim: usize, expected: i64, what: &str) -> AbiResult<()> {
        self.elements
            .iter()
            .try_for_each(|element| element.require_dim(dim, expected, what))
    }

    pub fn require_len(&self, expected: i64, what: &str) -> AbiResult<()> {
        if self.len() != expected {
            return fail(
                Status::BadShape,
                format!(
                    "`{}` holds {} arrays but {what} = {expected}",
                    self.name,
                    self.len()
                ),
            );
        }
        Ok(())
    }

    pub fn require_unit_stride(&self, dim: usize) -> AbiResult<()> {
        self.elements
            .iter()
            .try_for_each(|element| element.require_unit_stride(dim))
    }

    pub fn require_dtype(&self, allowed: &[Dtype]) -> AbiResult<()> {
        self.first().require_dtype(allowed)
    }

    pub fn require_address_divisible(&self, bytes: u64) -> AbiResult<()> {
        self.elements
            .iter()
            .try_for_each(|element| element.require_address_divisible(bytes))
    }

    pub fn require_divisible(&self, what: Extent, dim: usize, divisor: i64) -> AbiResult<()> {
        self.elements
            .iter()
            .try_for_each(|element| element.require_divisible(what, dim, divisor))
    }

    /// The table's own address, when the port's kernel states a divisibility of it.
    pub fn require_table_divisible(&self, bytes: u64) -> AbiResult<()> {
        self.table.require_address_divisible(bytes)
    }

    pub fn require_len_divisible(&self, divisor: i64) -> AbiResult<()> {
        if self.len() % divisor != 0 {
            return fail(
                Status::Misaligned,
                format!(
                    "`{}` holds {} arrays, not a multiple of {divisor}, as the port assumes",
                    self.name,
                    self.len()
                ),
            );
        }
        Ok(())
    }

    /// A list's fact is the weakest of its elements' (the launch facts are powers
    /// of two, so the least).
    fn weakest(&self, fact: impl Fn(&TensorArg) -> i64) -> i64 {
        self.elements.iter().map(fact).min().unwrap_or(1)
    }

    pub fn address_fact(&self) -> i64 {
        self.weakest(|element| address_fact(element.data))
    }

    pub fn shape_fact(&self, dim: usize) -> i64 {
        self.weakest(|element| shape_fact(element.dim(dim)))
    }

    pub fn stride_fact(&self, dim: usize) -> i64 {
        self.weakest(|element| stride_fact(element.stride(dim), element.dtype.itemsize()))
    }

    /// The table's rows, as the kernel reads them: each element's address, extents
    /// and strides (in elements).
    pub fn table_rows(&self) -> Vec<i64> {
        let mut rows = Vec::with_capacity(self.elements.len() * (1 + 2 * self.rank));
        for element in &self.elements {
            // The kernel reads the address column as a 64-bit pattern.
            rows.push(element.data as i64);
            rows.extend_from_slice(&element.shape[..self.rank]);
            rows.extend_from_slice(&element.strides[..self.rank]);
        }
        rows
    }

    /// The elements and the table: every array whose memory the device check covers.
    pub fn tensors(&self) -> impl Iterator<Item = &TensorArg> {
        self.elements.iter().chain(std::iter::once(&self.table))
    }
}

/// The arrays of a call and the elements and tables of its lists, for the device check.
pub fn with_lists<'a>(arrays: &[&'a TensorArg], lists: &[&'a ListArg]) -> Vec<&'a TensorArg> {
    let mut all = arrays.to_vec();
    for list in lists {
        all.extend(list.tensors());
    }
    all
}

// --- the arithmetic of port-spec expressions: spec_arith.rs -----------------------------

/// A port-spec expression that cannot be computed refuses the call as a bad shape.
impl From<ExprError> for AbiError {
    fn from(error: ExprError) -> Self {
        AbiError {
            status: Status::BadShape,
            message: error.0,
        }
    }
}

// --- generics, grid and plan -----------------------------------------------------------

/// A generic argument of a kernel entry, as the launch passes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Generic {
    Int(i64),
    Bool(bool),
    Element(Dtype),
}

impl Generic {
    /// The argument as the launcher takes it: an element type by its cutile name.
    fn launched(self) -> AbiResult<proven::Generic> {
        Ok(match self {
            Generic::Int(value) => proven::Generic::Int(value),
            Generic::Bool(value) => proven::Generic::Bool(value),
            Generic::Element(dtype) => match dtype.rust_element() {
                Some(name) => proven::Generic::Element(name),
                None => {
                    return fail(
                        Status::UnsupportedDtype,
                        format!("{} has no cutile element type", dtype.name()),
                    )
                }
            },
        })
    }

    fn plan_value(self) -> i64 {
        match self {
            Generic::Int(value) => value,
            Generic::Bool(value) => i64::from(value),
            Generic::Element(dtype) => dtype as i64,
        }
    }
}

/// The launch grid, or None when a dimension is zero (nothing to launch).
pub fn launch_grid(grid: [i64; 3]) -> AbiResult<Option<(u32, u32, u32)>> {
    const LIMITS: [i64; 3] = [(1 << 31) - 1, 65_535, 65_535];
    for (axis, (&extent, &limit)) in grid.iter().zip(LIMITS.iter()).enumerate() {
        if extent < 0 || extent > limit {
            return fail(
                Status::BadShape,
                format!("grid[{axis}] = {extent} is outside 0..={limit}"),
            );
        }
    }
    if grid.contains(&0) {
        return Ok(None);
    }
    Ok(Some((grid[0] as u32, grid[1] as u32, grid[2] as u32)))
}

/// Writes what a launch would do into the caller's plan struct.
///
/// # Safety
/// `plan` must be null or valid for writing one `Plan`.
pub unsafe fn write_plan(
    plan: *mut Plan,
    variant: usize,
    grid: [i64; 3],
    generics: &[Generic],
) -> AbiResult<()> {
    // SAFETY: the caller passes null or a writable plan.
    let Some(out) = (unsafe { plan.as_mut() }) else {
        return fail(Status::NullDescriptor, "the plan pointer is null");
    };
    if generics.len() > MAX_GENERICS {
        return fail(
            Status::Launch,
            format!(
                "the plan has {} generic arguments, more than MAX_GENERICS ({MAX_GENERICS})",
                generics.len()
            ),
        );
    }
    let grid = launch_grid(grid)?.unwrap_or((0, 0, 0));
    out.variant = variant as i32;
    out.num_generics = generics.len() as i32;
    out.grid = [grid.0, grid.1, grid.2];
    out.reserved = 0;
    out.generics = [0; MAX_GENERICS];
    for (slot, generic) in out.generics.iter_mut().zip(generics) {
        *slot = generic.plan_value();
    }
    Ok(())
}

// --- the device ------------------------------------------------------------------------

fn driver(call: &str, code: sys::CUresult) -> AbiResult<()> {
    if code == sys::cudaError_enum_CUDA_SUCCESS {
        return Ok(());
    }
    fail(
        Status::Device,
        format!("{call} failed with CUDA error {code}"),
    )
}

// --- verified allocations --------------------------------------------------------------

/// A device allocation the driver confirmed: the addresses `start..end` on `ordinal`.
#[derive(Debug, Clone, Copy)]
struct VerifiedRange {
    start: u64,
    end: u64,
    ordinal: usize,
    /// Launches that trusted it since the driver last confirmed it.
    uses: u32,
}

/// Launches a verified range is trusted for before the driver is asked again: a range
/// freed behind the launcher's back is trusted for a bounded number of calls only.
pub const REVERIFY_AFTER: u32 = 4096;

/// The allocations of one CUDA context that the driver confirmed as device memory,
/// disjoint and sorted by address. An array whose bytes lie inside one of them needs
/// no driver call. Staleness (memory freed, its addresses reused): a range is
/// trusted only for arrays wholly inside it; a newly confirmed allocation replaces
/// every range it overlaps (they were freed); a range the driver no longer confirms
/// is forgotten; and each range is confirmed again after `REVERIFY_AFTER` launches.
#[derive(Debug, Default)]
pub struct AllocationRanges {
    ranges: Vec<VerifiedRange>,
}

impl AllocationRanges {
    /// The device of a trusted range holding all of `start..end`; None: ask the driver.
    pub fn lookup(&mut self, start: u64, end: u64) -> Option<usize> {
        let index = self
            .ranges
            .partition_point(|range| range.start <= start)
            .checked_sub(1)?;
        let range = &mut self.ranges[index];
        if end > range.end || range.uses >= REVERIFY_AFTER {
            return None;
        }
        range.uses += 1;
        Some(range.ordinal)
    }

    /// Records an allocation the driver just confirmed, in place of the ones it overlaps.
    pub fn insert(&mut self, start: u64, end: u64, ordinal: usize) {
        self.ranges
            .retain(|range| range.end <= start || range.start >= end);
        let at = self.ranges.partition_point(|range| range.start < start);
        let range = VerifiedRange {
            start,
            end,
            ordinal,
            uses: 0,
        };
        self.ranges.insert(at, range);
    }

    /// Drops every range holding `address` (the driver no longer confirms it).
    pub fn forget(&mut self, address: u64) {
        self.ranges
            .retain(|range| address < range.start || address >= range.end);
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Verified allocations per CUDA context (its handle): a context's allocations die
/// with it, and another context at the same handle starts empty only once the old
/// one's ranges are replaced, which `insert` does as addresses are confirmed again.
type RangesByContext = Mutex<HashMap<usize, AllocationRanges>>;

fn verified_ranges() -> std::sync::MutexGuard<'static, HashMap<usize, AllocationRanges>> {
    static RANGES: OnceLock<RangesByContext> = OnceLock::new();
    RANGES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The device of an array's data: from a verified range of `context`, else from the
/// driver (one `cuPointerGetAttributes`, whose range is then kept).
unsafe fn verified_device(context: usize, array: &TensorArg) -> AbiResult<usize> {
    let end = array.byte_end();
    if let Some(ordinal) = verified_ranges()
        .entry(context)
        .or_default()
        .lookup(array.data, end)
    {
        return Ok(ordinal);
    }
    // SAFETY: forwarded from the caller.
    match unsafe { pointer_range(array) } {
        Ok((start, size, ordinal)) => {
            let mut ranges = verified_ranges();
            let ranges = ranges.entry(context).or_default();
            // Without a range (some allocators report none) the check holds for this call.
            if size > 0 && end <= start.saturating_add(size) {
                ranges.insert(start, start.saturating_add(size), ordinal);
            }
            Ok(ordinal)
        }
        Err(error) => {
            verified_ranges()
                .entry(context)
                .or_default()
                .forget(array.data);
            Err(error)
        }
    }
}

/// The context a launch on `stream` runs in, read once per call: the stream's own,
/// or the current one for a default stream (0 when none is current).
unsafe fn launch_context(stream: *mut c_void) -> AbiResult<sys::CUcontext> {
    let mut context: sys::CUcontext = std::ptr::null_mut();
    if is_default_stream(stream) {
        // SAFETY: a valid out-pointer.
        driver("cuCtxGetCurrent", unsafe {
            sys::cuCtxGetCurrent(&mut context)
        })?;
    } else {
        // SAFETY: the caller passes a live stream handle.
        driver("cuStreamGetCtx", unsafe {
            sys::cuStreamGetCtx(stream as sys::CUstream, &mut context)
        })?;
    }
    Ok(context)
}

/// Finds the device of the arrays' data and checks the stream belongs to it.
///
/// # Safety
/// `stream` must be null, a legacy/per-thread default stream handle, or a live CUstream.
pub unsafe fn device_for(arrays: &[&TensorArg], stream: *mut c_void) -> AbiResult<Device> {
    if !sys::is_cuda_driver_available() {
        let reason = sys::cuda_driver_load_error()
            .map(|error| error.to_string())
            .unwrap_or_default();
        return fail(Status::Device, format!("no CUDA driver: {reason}"));
    }
    initialised_driver()?;
    // SAFETY: forwarded from the caller.
    let context = unsafe { launch_context(stream)? };
    let stream_ordinal = unsafe { stream_device(stream, context)? };
    let mut ordinal: Option<usize> = None;
    // An in-place operator passes one address twice: it is asked about once.
    let mut asked: Vec<u64> = Vec::with_capacity(arrays.len());
    for array in arrays.iter().filter(|array| !array.is_empty()) {
        if asked.contains(&array.data) {
            continue;
        }
        asked.push(array.data);
        let found = unsafe { verified_device(context as usize, array)? };
        match ordinal {
            Some(first) if first != found => {
                return fail(
                    Status::Device,
                    format!(
                        "`{}` is on device {found} but `{}` is on device {first}",
                        array.label(),
                        arrays[0].label()
                    ),
                )
            }
            _ => ordinal = Some(found),
        }
    }
    let ordinal = ordinal.or(stream_ordinal).unwrap_or(0);
    if let Some(stream_ordinal) = stream_ordinal {
        if stream_ordinal != ordinal {
            return fail(
                Status::Device,
                format!("the stream is on device {stream_ordinal}, the data on device {ordinal}"),
            );
        }
    }
    let current_context = if is_default_stream(stream) {
        context
    } else {
        std::ptr::null_mut()
    };
    Ok(Device::new(ordinal, current_context)?)
}

/// The allocation holding an array's data (its start, its size in bytes) and its
/// device ordinal; host memory (pageable or pinned) is refused.
unsafe fn pointer_range(array: &TensorArg) -> AbiResult<(u64, u64, usize)> {
    if array.data == 0 {
        return fail(
            Status::Device,
            format!("`{}` has a null data pointer", array.label()),
        );
    }
    let mut memory_type: u32 = 0;
    let mut ordinal: i32 = -1;
    let mut start: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attributes = [
        sys::CUpointer_attribute_enum_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        sys::CUpointer_attribute_enum_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        sys::CUpointer_attribute_enum_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        sys::CUpointer_attribute_enum_CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut values: [*mut c_void; 4] = [
        (&mut memory_type as *mut u32).cast(),
        (&mut ordinal as *mut i32).cast(),
        (&mut start as *mut sys::CUdeviceptr).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: every output slot is live and sized as the driver documents.
    let code = unsafe {
        sys::cuPointerGetAttributes(
            4,
            attributes.as_mut_ptr(),
            values.as_mut_ptr(),
            array.data as sys::CUdeviceptr,
        )
    };
    let on_device = memory_type == sys::CUmemorytype_enum_CU_MEMORYTYPE_DEVICE
        || memory_type == sys::CUmemorytype_enum_CU_MEMORYTYPE_UNIFIED;
    if code != sys::cudaError_enum_CUDA_SUCCESS || !on_device || ordinal < 0 {
        return fail(
            Status::Device,
            format!(
                "`{}` at {:#x} is not CUDA device memory (driver code {code}, memory type {memory_type})",
                array.label(),
                array.data
            ),
        );
    }
    Ok((start as u64, size as u64, ordinal as usize))
}

/// The legacy (1) and per-thread (2) default stream handles, and null, name no
/// particular device: they run in the current context.
fn is_default_stream(stream: *mut c_void) -> bool {
    (stream as usize) <= 2
}

/// `cuInit` once per process: every later call reuses its outcome (one driver
/// call less per launch).
fn initialised_driver() -> AbiResult<()> {
    static INIT: OnceLock<sys::CUresult> = OnceLock::new();
    // SAFETY: plain driver call.
    let code = *INIT.get_or_init(|| unsafe { sys::cuInit(0) });
    driver("cuInit", code)
}

/// The driver's handles of the visible devices, by ordinal, read once.
fn device_handles() -> AbiResult<&'static [sys::CUdevice]> {
    static HANDLES: OnceLock<Result<Vec<sys::CUdevice>, AbiError>> = OnceLock::new();
    let handles = HANDLES.get_or_init(|| {
        let mut count: i32 = 0;
        // SAFETY: plain driver call.
        driver("cuDeviceGetCount", unsafe {
            sys::cuDeviceGetCount(&mut count)
        })?;
        (0..count)
            .map(|ordinal| {
                let mut handle: sys::CUdevice = 0;
                // SAFETY: plain driver call over valid ordinals.
                driver("cuDeviceGet", unsafe {
                    sys::cuDeviceGet(&mut handle, ordinal)
                })?;
                Ok(handle)
            })
            .collect()
    });
    match handles {
        Ok(handles) => Ok(handles),
        Err(error) => Err(error.clone()),
    }
}

/// The device of a stream, through its context (`launch_context`): `cuStreamGetDevice`
/// is refused on a stream that is being captured into a CUDA graph, these are not.
unsafe fn stream_device(stream: *mut c_void, context: sys::CUcontext) -> AbiResult<Option<usize>> {
    if is_default_stream(stream) {
        return Ok(None);
    }
    let mut device: sys::CUdevice = 0;
    // SAFETY: the context was just read from a live stream.
    driver("cuCtxGetDevice_v2", unsafe {
        sys::cuCtxGetDevice_v2(&mut device, context)
    })?;
    match device_handles()?
        .iter()
        .position(|&handle| handle == device)
    {
        Some(ordinal) => Ok(Some(ordinal)),
        None => fail(Status::Device, "the stream's device is not visible"),
    }
}

/// The number of SMs of the launch device (the `num_sms` of port-spec expressions),
/// asked of the driver once per device: a device's SM count never changes.
pub fn num_sms(device: &Device) -> AbiResult<i64> {
    static COUNTS: OnceLock<Mutex<HashMap<usize, i64>>> = OnceLock::new();
    let counts = COUNTS.get_or_init(|| Mutex::new(HashMap::new()));
    let known = counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&device.ordinal)
        .copied();
    if let Some(count) = known {
        return Ok(count);
    }
    let mut count: i32 = 0;
    // SAFETY: plain driver call on a device the context belongs to.
    driver("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(
            &mut count,
            sys::CUdevice_attribute_enum_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            device.context().cu_device(),
        )
    })?;
    counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(device.ordinal, i64::from(count));
    Ok(i64::from(count))
}

/// The rows last written to each table the library owns (`tileport_table_owned`), by
/// table address: the stream they were written on and the rows, none before the first
/// write. Only the library's calls write such a table, so rows already written on a
/// stream are still there for the next kernel on it.
type WrittenRows = Option<(usize, Vec<i64>)>;
type OwnedTables = Mutex<HashMap<u64, WrittenRows>>;

fn owned_tables() -> std::sync::MutexGuard<'static, HashMap<u64, WrittenRows>> {
    static TABLES: OnceLock<OwnedTables> = OnceLock::new();
    TABLES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Declares the table at `address` the library's own: allocated for the library's
/// calls and written by nothing else until `tileport_table_released`. Its rows are
/// then written only when they change. A caller's own table is written on every call.
#[no_mangle]
pub extern "C" fn tileport_table_owned(address: u64) -> i32 {
    guard("tileport_table_owned", || {
        owned_tables().insert(address, None);
        Ok(())
    })
}

/// Forgets the table at `address`, before its memory goes back to the allocator:
/// whatever takes that memory next is not a table whose rows are known.
#[no_mangle]
pub extern "C" fn tileport_table_released(address: u64) -> i32 {
    guard("tileport_table_released", || {
        owned_tables().remove(&address);
        Ok(())
    })
}

/// Writes the lists' table rows into their tables on the caller's stream, so the kernel
/// launched next on it reads them: every row of a caller's table, and of a table the
/// library owns only rows that differ from the last ones written to it on this stream
/// (a repeated call on the same tensors writes nothing). The rows are in host memory
/// this call owns; the driver has staged a pageable source by the time the copy call
/// returns, so they may go when it does. A capturing stream is refused: the graph would
/// replay a copy from host memory that no longer exists, or read a table a later call
/// rewrites.
///
/// # Safety
/// Each table's address must be device memory of `device` that stays valid until the
/// kernel has run on `stream`.
pub unsafe fn write_tables(
    lists: &[&ListArg],
    device: &Device,
    stream: *mut c_void,
) -> AbiResult<()> {
    let mut capture = sys::CUstreamCaptureStatus_enum_CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a live stream handle (the caller's) and a valid out-pointer.
    driver("cuStreamIsCapturing", unsafe {
        sys::cuStreamIsCapturing(stream as sys::CUstream, &mut capture)
    })?;
    if capture != sys::CUstreamCaptureStatus_enum_CU_STREAM_CAPTURE_STATUS_NONE {
        return fail(
            Status::Launch,
            format!(
                "`{}`: a list's table cannot be written while the stream is captured into a CUDA graph",
                lists.first().map_or("", |list| list.name)
            ),
        );
    }
    let mut owned = owned_tables();
    let mut bound = device.is_current();
    for list in lists {
        let rows = list.table_rows();
        let known = owned.get_mut(&list.table.data);
        if let Some(Some((written_on, written))) = &known {
            if *written_on == stream as usize && *written == rows {
                continue;
            }
        }
        if !bound {
            device.make_current()?;
            bound = true;
        }
        // SAFETY: the table holds `rows.len()` int64 values (checked by `list_arg`) on
        // `device`, now current; the source is read before the call returns.
        driver("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                list.table.data,
                rows.as_ptr().cast(),
                std::mem::size_of_val(rows.as_slice()),
                stream as sys::CUstream,
            )
        })
        .map_err(|error| AbiError {
            status: Status::Launch,
            message: format!(
                "writing the table `{}` failed: {}",
                list.table.name, error.message
            ),
        })?;
        if let Some(slot) = known {
            *slot = Some((stream as usize, rows));
        }
    }
    Ok(())
}

/// Enqueues `entry` on the caller's stream (`proven::launch_proven`, the one
/// launcher of every port) with the call's generic arguments.
///
/// # Safety
/// As `proven::launch_proven`: `params` are exactly the entry's parameters, and
/// their device memory stays valid until the kernel has run on `stream`.
pub unsafe fn launch_proven(
    entry: &ProvenEntry,
    generics: &[Generic],
    grid: (u32, u32, u32),
    device: &Device,
    stream: *mut c_void,
    params: &mut [*mut c_void],
) -> AbiResult<()> {
    let generics = generics
        .iter()
        .map(|generic| generic.launched())
        .collect::<AbiResult<Vec<_>>>()?;
    // SAFETY: forwarded from the caller.
    unsafe { proven::launch_proven(entry, &generics, grid, device, stream, params) }?;
    Ok(())
}
