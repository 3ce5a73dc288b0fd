//! Launching a port's entry as the kernel writer proved it: one launcher for every
//! port tileport delivers, its own kernel library's and TileGym's backend alike
//! (hand-written; copied as it is into a TileGym checkout as `tileport_proven.rs`).
//!
//! cutile-rs's generated launcher compiles every launch with an `assume div_by`
//! for each integer and pointer argument, as far as the argument's value allows
//! (docs/UPSTREAM_GAPS.md, G17): facts the reference does not state, so other
//! machine code than the code proven against it. A proven entry is compiled by
//! cutile's own JIT and kernel cache with no such hint (the port states the
//! reference's facts itself, through its generic arguments), once per device and
//! generic arguments, and launched by `cuLaunchKernel` on the caller's stream, as
//! cutile launches it, without its per-call bookkeeping.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use cutile::cuda_async::device_context::with_device;
use cutile::cuda_async::device_operation::ExecutionContext;
use cutile::cuda_core::sys;
use cutile::cuda_core::{Context, Function, Stream};
use cutile::tile_kernel::{compile_from_context, CompileOptions, ModuleAstFn};

/// Why a launch could not be made: no device, a failed compile, a failed launch.
#[derive(Debug, Clone)]
pub struct LaunchError {
    pub kind: LaunchFailure,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchFailure {
    Device,
    Compile,
    Launch,
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn failure<T>(kind: LaunchFailure, message: String) -> Result<T, LaunchError> {
    Err(LaunchError { kind, message })
}

/// A generic argument of an entry: an integer or bool const generic, or the element
/// type as cutile names it (`f32`, `bf16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Generic {
    Int(i64),
    Bool(bool),
    Element(&'static str),
}

impl Generic {
    fn text(self) -> String {
        match self {
            Generic::Int(value) => value.to_string(),
            Generic::Bool(value) => value.to_string(),
            Generic::Element(name) => name.to_string(),
        }
    }
}

/// The device a launch runs on, with its primary context (the one torch and cuTile
/// Python use).
pub struct Device {
    pub ordinal: usize,
    context: Arc<Context>,
    /// The context current on the calling thread when the call read it: the launch
    /// binds the device's only where it is another (torch keeps the device's current
    /// on its threads, so a launch rarely pays for the switch).
    current_context: sys::CUcontext,
}

impl Device {
    /// Device `ordinal`; `current_context` is the calling thread's context (null
    /// where it has none).
    pub fn new(ordinal: usize, current_context: sys::CUcontext) -> Result<Self, LaunchError> {
        let context = with_device(ordinal, Arc::clone).map_err(|error| LaunchError {
            kind: LaunchFailure::Device,
            message: format!("cannot open device {ordinal}: {error}"),
        })?;
        Ok(Self {
            ordinal,
            context,
            current_context,
        })
    }

    /// Device `device_id` (a CUDA ordinal; a negative one is no device) for a launch
    /// from the calling thread, with the thread's current context (a launch on the
    /// legacy default stream runs in it).
    pub fn for_launch(device_id: i32) -> Result<Self, LaunchError> {
        let Ok(ordinal) = usize::try_from(device_id) else {
            return failure(
                LaunchFailure::Device,
                format!("invalid device id {device_id}"),
            );
        };
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; no context leaves `current` null.
        let code = unsafe { sys::cuCtxGetCurrent(&mut current) };
        if code != sys::cudaError_enum_CUDA_SUCCESS {
            return failure(
                LaunchFailure::Device,
                format!("cuCtxGetCurrent returned CUDA error {code}"),
            );
        }
        Self::new(ordinal, current)
    }

    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Whether the device's context is the calling thread's.
    pub fn is_current(&self) -> bool {
        self.current_context == self.context.cu_ctx()
    }

    /// Makes the device's context the calling thread's.
    pub fn make_current(&self) -> Result<(), LaunchError> {
        self.context.bind_to_thread().map_err(|error| LaunchError {
            kind: LaunchFailure::Device,
            message: format!("cannot make device {} current: {error}", self.ordinal),
        })
    }
}

/// Borrowed stream wrappers, one per (device, handle), kept for the life of the
/// process: dropping one would query the stream, which a CUDA graph capture forbids.
type StreamCache = Mutex<HashMap<(usize, usize), Arc<Stream>>>;

fn borrowed_stream(device: &Device, stream: *mut c_void) -> Arc<Stream> {
    static STREAMS: OnceLock<StreamCache> = OnceLock::new();
    let streams = STREAMS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut streams = streams
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    streams
        .entry((device.ordinal, stream as usize))
        // SAFETY: the caller owns the stream and keeps it alive across the call;
        // the wrapper never destroys it (borrowed, not owned).
        .or_insert_with(|| unsafe { Stream::borrow_raw(stream, &device.context) })
        .clone()
}

/// One entry of a port's kernel module, compiled per device and generic arguments.
pub struct ProvenEntry {
    module_ast: ModuleAstFn,
    module: &'static str,
    function: &'static str,
    source_hash: &'static str,
    /// Compiled forms by the hash of (device, generic arguments): a call finds its own
    /// without comparing every form a process compiled (a sweep compiles dozens).
    compiled: Mutex<BTreeMap<u64, Vec<CompiledEntry>>>,
}

struct CompiledEntry {
    ordinal: usize,
    generics: Vec<Generic>,
    function: Arc<Function>,
}

impl ProvenEntry {
    pub const fn new(
        module_ast: ModuleAstFn,
        module: &'static str,
        function: &'static str,
        source_hash: &'static str,
    ) -> Self {
        Self {
            module_ast,
            module,
            function,
            source_hash,
            compiled: Mutex::new(BTreeMap::new()),
        }
    }

    /// The entry compiled for this device and these generic arguments: looked up by
    /// value on a repeated call, compiled (through cutile's kernel cache) on the first.
    fn function(
        &self,
        generics: &[Generic],
        device: &Device,
        stream: *mut c_void,
    ) -> Result<Arc<Function>, LaunchError> {
        let mut hasher = DefaultHasher::new();
        (device.ordinal, generics).hash(&mut hasher);
        let key = hasher.finish();
        let mut compiled = self
            .compiled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let forms = compiled.entry(key).or_default();
        if let Some(found) = forms
            .iter()
            .find(|entry| entry.ordinal == device.ordinal && entry.generics == generics)
        {
            return Ok(Arc::clone(&found.function));
        }
        let entry = format!("{}_entry", self.function);
        let compile = compile_from_context(
            &ExecutionContext::new(borrowed_stream(device, stream)),
            self.module_ast,
            self.module,
            self.function,
            &entry,
            generics.iter().map(|generic| generic.text()).collect(),
            Vec::new(),
            Vec::new(),
            Vec::new(), // no launch-time hint: the compile the kernel writer proved
            None,
            CompileOptions::default(),
            self.source_hash,
        );
        let (function, validator) = match compile {
            Ok(compiled) => compiled,
            Err(error) => {
                return failure(
                    LaunchFailure::Compile,
                    format!("compiling `{entry}` failed: {error}"),
                )
            }
        };
        if !validator.launch_checks.is_empty() {
            // Checks hoisted out of the kernel need the launcher's tensor extents; a
            // port takes raw pointers and scalars only, so this is not one of ours.
            return failure(
                LaunchFailure::Compile,
                format!("`{entry}` needs launch-time checks this launcher cannot run"),
            );
        }
        forms.push(CompiledEntry {
            ordinal: device.ordinal,
            generics: generics.to_vec(),
            function: Arc::clone(&function),
        });
        Ok(function)
    }
}

/// A kernel parameter as the driver takes it: the address of its value, typed so
/// that the generated launch states each parameter's Rust type.
pub fn param<T: Copy>(value: &T) -> *mut c_void {
    (value as *const T).cast_mut().cast()
}

/// Enqueues `entry` on the caller's stream with `params` (the addresses of its
/// parameters' values, in the entry's order) and returns without waiting.
///
/// # Safety
/// `params` must hold exactly the entry's parameters, each pointing to a value of
/// its type that lives through the call; the pointers they carry must be device
/// memory of `device` that stays valid until the kernel has run on `stream`.
pub unsafe fn launch_proven(
    entry: &ProvenEntry,
    generics: &[Generic],
    grid: (u32, u32, u32),
    device: &Device,
    stream: *mut c_void,
    params: &mut [*mut c_void],
) -> Result<(), LaunchError> {
    let function = entry.function(generics, device, stream)?;
    if !device.is_current() {
        device.make_current()?;
    }
    // SAFETY: the function was loaded in the device's context, now current; the
    // parameters are the entry's own (forwarded from the caller).
    let code = unsafe {
        sys::cuLaunchKernel(
            function.cu_function(),
            grid.0,
            grid.1,
            grid.2,
            1, // a tile kernel's threads are its cubin's own, as cutile launches it
            1,
            1,
            0,
            stream as sys::CUstream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if code != sys::cudaError_enum_CUDA_SUCCESS {
        return failure(
            LaunchFailure::Launch,
            format!("launch failed: cuLaunchKernel returned CUDA error {code}"),
        );
    }
    Ok(())
}
