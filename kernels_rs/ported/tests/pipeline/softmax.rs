//! @generated: the pipeline check of `softmax` (softmax.port.yaml, softmax.rs).
//! Each case compiles one variant's entry to Tile IR with the generic arguments and
//! the launch-time divisibility hints a launch of that test configuration gives.

use cutile::compile_api::KernelCompiler;
use cutile::cutile_compiler::specialization::DivHint;
use tileport_kernels::ffi::kernels::softmax::softmax_port as kernel;

struct Case {
    config: &'static str,
    entry: &'static str,
    generics: &'static [&'static str],
    hints: &'static [(&'static str, i32)],
}

const CASES: &[Case] = &[
    Case {
        config: "ragged_f32",
        entry: "softmax_kernel",
        generics: &["f32", "1024", "1", "1", "4", "1", "1", "4"],
        hints: &[
            ("x", 16),
            ("x_shape_0", 1),
            ("x_shape_1", 8),
            ("x_stride_0", 8),
            ("x_stride_1", 1),
            ("y", 16),
            ("y_shape_0", 1),
            ("y_shape_1", 8),
            ("y_stride_0", 8),
            ("y_stride_1", 1),
        ],
    },
    Case {
        config: "ragged_f16",
        entry: "softmax_kernel",
        generics: &["f16", "1024", "1", "1", "1", "1", "1", "1"],
        hints: &[
            ("x", 16),
            ("x_shape_0", 1),
            ("x_shape_1", 1),
            ("x_stride_0", 1),
            ("x_stride_1", 1),
            ("y", 16),
            ("y_shape_0", 1),
            ("y_shape_1", 1),
            ("y_stride_0", 1),
            ("y_stride_1", 1),
        ],
    },
    Case {
        config: "many_rows_bf16",
        entry: "softmax_kernel",
        generics: &["bf16", "512", "16", "16", "8", "16", "16", "8"],
        hints: &[
            ("x", 16),
            ("x_shape_0", 16),
            ("x_shape_1", 16),
            ("x_stride_0", 16),
            ("x_stride_1", 1),
            ("y", 16),
            ("y_shape_0", 16),
            ("y_shape_1", 16),
            ("y_stride_0", 16),
            ("y_stride_1", 1),
        ],
    },
    Case {
        config: "pow2_f16",
        entry: "softmax_kernel",
        generics: &["f16", "2048", "16", "16", "8", "16", "16", "8"],
        hints: &[
            ("x", 16),
            ("x_shape_0", 16),
            ("x_shape_1", 16),
            ("x_stride_0", 16),
            ("x_stride_1", 1),
            ("y", 16),
            ("y_shape_0", 16),
            ("y_shape_1", 16),
            ("y_stride_0", 16),
            ("y_stride_1", 1),
        ],
    },
];

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
