"""Stage B's LLM fallback: where the lifter stops, the configured model writes
kernel.rs, and each answer is proven exactly as a lifted port is.

It runs when the lifter's verdict is not COMPILED (BLOCKED on a construct, or
a port that does not compile or is not the same) and the run allows the LLM
(`--llm`, `{"llm": true}`) with an endpoint configured (toolchain.llm). The
first request carries the analysis, each variant's reference IR, the lifter's
partial port (`partial_kernel.rs`, each construct it could not lift marked
where it stands) or its failed kernel.rs, the op mapping, the Python source,
what the lifter could not do with the known upstream gap behind it
(docs/UPSTREAM_GAPS.md: what cutile-rs emits and which alternatives were
tried), and the entries and generics the port must have. A retry carries the
previous answer's compile errors or IR-diff findings.

Every answer is checked on every configuration the lifter checks: compiled by
one resident exporter, its IR diffed against the reference and its SASS
compared on sm_90 and sm_100 (`verify.check_config`), kernel.rs built with
rustc, and judged by the lifter's own rule (`stage.port_verdict`). Only a
COMPILED answer is taken. Files, under the stage's output folder:

    llm/prompt.md                 the first request
    llm/lifter_kernel.rs          the lifter's Rust it was given
    llm/attempt-<n>/kernel.rs     each answer, with its IR per configuration
    kernel.rs, port_report.json   the accepted answer and its proof
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from nodes.host_builder.rust_entry import (
    GenericParam,
    RustEntry,
    RustKernelModule,
    RustSourceError,
    parse_kernel_source,
)
from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.op_table import SUPPORTED_OPS, mapping, markdown_table
from nodes.kernel_writer.rust_check import RustCheck, check_kernel_rs
from nodes.kernel_writer.stage import (
    KERNEL_FILE,
    PARTIAL_FILE,
    VERIFY_WORKERS,
    PortTarget,
    port_targets,
    port_verdict,
)
from nodes.kernel_writer.verify import check_config
from schemas.kernel_writer import (
    COMPILED_LEVELS,
    REPORT_FILE,
    ConfigCheck,
    EntryInfo,
    PortReport,
    Timings,
)
from schemas.llm import (
    LlmFallbackRecord,
    LlmPortResult,
    LlmStatus,
    TokenUsage,
    VerifyOutcome,
    VerifyStep,
)
from schemas.port_spec import PortSpecError, load_port_spec, spec_relative
from schemas.reports import KernelAnalysis
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import REPO_ROOT
from toolchain.llm import (
    ChatModel,
    LlmConfigError,
    LlmSettings,
    llm_port,
    load_llm_settings,
    not_configured_result,
    port_prompt,
)
from toolchain.rust_export import RustExporter

LLM_DIR: Final = "llm"
PROMPT_FILE: Final = "prompt.md"
LIFTER_FILE: Final = "lifter_kernel.rs"
GAPS_DOC: Final = REPO_ROOT / "docs" / "UPSTREAM_GAPS.md"
FEEDBACK_LINES: Final = 40  # of a compiler log or of findings, per retry
_GAP_HEADING = re.compile(r"^## (G\d+): ", re.MULTILINE)


@dataclass(frozen=True)
class FallbackOutcome:
    """The port report stage B goes on with (the LLM's when it was accepted, else
    the lifter's) and what the fallback did."""

    report: PortReport
    record: LlmFallbackRecord


@dataclass
class _Candidate:
    """One answer, checked: its source, module, checks, rustc build, verdict."""

    kernel_rs: Path
    outcome: VerifyOutcome
    module: RustKernelModule | None = None
    checks: list[ConfigCheck] = field(default_factory=list)
    rustc: RustCheck | None = None
    summary: str = ""
    verify_s: float = 0.0
    rustc_s: float = 0.0


def run_fallback(
    spec_path: Path,
    out: Path,
    lifter: PortReport,
    analysis: KernelAnalysis | None,
    *,
    spent: TokenUsage,
    settings: LlmSettings | None = None,
    chat: ChatModel | None = None,
) -> FallbackOutcome:
    """Run the LLM loop on the port `lifter` reported in `out` (the stage's
    `generated/` folder). `spent` is what the run has spent on the LLM so far,
    for its cap. Never raises for endpoint trouble: the record says what
    happened, and the lifter's report stands unless an answer is COMPILED."""
    started = time.monotonic()
    try:
        settings = settings or load_llm_settings()
    except LlmConfigError as exc:
        return _unchanged(lifter, not_configured_result(f"the LLM settings are invalid: {exc}"))
    if settings is None:
        return _unchanged(lifter, not_configured_result())
    try:
        targets = port_targets(spec_path)
    except (Blocked, PortSpecError) as exc:
        return _not_run(lifter, f"the spec cannot be planned: {exc}")
    references = out / "reference"
    missing = [t.label for t in targets if not (references / f"{t.label}.bytecode").is_file()]
    if missing or analysis is None:
        why = f"no reference export of {', '.join(missing)}" if missing else "no analysis.json"
        return _not_run(lifter, f"the fallback needs the lifter's inputs: {why}")
    partial = _partial_text(out, lifter)
    context = _context(spec_path, lifter, targets)
    reference_ir = _reference_ir(targets, references, spec_path)
    folder = out / LLM_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LIFTER_FILE).write_text(partial)
    prompt = port_prompt(analysis, reference_ir, partial, markdown_table(), context)
    (folder / PROMPT_FILE).write_text(prompt)
    with RustExporter() as exporter:
        gpus = tuple(load_port_spec(spec_path).targets)
        verifier = _Verifier(exporter, targets, gpus, references, out, folder)
        result = llm_port(
            analysis,
            reference_ir,
            partial,
            markdown_table(),
            verifier,
            settings=settings,
            chat=chat,
            context=context,
            spent=spent,
        )
    seconds = round(time.monotonic() - started, 3)
    if result.status is not LlmStatus.SUCCEEDED:
        return _unchanged(lifter, result, seconds)
    accepted = verifier.candidates[-1]
    report = _accepted_report(spec_path, out, lifter, result, accepted, targets, seconds)
    written = [entry.name for entry in report.entries if entry.written_by == "llm"]
    return FallbackOutcome(report, _record(lifter, result, seconds, written))


def _record(
    lifter: PortReport,
    result: LlmPortResult,
    seconds: float = 0.0,
    entries: Sequence[str] = (),
) -> LlmFallbackRecord:
    return LlmFallbackRecord(
        status=result.status,
        model=result.model,
        reason=result.reason,
        lifter_verdict=lifter.verdict,
        lifter_summary=lifter.summary,
        attempts=result.attempts,
        usage=result.usage,
        llm_entries=list(entries),
        seconds=seconds,
    )


def _unchanged(lifter: PortReport, result: LlmPortResult, seconds: float = 0.0) -> FallbackOutcome:
    return FallbackOutcome(lifter, _record(lifter, result, seconds))


def _not_run(lifter: PortReport, reason: str) -> FallbackOutcome:
    return _unchanged(lifter, LlmPortResult(status=LlmStatus.NOT_RUN, reason=reason))


# -- the request ------------------------------------------------------------------------


def _partial_text(out: Path, lifter: PortReport) -> str:
    """The lifter's partial port when it was BLOCKED, else its kernel.rs."""
    for name in (PARTIAL_FILE, lifter.kernel_rs):
        if name is not None and (out / name).is_file():
            return (out / name).read_text()
    return "(the lifter wrote no Rust for this kernel)"


def _reference_ir(targets: list[PortTarget], references: Path, spec_path: Path) -> dict[str, str]:
    """Each variant's reference IR: its representative configuration's, if checked."""
    spec = load_port_spec(spec_path)
    out: dict[str, str] = {}
    for variant in spec.variants:
        labels = [t.label for t in targets if t.variant == variant.name]
        wanted = f"{variant.name}__{spec.representative(variant).name}"
        label = wanted if wanted in labels else labels[0]
        out[variant.name] = (references / f"{label}.mlir").read_text()
    return out


def _context(
    spec_path: Path, lifter: PortReport, targets: list[PortTarget]
) -> list[tuple[str, str]]:
    """The request's sections after the op mapping."""
    spec = load_port_spec(spec_path)
    sections: list[tuple[str, str]] = []
    source = spec_relative(spec_path, spec.source)
    if source.is_file():
        sections.append((f"the cuTile Python kernel ({spec.source})", _fenced(source, "python")))
    sections.append(("what the lifter could not do", _lifter_gaps(lifter)))
    sections += _upstream_gaps(lifter)
    sections.append(("the entries tileport compiles and checks", _entry_contract(targets)))
    return sections


def _fenced(path: Path, language: str) -> str:
    return f"```{language}\n{path.read_text().rstrip()}\n```"


def _lifter_gaps(lifter: PortReport) -> str:
    if lifter.blocked:
        lines = [f"The lifter is BLOCKED: {lifter.summary}."]
        for blocked in lifter.blocked:
            variant = f" (variant {blocked.variant})" if blocked.variant else ""
            lines.append(f"- `{blocked.op}` at {blocked.location}{variant}: {blocked.missing}")
        if all(b.op not in SUPPORTED_OPS for b in lifter.blocked):
            lines.append(
                "No probe has shown a cutile-rs construct that compiles to this op yet; "
                "look for a `cutile::core` function that emits it, or declare the op."
            )
        return "\n".join(lines)
    lines = [f"The lifter's kernel.rs is {lifter.verdict}: {lifter.summary}."]
    for check in lifter.checks:
        if check.level not in COMPILED_LEVELS:
            lines.append(f"- {check.config}: {_check_problem(check)}")
    return "\n".join(lines)


def _upstream_gaps(lifter: PortReport) -> list[tuple[str, str]]:
    """The docs/UPSTREAM_GAPS.md entries of the ops the lifter stopped at."""
    gaps = sorted(
        {gap for b in lifter.blocked if b.op in SUPPORTED_OPS for gap in mapping(b.op).gaps},
        key=lambda gap: int(gap[1:]),
    )
    if not gaps:
        return []
    sections = _gap_sections()
    return [
        (
            f"known upstream gap {gap} (docs/UPSTREAM_GAPS.md): what cutile-rs emits, and the "
            "alternatives tried",
            sections.get(gap, f"{gap}: its entry is not installed with this copy of tileport"),
        )
        for gap in gaps
    ]


def _gap_sections() -> dict[str, str]:
    """Each `## Gn: ...` section of docs/UPSTREAM_GAPS.md, by id."""
    if not GAPS_DOC.is_file():
        return {}
    text = GAPS_DOC.read_text()
    starts = list(_GAP_HEADING.finditer(text))
    sections = {}
    for found in starts:
        end = text.find("\n## ", found.end())
        sections[found.group(1)] = text[found.start() : end if end >= 0 else len(text)].strip()
    return sections


def _entry_contract(targets: list[PortTarget]) -> str:
    lines = [
        "One `#[cutile::entry]` per variant, named as below, taking the parameters of the "
        "partial port (cuTile Python's calling convention: per array its pointer, then its "
        "shapes, then its strides; per scalar its value). Its generic parameters may only be "
        "named from its configurations' lists: tileport passes each the value shown.",
        "COMPILED needs, on every configuration, the same Tile IR as the reference or SASS "
        "identical to the reference's on sm_90 and sm_100, and kernel.rs building with rustc "
        "against cutile 0.5.0.",
    ]
    for variant in dict.fromkeys(t.variant for t in targets):
        mine = [t for t in targets if t.variant == variant]
        lines.append(
            f"\nvariant `{variant}`: entry `{mine[0].entry}`, dispatch `{mine[0].dispatch}`"
        )
        for target in mine:
            values = ", ".join(f"{k} = {v}" for k, v in target.generic_values.items())
            lines.append(f"- configuration {target.label}: {values or 'no generics'}")
    return "\n".join(lines)


# -- checking one answer ----------------------------------------------------------------


class _Verifier:
    """The loop's `verify`: writes the answer to its attempt's folder and checks it
    as stage B checks a lifted port."""

    def __init__(
        self,
        exporter: RustExporter,
        targets: list[PortTarget],
        gpus: tuple[str, ...],
        references: Path,
        out: Path,
        folder: Path,
    ) -> None:
        self.exporter = exporter
        self.targets = targets
        self.gpus = gpus  # the spec's targets: SASS compared on each
        self.references = references
        self.out = out
        self.folder = folder
        self.candidates: list[_Candidate] = []

    def __call__(self, source: str) -> VerifyOutcome:
        attempt = self.folder / f"attempt-{len(self.candidates) + 1}"
        attempt.mkdir(parents=True, exist_ok=True)
        kernel_rs = attempt / KERNEL_FILE
        kernel_rs.write_text(source)
        candidate = self.check(kernel_rs)
        self.candidates.append(candidate)
        return candidate.outcome

    def check(self, kernel_rs: Path) -> _Candidate:
        try:
            module = parse_kernel_source(kernel_rs)
        except RustSourceError as exc:
            return _Candidate(kernel_rs, _compile_failure(str(exc)))
        args, problems = self.generic_args(module)
        if problems:
            return _Candidate(kernel_rs, _compile_failure("\n".join(problems)), module)
        candidate = _Candidate(kernel_rs, _compile_failure("not checked"), module)
        started = time.monotonic()
        candidate.checks = self.export_and_compare(kernel_rs, args)
        candidate.verify_s = time.monotonic() - started
        errors = dict.fromkeys(f"{c.config}: {c.error}" for c in candidate.checks if c.error)
        if errors:
            text = "\n".join(errors).replace(str(kernel_rs.resolve()), KERNEL_FILE)
            candidate.outcome = _compile_failure(text)
            return candidate
        started = time.monotonic()
        candidate.rustc = rustc = check_kernel_rs(kernel_rs)
        candidate.rustc_s = time.monotonic() - started
        verdict, candidate.summary = port_verdict(candidate.checks, rustc)
        if verdict is KernelWriterVerdict.COMPILED:
            candidate.outcome = VerifyOutcome(ok=True, step=VerifyStep.IR_DIFF, verdict=verdict)
        elif not rustc.passed:
            candidate.outcome = _compile_failure("rustc (cutile 0.5.0):\n" + _head(rustc.log))
        else:
            feedback = "\n".join(
                f"- {c.config}: {_check_problem(c)}"
                for c in candidate.checks
                if c.level not in COMPILED_LEVELS
            )
            candidate.outcome = VerifyOutcome(
                ok=False, step=VerifyStep.IR_DIFF, feedback=feedback, verdict=verdict
            )
        return candidate

    def generic_args(self, module: RustKernelModule) -> tuple[dict[str, list[str]], list[str]]:
        """Each target's generic arguments, or why the entries cannot be compiled."""
        args: dict[str, list[str]] = {}
        problems: list[str] = []
        for target in self.targets:
            try:
                entry = module.entry(target.entry)
            except RustSourceError as exc:
                problems.append(str(exc))
                continue
            unknown = [g.name for g in entry.generics if g.name not in target.generic_values]
            if unknown:
                known = ", ".join(target.generic_values) or "none"
                problems.append(
                    f"{target.entry}: generic(s) {', '.join(unknown)} are not ones tileport can "
                    f"set for {target.label} (it sets: {known})"
                )
                continue
            args[target.label] = [target.generic_values[g.name] for g in entry.generics]
        return args, list(dict.fromkeys(problems))

    def export_and_compare(self, kernel_rs: Path, args: dict[str, list[str]]) -> list[ConfigCheck]:
        with ThreadPoolExecutor(max_workers=VERIFY_WORKERS) as pool:
            futures = [
                pool.submit(
                    check_config,
                    self.exporter,
                    kernel_rs.resolve(),
                    target.entry,
                    args[target.label],
                    (self.references / f"{target.label}.mlir").read_text(),
                    self.references / f"{target.label}.bytecode",
                    self.gpus,
                    kernel_rs.parent,
                    target.label,
                    target.variant,
                    self.out,
                )
                for target in self.targets
            ]
            return [future.result() for future in futures]


def _compile_failure(feedback: str) -> VerifyOutcome:
    return VerifyOutcome(
        ok=False,
        step=VerifyStep.COMPILE,
        feedback=feedback,
        verdict=KernelWriterVerdict.FAIL_COMPILE,
    )


def _check_problem(check: ConfigCheck) -> str:
    """What keeps one configuration from a COMPILED level, for the model."""
    if check.error is not None:
        return check.error
    parts = [f"IR {check.ir_level}"]
    parts += [f"  {finding}" for finding in check.findings]
    for target in check.targets:
        if not target.sass_identical:
            parts.append(
                f"  SASS on {target.target}: {target.differing_lines} of "
                f"{target.instructions} instruction lines differ"
            )
            parts += [f"    {line}" for line in target.first_differences]
    return _head("\n".join(parts))


def _head(text: str) -> str:
    lines = text.splitlines()
    more = len(lines) - FEEDBACK_LINES
    return "\n".join(lines[:FEEDBACK_LINES] + ([f"... ({more} more lines)"] if more > 0 else []))


# -- the accepted answer ----------------------------------------------------------------


def _declaration(generic: GenericParam) -> str:
    return (
        f"const {generic.name}: {generic.const_type}" if generic.kind == "const" else generic.name
    )


def _entry_key(entry: RustEntry) -> str:
    """An entry's generics, parameters and body, whitespace aside."""
    return " ".join(f"{entry.generics} {entry.params} {entry.body}".split())


def _accepted_report(
    spec_path: Path,
    out: Path,
    lifter: PortReport,
    result: LlmPortResult,
    accepted: _Candidate,
    targets: list[PortTarget],
    seconds: float,
) -> PortReport:
    """kernel.rs and port_report.json for the accepted answer; entries the lifter
    wrote (unchanged from its partial port) are said to be the lifter's."""
    assert result.source is not None and accepted.module is not None
    assert accepted.rustc is not None
    (out / KERNEL_FILE).write_text(result.source)
    lifted = _lifted_entries(out / LLM_DIR / LIFTER_FILE)
    entries = []
    for variant in dict.fromkeys(t.variant for t in targets):
        target = next(t for t in targets if t.variant == variant)
        entry = accepted.module.entry(target.entry)
        by_lifter = lifted.get(target.entry) == _entry_key(entry)
        entries.append(
            EntryInfo(
                name=entry.name,
                variant=variant,
                dispatch=target.dispatch,
                generics=[_declaration(g) for g in entry.generics],
                written_by="lifter" if by_lifter else "llm",
            )
        )
    attempt = len(result.attempts)
    llm_names = [e.name for e in entries if e.written_by == "llm"]
    note = (
        f"kernel.rs written by the LLM ({result.model}) at attempt {attempt}: entries "
        f"{', '.join(llm_names) or 'none'} are the model's, proven like a lifted port"
    )
    report = PortReport(
        kernel=lifter.kernel,
        spec=str(spec_path),
        verdict=KernelWriterVerdict.COMPILED,
        summary=f"{accepted.summary} (written by the LLM, attempt {attempt})",
        kernel_rs=KERNEL_FILE,
        entries=entries,
        checks=accepted.checks,
        rustc_check=accepted.rustc.passed,
        rustc_log=accepted.rustc.log,
        timings=Timings(
            reference_export_s=lifter.timings.reference_export_s,
            lift_s=lifter.timings.lift_s,
            verify_s=round(accepted.verify_s, 3),
            rustc_s=round(accepted.rustc_s, 3),
            total_s=round(lifter.timings.total_s + seconds, 3),
        ),
        llm_tokens=result.usage.total_tokens,
        notes=[*lifter.notes, note],
    )
    (out / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")
    return report


def _lifted_entries(path: Path) -> dict[str, str]:
    """The keys of the lifter's entries (its partial port's, or its kernel.rs's)."""
    try:
        module = parse_kernel_source(path)
    except RustSourceError:
        return {}
    return {entry.name: _entry_key(entry) for entry in module.entries}
