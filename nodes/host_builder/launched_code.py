"""The port's machine code as cutile-rs's launcher compiles it, rebuilt on the build host.

The kernel writer proves each entry at the facts its reference specialised on. At
launch, cutile-rs adds its own: every integer scalar and raw pointer parameter is
assumed divisible by the largest power of two (at most 16) that divides its value
(`binding.launch_hints`). `compile_as_launched` exports one configuration's entry
with those hints and assembles it, so stage F can hold the cubin a GPU run kept
(`gpu-run --keep-cubins`) against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodes.host_builder.binding import OperatorBinding, bind_operator, launch_hints, plan_for
from nodes.host_builder.rust_entry import parse_kernel_source
from nodes.host_builder.stage import kernel_source
from schemas.export import RustExportRequest
from schemas.kernel_writer import PortReport
from schemas.port_spec import PortSpec, ResolvedConfig, load_port_spec
from schemas.run_layout import RunLayout
from toolchain.rust_export import RustExporter
from toolchain.tools import tileiras

REPORT_FILE = "port_report.json"
INPUT_DIR = "input"


class LaunchedCodeError(ValueError):
    """The run directory does not say how its port launches that configuration."""


@dataclass(frozen=True)
class LaunchedCompile:
    entry: str
    hints: dict[str, int]
    cubin: Path


@dataclass(frozen=True)
class RunPort:
    """A conversion's port as its run directory holds it."""

    spec: PortSpec
    kernel: Path
    binding: OperatorBinding

    def configurations(self) -> list[ResolvedConfig]:
        return [self.spec.resolve(config, purpose) for config, purpose in self.spec.all_configs()]

    def configuration(self, config_id: str) -> ResolvedConfig:
        found = next((r for r in self.configurations() if r.name == config_id), None)
        if found is None:
            raise LaunchedCodeError(f"{self.spec.name}: no configuration {config_id!r}")
        return found


def load_run_port(run_dir: Path) -> RunPort:
    layout = RunLayout(run_dir)
    report_path = layout.generated_dir / REPORT_FILE
    if not report_path.is_file():
        raise LaunchedCodeError(f"{run_dir}: no {REPORT_FILE}")
    report = PortReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    spec_path = Path(report.spec)
    if not spec_path.is_file():  # a service run keeps its inputs in the run directory
        spec_path = run_dir / INPUT_DIR / spec_path.name
    spec = load_port_spec(spec_path)
    kernel, entries = kernel_source(layout)
    binding = bind_operator(
        spec, spec_path, parse_kernel_source(kernel), "kernel", entries.by_variant, entries.literal
    )
    return RunPort(spec, kernel, binding)


def compile_as_launched(
    port: RunPort,
    resolved: ResolvedConfig,
    target: str,
    work: Path,
    exporter: RustExporter,
    *,
    as_launched: bool = True,
) -> LaunchedCompile:
    """Export and assemble one configuration's entry for `target` (`sm_90`) with the
    launcher's hints (without, `as_launched=False`: as the kernel writer proved it);
    the cubin goes under `work`."""
    variant = port.binding.variant_for(resolved)
    hints = launch_hints(variant, resolved) if as_launched else {}
    work.mkdir(parents=True, exist_ok=True)
    stem = f"{resolved.name}.{target}.{'launched' if as_launched else 'proven'}"
    bytecode = work / f"{stem}.bytecode"
    response = exporter.export(
        RustExportRequest(
            source=str(port.kernel),
            kernel=variant.entry,
            generics=list(plan_for(port.binding, resolved).generic_texts),
            scalar_hints=hints,
            target=target,
            bytecode_out=str(bytecode),
        )
    )
    if not response.ok:
        raise LaunchedCodeError(f"{variant.entry}: {response.error_kind}: {response.error}")
    return LaunchedCompile(variant.entry, hints, tileiras(bytecode, work / f"{stem}.cubin", target))
