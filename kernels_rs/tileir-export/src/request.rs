//! The JSON request and response of the exporter. The Python side mirrors
//! these in `schemas/export.py`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Specialisation facts of one tensor parameter, as cuTile Python records them
/// for a launch (`ArrayConstraint`). Divisibility of shapes and strides is in
/// elements, of the base pointer in bytes.
#[derive(Debug, Deserialize)]
pub struct TensorFacts {
    pub shape_div: Vec<i32>,
    pub stride_div: Vec<i32>,
    pub stride_one: Vec<bool>,
    pub base_ptr_div: i32,
    #[serde(default = "default_true")]
    pub elements_disjoint: bool,
}

fn default_true() -> bool {
    true
}

/// Optimisation hints that end up in the entry's `optimization_hints`.
#[derive(Debug, Default, Deserialize)]
pub struct Hints {
    pub occupancy: Option<i32>,
    pub num_cta_in_cga: Option<i32>,
    pub num_worker_warps_per_cta: Option<i32>,
}

#[derive(Debug, Deserialize)]
pub struct ExportRequest {
    /// Rust source file holding one `#[cutile::module] mod NAME { ... }`.
    pub source: String,
    /// Module name; may be omitted when the file holds exactly one module.
    pub module: Option<String>,
    /// The `#[cutile::entry]` function to compile.
    pub kernel: String,
    #[serde(default)]
    pub generics: Vec<String>,
    #[serde(default)]
    pub strides: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    pub spec_args: BTreeMap<String, TensorFacts>,
    /// Divisibility (power of two) of integer scalar and raw-pointer parameters.
    #[serde(default)]
    pub scalar_hints: BTreeMap<String, i32>,
    pub grid: Option<[u32; 3]>,
    #[serde(default)]
    pub hints: Hints,
    #[serde(default = "default_target")]
    pub target: String,
    /// Tile IR bytecode version, "13.3" or "13.4".
    #[serde(default = "default_version")]
    pub bytecode_version: String,
    /// Where to write the bytecode; nothing is written when absent.
    pub bytecode_out: Option<String>,
    /// Where to write cutile's own IR text; nothing is written when absent.
    pub ir_out: Option<String>,
}

fn default_target() -> String {
    "sm_90".to_string()
}

fn default_version() -> String {
    "13.3".to_string()
}

#[derive(Debug, Serialize)]
pub struct ExportResponse {
    pub ok: bool,
    /// "request", "source", "compile" or "write" when `ok` is false.
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub ir_text: Option<String>,
    pub bytecode_out: Option<String>,
    pub elapsed_ms: f64,
}

impl ExportResponse {
    pub fn failure(kind: &str, message: String) -> Self {
        Self {
            ok: false,
            error_kind: Some(kind.to_string()),
            error: Some(message),
            ir_text: None,
            bytecode_out: None,
            elapsed_ms: 0.0,
        }
    }
}
