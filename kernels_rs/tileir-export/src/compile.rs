//! One export: source text to a cutile AST module, then cutile's compile API.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use cutile::compile_api::KernelCompiler;
use cutile::cutile_compiler::ast::{Module, SpanBase};
use cutile::cutile_compiler::hints::CompileOptions;
use cutile::cutile_compiler::specialization::{DivHint, SpecializationBits};
use cutile_ir::bytecode::BytecodeVersion;

use crate::request::{ExportRequest, ExportResponse, TensorFacts};

/// cutile's compiler recurses deeply; its own tests run it on a large stack.
const COMPILER_STACK_BYTES: usize = 64 << 20;

pub fn run_on_large_stack(request: ExportRequest) -> ExportResponse {
    let worker = std::thread::Builder::new()
        .stack_size(COMPILER_STACK_BYTES)
        .spawn(move || {
            std::panic::catch_unwind(AssertUnwindSafe(|| export(&request))).unwrap_or_else(
                |panic| {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "compiler panicked".to_string());
                    ExportResponse::failure("compile", format!("compiler panicked: {message}"))
                },
            )
        });
    match worker.map(|handle| handle.join()) {
        Ok(Ok(response)) => response,
        Ok(Err(_)) => ExportResponse::failure("compile", "compiler thread died".to_string()),
        Err(err) => ExportResponse::failure("compile", format!("cannot start compiler: {err}")),
    }
}

/// Finds the `#[cutile::module]` module in a parsed source file.
fn find_module(file: &syn::File, wanted: Option<&str>) -> Result<syn::ItemMod, String> {
    let modules: Vec<&syn::ItemMod> = file
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(module) if is_cutile_module(module) => Some(module),
            _ => None,
        })
        .collect();
    match wanted {
        Some(name) => modules
            .into_iter()
            .find(|module| module.ident == name)
            .cloned()
            .ok_or_else(|| format!("no #[cutile::module] named `{name}` in the source")),
        None => match modules.as_slice() {
            [only] => Ok((*only).clone()),
            [] => Err("the source holds no #[cutile::module]".to_string()),
            _ => Err("the source holds several modules: name one".to_string()),
        },
    }
}

fn is_cutile_module(module: &syn::ItemMod) -> bool {
    module.attrs.iter().any(is_module_attr)
}

fn load_module(request: &ExportRequest) -> Result<(String, Module), String> {
    let text = std::fs::read_to_string(&request.source)
        .map_err(|err| format!("cannot read {}: {err}", request.source))?;
    let file = syn::parse_file(&text).map_err(|err| {
        let start = err.span().start();
        format!(
            "{}:{}:{}: {err}",
            request.source,
            start.line,
            start.column + 1
        )
    })?;
    let mut item = find_module(&file, request.module.as_deref())?;
    // The macro strips its own attribute before capturing; so do we.
    item.attrs.retain(|attr| !is_module_attr(attr));
    // cutile keeps the module name for the life of the process; the exporter
    // serves a bounded number of requests, so leaking the name is fine.
    let name: &'static str = Box::leak(item.ident.to_string().into_boxed_str());
    let span_base = SpanBase::new(request.source.clone(), 1, 0);
    let mut module = Module::with_span_base(name, item, span_base);
    module.set_absolute_path(name.to_string());
    Ok((name.to_string(), module))
}

fn is_module_attr(attr: &syn::Attribute) -> bool {
    let path = attr.path();
    path.segments.len() == 2
        && path.segments[0].ident == "cutile"
        && path.segments[1].ident == "module"
}

fn specialization(facts: &TensorFacts) -> SpecializationBits {
    let hint = |divisor: i32| DivHint { divisor, max: 16 };
    SpecializationBits {
        shape_div: facts.shape_div.iter().copied().map(hint).collect(),
        stride_div: facts.stride_div.iter().copied().map(hint).collect(),
        stride_one: facts.stride_one.clone(),
        base_ptr_div: hint(facts.base_ptr_div),
        elements_disjoint: facts.elements_disjoint,
    }
}

fn options(request: &ExportRequest) -> CompileOptions {
    CompileOptions {
        occupancy: request.hints.occupancy,
        num_cta_in_cga: request.hints.num_cta_in_cga,
        num_worker_warps_per_cta: request.hints.num_worker_warps_per_cta,
        ..CompileOptions::default()
    }
}

fn parse_version(text: &str) -> Option<BytecodeVersion> {
    match text {
        "13.2" => Some(BytecodeVersion::V13_2),
        "13.3" => Some(BytecodeVersion::V13_3),
        "13.4" => Some(BytecodeVersion::V13_4),
        _ => None,
    }
}

fn export(request: &ExportRequest) -> ExportResponse {
    let started = Instant::now();
    let version = match parse_version(&request.bytecode_version) {
        Some(version) => version,
        None => {
            return ExportResponse::failure(
                "request",
                format!("unknown bytecode version {}", request.bytecode_version),
            )
        }
    };
    let (module_name, module) = match load_module(request) {
        Ok(loaded) => loaded,
        Err(message) => return ExportResponse::failure("source", message),
    };
    let strides: Vec<(&str, &[i32])> = request
        .strides
        .iter()
        .map(|(name, values)| (name.as_str(), values.as_slice()))
        .collect();
    let spec_args: Vec<(String, SpecializationBits)> = request
        .spec_args
        .iter()
        .map(|(name, facts)| (name.clone(), specialization(facts)))
        .collect();
    let scalar_hints: Vec<(&str, DivHint)> = request
        .scalar_hints
        .iter()
        .map(|(name, divisor)| {
            (
                name.as_str(),
                DivHint {
                    divisor: *divisor,
                    max: 16,
                },
            )
        })
        .collect();
    let mut compiler = KernelCompiler::new(move || module.clone(), &module_name, &request.kernel)
        .generics(request.generics.clone())
        .strides(&strides)
        .spec_args(
            &spec_args
                .iter()
                .map(|(n, s)| (n.as_str(), s.clone()))
                .collect::<Vec<_>>(),
        )
        .scalar_hints(&scalar_hints)
        .options(options(request))
        .target(&request.target)
        .bytecode_version(version);
    if let Some([x, y, z]) = request.grid {
        compiler = compiler.grid((x, y, z));
    }
    let artifacts = match compiler.compile() {
        Ok(artifacts) => artifacts,
        Err(err) => return ExportResponse::failure("compile", err.to_string()),
    };
    let ir_text = artifacts.ir_text();
    if let Some(path) = &request.ir_out {
        if let Err(err) = std::fs::write(path, &ir_text) {
            return ExportResponse::failure("write", format!("cannot write {path}: {err}"));
        }
    }
    if let Some(path) = &request.bytecode_out {
        let bytes = match artifacts.bytecode() {
            Ok(bytes) => bytes,
            Err(err) => return ExportResponse::failure("compile", err.to_string()),
        };
        if let Err(err) = std::fs::write(path, bytes) {
            return ExportResponse::failure("write", format!("cannot write {path}: {err}"));
        }
    }
    ExportResponse {
        ok: true,
        error_kind: None,
        error: None,
        ir_text: Some(ir_text),
        bytecode_out: request.bytecode_out.clone(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
    }
}
