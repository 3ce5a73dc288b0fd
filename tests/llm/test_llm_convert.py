"""`tileport convert --llm` on a kernel the lifter cannot port, against a loopback
OpenAI-compatible endpoint: the first answer does not compile, the second is a
correct port; the whole pipeline runs (stage D builds the library, no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai_fake import Reply, serve

from app.cli import main
from schemas.pipeline import RunSummary, Stage
from schemas.reports import KernelWriterReport, WriterKind, load_report
from schemas.run_layout import RunLayout
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import REPO_ROOT, rs_export_binary

SPEC = REPO_ROOT / "tests" / "kernel_writer" / "fixtures" / "kernels" / "bit_union.port.yaml"
GOOD = (Path(__file__).parent / "fixtures" / "bit_union.kernel.rs").read_text()
UNKNOWN_CALL = GOOD.replace("reduce(tx,", "reduce_tile(tx,")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not rs_export_binary().exists(), reason="tileport-rs-export is not built"),
]


def fenced(source: str) -> str:
    return f"```rust\n{source}```\n"


def test_convert_with_llm_compiles_a_blocked_kernel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = [Reply(fenced(UNKNOWN_CALL), 3000, 800), Reply(fenced(GOOD), 3900, 850)]
    monkeypatch.setenv("TILEPORT_LLM_MODEL", "port-model")
    monkeypatch.setenv("TILEPORT_LLM_PRICE_PROMPT_PER_1K", "1")
    monkeypatch.setenv("TILEPORT_LLM_PRICE_COMPLETION_PER_1K", "4")
    run_dir = tmp_path / "run"
    with serve(replies) as endpoint:
        monkeypatch.setenv("TILEPORT_LLM_BASE_URL", endpoint.base_url)
        main(["convert", str(SPEC), "--no-gpu", "--llm", "--out", str(run_dir), "--json"])
    printed = json.loads(capsys.readouterr().out)
    [writer] = [s for s in printed["stages"] if s["stage"] == "kernel_writer"]
    assert (writer["attempt"], writer["verdict"]) == (1, "COMPILED"), writer["summary"]
    tokens, cost = 3800 + 4750, 6.9 * 1 + 1.65 * 4
    assert printed["llm_tokens"] == tokens and printed["llm_cost_usd"] == pytest.approx(cost)

    layout = RunLayout(run_dir.resolve())
    report = load_report(KernelWriterReport, layout)
    assert report.writer is WriterKind.LLM and report.llm_attempts == 2
    assert report.llm is not None
    assert [a.outcome.verdict for a in report.llm.attempts] == [
        KernelWriterVerdict.FAIL_COMPILE,
        KernelWriterVerdict.COMPILED,
    ]
    summary = RunSummary.model_validate_json(layout.summary_path.read_text())
    [spend] = summary.llm_usage
    assert (spend.stage, spend.attempt, spend.model) == (Stage.KERNEL_WRITER, 1, "port-model")
    assert spend.total_tokens == tokens and spend.cost_usd == pytest.approx(cost)
    # The compile error went back to the model; nothing else was asked.
    assert len(endpoint.requests) == 2
    retry = endpoint.requests[1]["messages"][-1]["content"]
    assert "failed at the compile step" in retry
    assert "call to `reduce_tile` is not supported" in retry and "kernel.rs:" in retry
    # The port reached stage D, which built the library from it.
    assert [s["stage"] for s in printed["stages"]][3] == "host_builder"
