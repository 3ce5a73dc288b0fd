"""A small analysis.json for requests of the LLM loop tests."""

from __future__ import annotations

from schemas.reports import (
    EntrySymbolPolicy,
    KernelAnalysis,
    OperatorConfig,
    OpsUsed,
    Tolerance,
    Variant,
)


def analysis() -> KernelAnalysis:
    return KernelAnalysis(
        operator="softmax",
        kernel_name="softmax_kernel",
        source_file="softmax.py",
        reference_backend="cutile_python",
        launch_path="direct",
        pattern="single",
        ops=OpsUsed(ops=["ct.load"], uses_cdiv=False, check_bounds=True),
        configs=[OperatorConfig(id="c", dtype="float32", shapes={"x": [37, 1000]})],
        variants=[
            Variant(
                name="row",
                kernel_function="softmax_kernel",
                dispatch_condition="always",
                reference_ir="reference/row.mlir",
                reference_backend="cutile_python",
            )
        ],
        config_variants={"c": "row"},
        correctness_reference={"function": "references:softmax", "origin": "torch.softmax"},
        tolerances={"float32": Tolerance(atol=1e-5, rtol=1.3e-6, source="torch defaults")},
        entry_symbols=EntrySymbolPolicy(
            c_symbol="cutile_softmax", rust_entries={"row": "softmax_kernel"}
        ),
    )
