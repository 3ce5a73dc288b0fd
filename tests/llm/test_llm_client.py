"""The client's robustness against a misbehaving endpoint, through the real
langchain-openai client and a loopback server: every case ends in a clear
status, after a bounded number of requests, within a bounded time."""

from __future__ import annotations

import socket
import time

import pytest
from kernel_analysis import analysis
from openai_fake import Reply, serve

from schemas.llm import LlmPortResult, LlmStatus, TokenUsage, VerifyOutcome, VerifyStep
from toolchain import llm
from toolchain.llm import (
    ENV_BACKOFF,
    ENV_BASE_URL,
    ENV_MAX_RUN_COST,
    ENV_MAX_RUN_TOKENS,
    ENV_MODEL,
    ENV_RETRIES,
    LlmConfigError,
    LlmSettings,
    llm_port,
    load_llm_settings,
    optional_commentary,
)

GOOD = "#[cutile::module]\nmod k { /* good */ }\n"
BAD = "#[cutile::module]\nmod k { /* bad */ }\n"
IR = {"v": "entry @k() {\n  return\n}\n"}


def fenced(source: str) -> str:
    return f"```rust\n{source}```\n"


def verify(source: str) -> VerifyOutcome:
    if source == GOOD:
        return VerifyOutcome(ok=True, step=VerifyStep.IR_DIFF)
    return VerifyOutcome(ok=False, step=VerifyStep.COMPILE, feedback="error: bad kernel")


def settings(base_url: str, **overrides: object) -> LlmSettings:
    values: dict[str, object] = {
        "base_url": base_url,
        "model": "m",
        "timeout_s": 5.0,
        "retries": 2,
        "backoff_s": 0.05,
    }
    values.update(overrides)
    return LlmSettings(**values)  # type: ignore[arg-type]


def port(
    base_url: str, attempts: int = 3, spent: TokenUsage | None = None, **overrides: object
) -> LlmPortResult:
    return llm_port(
        analysis(),
        IR,
        "",
        "",
        verify,
        attempts,
        settings=settings(base_url, **overrides),
        spent=spent,
    )


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def test_endpoint_down_ends_after_its_retries() -> None:
    started = time.monotonic()
    result = port(dead_url())
    assert time.monotonic() - started < 5.0  # 0.05 + 0.1 s of backoff, refused at once
    assert result.status is LlmStatus.ENDPOINT_ERROR
    assert result.reason.startswith("attempt 1: cannot reach the LLM endpoint (after 2 repeat(s))")
    assert result.attempts == [] and result.usage.total_tokens == 0


def test_server_errors_are_repeated_then_answered() -> None:
    replies = [
        Reply(status=500, error="busy"),
        Reply(status=503, error="busy"),
        Reply(fenced(GOOD)),
    ]
    with serve(replies) as endpoint:
        result = port(endpoint.base_url)
    assert result.status is LlmStatus.SUCCEEDED
    [attempt] = result.attempts
    assert attempt.retries == 2 and attempt.outcome.ok
    assert len(endpoint.requests) == 3
    gaps = [b - a for a, b in zip(endpoint.times, endpoint.times[1:], strict=False)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # the backoff doubles


def test_a_storm_of_server_errors_is_an_endpoint_error() -> None:
    with serve([], then=Reply(status=502, error="bad gateway")) as endpoint:
        started = time.monotonic()
        result = port(endpoint.base_url, retries=3)
        elapsed = time.monotonic() - started
    assert result.status is LlmStatus.ENDPOINT_ERROR
    assert "HTTP 502" in result.reason and "after 3 repeat(s)" in result.reason
    assert len(endpoint.requests) == 4  # one request and its 3 repeats, no more
    assert 0.05 + 0.1 + 0.2 <= elapsed < 5.0


def test_a_429_storm_follows_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    slow_down = Reply(status=429, error="rate limited", headers=(("Retry-After", "0.3"),))
    with serve([], then=slow_down) as endpoint:
        result = port(endpoint.base_url, retries=2)
    assert result.status is LlmStatus.ENDPOINT_ERROR and "HTTP 429" in result.reason
    gaps = [b - a for a, b in zip(endpoint.times, endpoint.times[1:], strict=False)]
    assert len(gaps) == 2 and all(gap >= 0.3 for gap in gaps)  # not the 0.05 s backoff
    # An endpoint asking for an hour waits at most the cap.
    monkeypatch.setattr(llm, "BACKOFF_CAP_S", 0.2)
    forever = Reply(status=429, error="rate limited", headers=(("Retry-After", "3600"),))
    with serve([], then=forever) as endpoint:
        started = time.monotonic()
        result = port(endpoint.base_url, retries=2)
        assert time.monotonic() - started < 3.0
    assert result.status is LlmStatus.ENDPOINT_ERROR and len(endpoint.requests) == 3


def test_a_timeout_is_repeated_then_reported() -> None:
    with serve([], then=Reply(fenced(GOOD), delay_s=3.0)) as endpoint:
        started = time.monotonic()
        result = port(endpoint.base_url, timeout_s=0.3, retries=1)
        elapsed = time.monotonic() - started
    assert result.status is LlmStatus.ENDPOINT_ERROR
    assert "timed out (after 1 repeat(s))" in result.reason
    assert len(endpoint.requests) == 2 and elapsed < 2.5


def test_garbage_answers_are_failed_attempts() -> None:
    replies = [
        Reply(raw=b"<html>gateway</html>"),
        Reply(raw=b'{"choices": []}'),
        Reply("Sorry, I cannot write Rust today."),
        Reply(fenced(GOOD)),
    ]
    with serve(replies) as endpoint:
        result = port(endpoint.base_url, attempts=4)
    assert result.status is LlmStatus.SUCCEEDED
    steps = [a.outcome.step for a in result.attempts]
    assert steps == [VerifyStep.EXTRACT] * 3 + [VerifyStep.IR_DIFF]
    assert "not a chat completion" in result.attempts[0].outcome.feedback
    assert "not a chat completion" in result.attempts[1].outcome.feedback
    assert "no ```rust fenced block" in result.attempts[2].outcome.feedback
    # A reply that could not be read adds nothing to the conversation; prose does.
    assert [len(r["messages"]) for r in endpoint.requests] == [2, 2, 2, 4]


def test_only_garbage_exhausts_the_attempts() -> None:
    with serve([], then=Reply(raw=b"not json")) as endpoint:
        started = time.monotonic()
        result = port(endpoint.base_url, attempts=3)
        assert time.monotonic() - started < 3.0
    assert result.status is LlmStatus.EXHAUSTED and len(result.attempts) == 3
    assert len(endpoint.requests) == 3
    assert "none of 3 attempt(s) verified; the last failed at extract" in result.reason


def test_the_token_cap_stops_the_loop() -> None:
    with serve([], then=Reply(fenced(BAD), 100, 50)) as endpoint:
        result = port(endpoint.base_url, attempts=5, max_run_tokens=400)
    # 150 tokens a reply: after 3 replies the run has spent 450 >= 400.
    assert result.status is LlmStatus.BUDGET_EXHAUSTED
    assert len(endpoint.requests) == 3 and len(result.attempts) == 3
    assert result.reason.startswith("no attempt 4: the run has spent 450 LLM tokens")
    assert ENV_MAX_RUN_TOKENS in result.reason


def test_what_the_run_spent_before_counts_against_the_cap() -> None:
    with serve([Reply(fenced(GOOD))]) as endpoint:
        result = port(endpoint.base_url, max_run_tokens=1000, spent=TokenUsage(total_tokens=1000))
    assert result.status is LlmStatus.BUDGET_EXHAUSTED and "no attempt 1" in result.reason
    assert endpoint.requests == []


def test_the_cost_cap_stops_the_loop() -> None:
    with serve([], then=Reply(fenced(BAD), 1000, 1000)) as endpoint:
        result = port(
            endpoint.base_url,
            attempts=5,
            price_prompt_per_1k=1.0,
            price_completion_per_1k=1.0,
            max_run_cost_usd=3.0,
        )
    assert result.status is LlmStatus.BUDGET_EXHAUSTED
    assert len(endpoint.requests) == 2 and result.usage.cost_usd == pytest.approx(4.0)
    assert "$4.0000" in result.reason and ENV_MAX_RUN_COST in result.reason


def test_commentary_respects_the_cap() -> None:
    with serve([Reply("prose")]) as endpoint:
        note, usage = optional_commentary(
            "sys",
            "why?",
            settings=settings(endpoint.base_url, max_run_tokens=10),
            spent=TokenUsage(total_tokens=10),
        )
    assert note is not None and note.startswith("LLM commentary skipped: the run has spent 10")
    assert usage.total_tokens == 0 and endpoint.requests == []


def test_robustness_settings_from_the_environment() -> None:
    base = {ENV_BASE_URL: "http://x/v1", ENV_MODEL: "m"}
    defaults = load_llm_settings(base)
    assert defaults is not None
    assert (defaults.retries, defaults.backoff_s) == (3, 1.0)
    assert (defaults.max_run_tokens, defaults.max_run_cost_usd) == (200_000, 10.0)
    loaded = load_llm_settings(
        {
            **base,
            ENV_RETRIES: "0",
            ENV_BACKOFF: "0.5",
            ENV_MAX_RUN_TOKENS: "0",
            ENV_MAX_RUN_COST: "0",
        }
    )
    assert loaded is not None and loaded.retries == 0 and loaded.backoff_s == 0.5
    assert loaded.over_budget(TokenUsage(total_tokens=10**9, cost_usd=1e6)) is None  # 0: no cap
    for name, bad in ((ENV_RETRIES, "-1"), (ENV_MAX_RUN_TOKENS, "lots"), (ENV_BACKOFF, "-2")):
        with pytest.raises(LlmConfigError, match=name):
            load_llm_settings({**base, name: bad})
