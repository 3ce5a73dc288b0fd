"""Round-trip verification: compile the generated kernel.rs for one
configuration through the resident exporter, diff its Tile IR against the
reference's, and compare the SASS tileiras makes of both, per target."""

from __future__ import annotations

from pathlib import Path

from schemas.export import RustExportRequest
from schemas.kernel_writer import ConfigCheck, TargetCheck
from tileir.diff import diff_texts
from tileir.sass import compare_bytecodes
from toolchain.diagnostics import lead_with_sentence
from toolchain.rust_export import RustExporter
from toolchain.tools import ToolError, tileirdisasm

BYTECODE_VERSION = "13.3"
SASS_SAMPLES = 6  # more tileiras runs per side where the first listings differ


def _parsable(text: str) -> str:
    """tileirdisasm names cutile-rs's negative constants `%cst_-1_i32`, which
    tileir's lexer does not read as one value name; value names carry no
    meaning, so spell them `%cst_m1_i32`."""
    return text.replace("%cst_-", "%cst_m")


def check_config(
    exporter: RustExporter,
    kernel_rs: Path,
    entry: str,
    generic_args: list[str],
    reference_mlir: str,
    reference_bytecode: Path,
    targets: tuple[str, ...],
    work: Path,
    label: str,
    variant: str,
    out_root: Path,
) -> ConfigCheck:
    """Export `entry` at `generic_args` for every target, diff the IR (from the
    first target's export) and compare the SASS tileiras makes of both
    bytecodes with the same options (tileir.sass.compare_bytecodes)."""
    work.mkdir(parents=True, exist_ok=True)
    base = dict(
        config=label,
        variant=variant,
        entry=entry,
        generic_args=generic_args,
        required_targets=list(targets),
    )
    results: list[TargetCheck] = []
    generated_ir: Path | None = None
    report = None
    for target in targets:
        bytecode = work / f"{label}.{target}.bytecode"
        response = exporter.export(
            RustExportRequest(
                source=str(kernel_rs),
                kernel=entry,
                generics=generic_args,
                target=target,
                bytecode_version=BYTECODE_VERSION,
                bytecode_out=str(bytecode),
            )
        )
        if not response.ok:
            return ConfigCheck(
                **base,
                exact=False,
                ir_level="different",
                error=f"{response.error_kind}: {lead_with_sentence(response.error or '')}",
            )
        try:
            if report is None:
                generated_ir = work / f"{label}.mlir"
                text = tileirdisasm(bytecode)
                generated_ir.write_text(text)
                report = diff_texts(reference_mlir, _parsable(text))
            sass = compare_bytecodes(
                reference_bytecode, bytecode, target, work / label, SASS_SAMPLES
            )
        except ToolError as err:
            error = lead_with_sentence(str(err))
            return ConfigCheck(**base, exact=False, ir_level="different", error=error)
        results.append(
            TargetCheck(
                target=target,
                sass_identical=sass.identical,
                instructions=sass.reference_instructions,
                differing_lines=sass.differing_lines,
                first_differences=sass.first_differences,
                assemblies=sass.assemblies,
                reference_variants=sass.reference_variants,
                registers_only=sass.registers_only,
            )
        )
    assert report is not None and generated_ir is not None
    findings = [
        f"{f.severity}: {f.category} ({f.op}): {f.message}"
        for f in report.findings
        if f.severity != "noise" or not report.exact
    ]
    return ConfigCheck(
        **base,
        exact=report.exact,
        ir_level=str(report.level),
        findings=findings,
        targets=results,
        generated_ir=str(generated_ir.relative_to(out_root)),
    )
