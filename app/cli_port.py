"""`tileport port-kernel SPEC --out DIR`: the deterministic kernel writer.

Writes DIR/kernel.rs, DIR/generated/<config>.mlir (the IR kernel.rs compiles
to), DIR/reference/ (the reference exports) and DIR/port_report.json; prints
the verdict, the recovered generics and one line per checked configuration.
Exit codes (`schemas/exit_codes.py`): 0 COMPILED, 2 a bad spec, 3 not COMPILED
(the stage failed) or the Rust exporter is missing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nodes.kernel_writer.stage import port_kernel
from schemas.exit_codes import ExitCode, exit_code_epilog
from schemas.kernel_writer import REPORT_FILE, PortReport, TargetCheck
from schemas.port_spec import PortSpecError
from schemas.verdicts import KernelWriterVerdict
from toolchain.rust_export import ExporterUnavailable

EXIT_MEANINGS = {
    ExitCode.OK: "the port is COMPILED",
    ExitCode.BAD_INPUT: "the spec is missing or invalid",
    ExitCode.STAGE_FAILED: "the port is not COMPILED (the verdict says why), or the Rust "
    "exporter is missing",
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    port = commands.add_parser(
        "port-kernel",
        help="lift a kernel's Tile IR into cutile-rs and prove it (IR diff and SASS)",
        description=__doc__,
        epilog=exit_code_epilog(EXIT_MEANINGS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    port.add_argument("spec", type=Path, help="the kernel's <name>.port.yaml")
    port.add_argument("--out", type=Path, required=True, help="output directory")
    port.add_argument("--json", action="store_true", help="print the report as JSON")
    port.set_defaults(handler=port_command)


def render(report: PortReport) -> str:
    lines = [f"{report.verdict}: {report.summary}"]
    for generic in report.generics:
        lines.append(f"  generic {generic.name} ({generic.kind}): {generic.how}")
    for entry in report.literal_entries:
        bound = ", ".join(f"{k}={v}" for k, v in entry.bindings.items())
        lines.append(f"  literal entry {entry.entry} ({bound}): {entry.reason}")
    for check in report.checks:
        sass = ", ".join(f"{t.target} {_sass_state(t)}" for t in check.targets)
        level = "exact" if check.exact else check.ir_level
        detail = check.error or f"IR {level}; SASS {sass}"
        lines.append(f"  {check.config}: {detail}")
    for blocked in report.blocked:
        lines.append(f"  BLOCKED {blocked.op} at {blocked.location}: {blocked.missing}")
    lines += [f"  note: {note}" for note in report.notes]
    t = report.timings
    lines.append(
        f"  time: reference export {t.reference_export_s:.1f} s, lift {t.lift_s:.2f} s, "
        f"verify {t.verify_s:.1f} s, total {t.total_s:.1f} s; LLM tokens {report.llm_tokens}"
    )
    return "\n".join(lines)


def port_command(args: argparse.Namespace) -> int:
    try:
        report = port_kernel(args.spec, args.out)
    except PortSpecError as err:
        print(err)
        return ExitCode.BAD_INPUT
    except ExporterUnavailable as err:
        print(f"error: {err}")
        return ExitCode.STAGE_FAILED
    print(report.model_dump_json(indent=2) if args.json else render(report))
    if not args.json:
        print(f"report: {args.out / REPORT_FILE}")
    compiled = report.verdict is KernelWriterVerdict.COMPILED
    return ExitCode.OK if compiled else ExitCode.STAGE_FAILED


def _sass_state(target: TargetCheck) -> str:
    if not target.sass_identical:
        return "differs"
    if target.assemblies == 1:
        return "identical"
    # tileiras varies from run to run (tileir.sass): say how the match was found.
    if target.registers_only:
        return (
            f"identical but for registers, as the reference's own {target.assemblies} runs "
            f"differ ({target.reference_variants} listings)"
        )
    return (
        f"identical (a listing both reach: the reference gave {target.reference_variants} "
        f"in {target.assemblies} runs)"
    )
