"""Stage B's LLM fallback on the kernel writer's BLOCKED fixtures: the real
analyzer and kernel writer, the resident exporter, tileiras and rustc, and a
loopback OpenAI-compatible endpoint whose answers are scripted."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openai_fake import FakeEndpoint, Reply, serve

from nodes.analyzer import run as analyze
from nodes.kernel_writer import run as write_kernel
from nodes.kernel_writer.llm_fallback import LLM_DIR, PROMPT_FILE
from nodes.kernel_writer.stage import KERNEL_FILE, PARTIAL_FILE
from schemas.kernel_writer import REPORT_FILE, PortReport
from schemas.llm import LlmStatus
from schemas.pipeline import RunOptions
from schemas.reports import KernelWriterReport, WriterKind, save_report
from schemas.state import PipelineState, StageResult
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import REPO_ROOT, rs_export_binary

KERNELS = REPO_ROOT / "tests" / "kernel_writer" / "fixtures" / "kernels"
GOOD = (Path(__file__).parent / "fixtures" / "bit_union.kernel.rs").read_text()
# Compiles, but takes each block's maximum, not its OR: another IR, other SASS.
MAXED = GOOD.replace(
    "let reduced = reduce(tx, 0i32, 0i32, |a, b| a | b);",
    "let reduced: Tile<i32, { [] }> = reduce_max(tx, 0i32);",
)
# What the lifter says of bit_union's `|` reduce (UPSTREAM_GAPS.md G4).
BLOCKED_AT = (
    "reduce at bit_union.py:14:12: cutile-rs reduces only with reduce_sum/max/min/prod "
    "(add/max/min/mul, no flags, their own identity): its closure `reduce` ignores the dim "
    "and identity"
)

pytestmark = pytest.mark.skipif(
    not rs_export_binary().exists(), reason="tileport-rs-export is not built (make setup)"
)


def fenced(source: str) -> str:
    return f"Here is kernel.rs.\n\n```rust\n{source}```\n"


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("TILEPORT_LLM_MODEL", "port-model")
    monkeypatch.setenv("TILEPORT_LLM_PRICE_PROMPT_PER_1K", "0.5")
    monkeypatch.setenv("TILEPORT_LLM_PRICE_COMPLETION_PER_1K", "2")
    monkeypatch.setenv("TILEPORT_LLM_BACKOFF_S", "0.05")
    monkeypatch.setenv("TILEPORT_LLM_RETRIES", "1")
    return monkeypatch


def analysed(fixture: str, run_dir: Path, **state: object) -> PipelineState:
    """A run of `fixture` whose analyzer has run, about to run stage B with --llm."""
    values: dict[str, object] = {
        "run_id": "run-llm",
        "operator": fixture,
        "spec_path": str(KERNELS / f"{fixture}.port.yaml"),
        "run_dir": str(run_dir),
        "options": RunOptions(no_gpu=True, llm=True),
        "started_at": datetime.now(UTC),
    }
    values.update(state)
    pipeline = PipelineState(**values)  # type: ignore[arg-type]
    pipeline.layout().prepare_fresh()
    save_report(analyze(pipeline).report, pipeline.layout())
    return pipeline


def kernel_writer(state: PipelineState) -> tuple[KernelWriterReport, StageResult]:
    result = write_kernel(state)
    assert isinstance(result.report, KernelWriterReport)
    return result.report, result


def first_request(endpoint: FakeEndpoint) -> str:
    return str(endpoint.requests[0]["messages"][1]["content"])


@pytest.mark.slow
def test_a_blocked_kernel_is_ported_by_the_llm_on_its_second_attempt(
    llm_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replies = [Reply(fenced(MAXED), 4000, 900), Reply(fenced(GOOD), 5200, 950)]
    with serve(replies) as endpoint:
        llm_env.setenv("TILEPORT_LLM_BASE_URL", endpoint.base_url)
        state = analysed("bit_union", tmp_path)
        report, result = kernel_writer(state)
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert report.writer is WriterKind.LLM and report.llm_attempts == 2
    assert report.summary.endswith("(written by the LLM, attempt 2)")
    # What the lifter could not lift is still said, with where it is.
    assert report.unsupported_constructs == [BLOCKED_AT]
    record = report.llm
    assert record is not None and record.status is LlmStatus.SUCCEEDED
    assert record.lifter_verdict is KernelWriterVerdict.BLOCKED
    assert [a.outcome.verdict for a in record.attempts] == [
        KernelWriterVerdict.FAIL_FIXABLE,
        KernelWriterVerdict.COMPILED,
    ]
    assert record.llm_entries == ["bit_union_kernel"]
    assert record.usage.total_tokens == 4900 + 6150
    assert record.usage.cost_usd == pytest.approx(9.2 * 0.5 + 1.85 * 2)
    assert (result.llm_tokens, result.llm_model) == (11050, "port-model")
    assert result.llm_cost_usd == pytest.approx(record.usage.cost_usd)

    # The port is proven as a lifted one is, and the proof names its writer.
    layout = state.layout()
    assert (layout.generated_dir / KERNEL_FILE).read_text() == GOOD
    port = PortReport.model_validate_json((layout.generated_dir / REPORT_FILE).read_text())
    assert port.verdict is KernelWriterVerdict.COMPILED and port.rustc_check is True
    assert [(c.config, c.level) for c in port.checks] == [("tile256__blocks", "exact")]
    assert {t.target for t in port.checks[0].targets} == {"sm_90", "sm_100"}
    assert [(e.name, e.written_by) for e in port.entries] == [("bit_union_kernel", "llm")]
    assert port.llm_tokens == 11050
    assert layout.resolve(report.generated_ir["tile256"]).read_text().count("= reduce ") == 1

    # The first request: the analysis, the reference IR, the partial port with the
    # construct marked where it stands, the op mapping, the source, the contract.
    prompt = first_request(endpoint)
    assert '"kernel_name": "bit_union_kernel"' in prompt
    assert "reduce %tile dim=0 identities=[0 : i32] : tile<256xi32> -> tile<i32>" in prompt
    assert "// TILEPORT-UNLIFTED: `reduce` at bit_union.py:14:12" in prompt
    assert "## known upstream gap G4 (docs/UPSTREAM_GAPS.md)" in prompt
    assert "| `load_view_tko` |" in prompt
    assert "union = ct.reduce(tx, 0, lambda a, b: a | b, 0, keepdims=True)" in prompt
    assert "variant `tile256`: entry `bit_union_kernel`" in prompt
    assert "- configuration tile256__blocks: TILE = 256" in prompt
    assert (layout.generated_dir / PARTIAL_FILE).is_file()
    assert (layout.generated_dir / LLM_DIR / PROMPT_FILE).read_text() == prompt
    # The retry carries the IR-diff findings and the SASS that differs.
    retry = endpoint.requests[1]["messages"][-1]["content"]
    assert "failed at the ir_diff step" in retry and "tile256__blocks: IR different" in retry
    assert "SASS on sm_90:" in retry


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def test_an_endpoint_that_is_down_leaves_a_clear_blocked(
    llm_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    llm_env.setenv("TILEPORT_LLM_BASE_URL", dead_url())
    state = analysed("bit_union", tmp_path)
    started = time.monotonic()
    report, result = kernel_writer(state)
    assert time.monotonic() - started < 60
    assert report.verdict is KernelWriterVerdict.BLOCKED and report.writer is WriterKind.LIFTER
    assert "; LLM fallback endpoint_error: attempt 1: cannot reach the LLM endpoint" in (
        report.summary
    )
    assert report.llm is not None and report.llm_attempts == 0
    assert result.llm_tokens == 0 and result.llm_model is None
    assert not (state.layout().generated_dir / KERNEL_FILE).exists()


@pytest.mark.parametrize(
    ("fixture", "gap", "marked", "tried"),
    [
        ("row_scan_axis1", "G5", "`scan` at row_scan_axis1.py:18:18", "A module-declared op"),
        (
            "expert_search_break",
            "G8",
            "`loop` (its `if`) at expert_search_break.py:27:8",
            "lifted into a helper function",
        ),
    ],
)
def test_the_request_names_the_known_upstream_gap(
    fixture: str, gap: str, marked: str, tried: str, llm_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    llm_env.setenv("TILEPORT_LLM_MAX_ATTEMPTS", "1")
    with serve([], then=Reply("I would rather not.")) as endpoint:
        llm_env.setenv("TILEPORT_LLM_BASE_URL", endpoint.base_url)
        report, _ = kernel_writer(analysed(fixture, tmp_path))
    assert report.verdict is KernelWriterVerdict.BLOCKED
    assert report.llm is not None and report.llm.status is LlmStatus.EXHAUSTED
    assert "LLM fallback exhausted: none of 1 attempt(s) verified" in report.summary
    prompt = first_request(endpoint)
    assert f"## known upstream gap {gap} (docs/UPSTREAM_GAPS.md)" in prompt
    assert f"## {gap}: " in prompt and tried in prompt
    assert f"// TILEPORT-UNLIFTED: {marked}" in prompt


def test_a_run_past_its_cap_asks_nothing(llm_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    llm_env.setenv("TILEPORT_LLM_MAX_RUN_TOKENS", "5000")
    with serve([Reply(fenced(GOOD))]) as endpoint:
        llm_env.setenv("TILEPORT_LLM_BASE_URL", endpoint.base_url)
        report, result = kernel_writer(analysed("bit_union", tmp_path, llm_tokens=5000))
    assert endpoint.requests == []
    assert report.verdict is KernelWriterVerdict.BLOCKED
    assert report.llm is not None and report.llm.status is LlmStatus.BUDGET_EXHAUSTED
    assert "the run has spent 5000 LLM tokens, its cap is 5000" in report.summary
    assert result.llm_tokens == 0


def test_without_an_endpoint_or_without_llm_nothing_is_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TILEPORT_LLM_BASE_URL", raising=False)
    report, _ = kernel_writer(analysed("bit_union", tmp_path / "unset"))
    assert report.llm is not None and report.llm.status is LlmStatus.NOT_CONFIGURED
    assert "TILEPORT_LLM_BASE_URL" in report.summary
    options = RunOptions(no_gpu=True, llm=False)
    report, _ = kernel_writer(analysed("bit_union", tmp_path / "off", options=options))
    assert report.llm is None and report.llm_attempts == 0
    assert report.summary == BLOCKED_AT
