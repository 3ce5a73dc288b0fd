//! @generated: the pipeline check of `softmax` (softmax.port.yaml, softmax.rs).
//! Each case compiles one variant's entry to Tile IR with the generic arguments and
//! the launch-time divisibility hints a launch of that test configuration gives.
//! Not compiled (the port has no entry for their dtypes): ragged_f16, many_rows_bf16, pow2_f16.

use cutile::compile_api::KernelCompiler;
use cutile::cutile_compiler::specialization::DivHint;
use tileport_kernels::softmax::softmax_port as kernel;

struct Case {
    config: &'static str,
    entry: &'static str,
    generics: &'static [&'static str],
    hints: &'static [(&'static str, i32)],
}

const CASES: &[Case] = &[Case {
    config: "ragged_f32",
    entry: "softmax_kernel",
    generics: &["1024", "1"],
    hints: &[
        ("x", 16),
        ("x_rows", 1),
        ("x_cols", 8),
        ("x_row_stride", 8),
        ("_x_col_stride", 1),
        ("y", 16),
        ("y_rows", 1),
        ("y_cols", 8),
        ("y_row_stride", 8),
        ("_y_col_stride", 1),
    ],
}];

#[test]
fn compiles_to_tile_ir() {
    super::on_large_stack(|| {
        for case in CASES {
            let hints: Vec<(&str, DivHint)> = case
                .hints
                .iter()
                .map(|&(name, divisor)| (name, DivHint { divisor, max: 16 }))
                .collect();
            let artifacts =
                KernelCompiler::new(kernel::__module_ast_self, "softmax_port", case.entry)
                    .generics(case.generics.iter().map(|g| g.to_string()).collect())
                    .scalar_hints(&hints)
                    .target("sm_90")
                    .compile()
                    .unwrap_or_else(|err| panic!("{}: {err}", case.config));
            let ir = artifacts.ir_text();
            assert!(
                ir.contains("entry @"),
                "{}: no entry in the IR",
                case.config
            );
            super::keep_ir("softmax", case.config, &ir);
        }
    });
}
