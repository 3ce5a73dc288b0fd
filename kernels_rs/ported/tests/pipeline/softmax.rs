//! @generated: the pipeline check of `softmax` (softmax.port.yaml, softmax.rs).
//! Each case compiles one variant's entry to Tile IR with the generic arguments a
//! launch of that test configuration gives, as the launcher compiles it
//! (`rt::ProvenEntry`: no launch-time divisibility hint).

use cutile::compile_api::KernelCompiler;
use tileport_kernels::ffi::kernels::softmax::softmax_port as kernel;

struct Case {
    config: &'static str,
    entry: &'static str,
    generics: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        config: "ragged_f32",
        entry: "softmax_kernel",
        generics: &["f32", "1024", "1", "1", "4", "1", "1", "4"],
    },
    Case {
        config: "ragged_f16",
        entry: "softmax_kernel",
        generics: &["f16", "1024", "1", "1", "1", "1", "1", "1"],
    },
    Case {
        config: "many_rows_bf16",
        entry: "softmax_kernel",
        generics: &["bf16", "512", "16", "16", "8", "16", "16", "8"],
    },
    Case {
        config: "pow2_f16",
        entry: "softmax_kernel",
        generics: &["f16", "2048", "16", "16", "8", "16", "16", "8"],
    },
];

#[test]
fn compiles_to_tile_ir() {
    super::on_large_stack(|| {
        for case in CASES {
            let artifacts =
                KernelCompiler::new(kernel::__module_ast_self, "softmax_port", case.entry)
                    .generics(case.generics.iter().map(|g| g.to_string()).collect())
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
