"""The LLM fallback loop against a loopback OpenAI-compatible endpoint: the real
langchain-openai client sends real HTTP requests and parses real replies."""

from __future__ import annotations

import socket

import pytest
from kernel_analysis import analysis
from openai_fake import Reply, serve

from schemas.llm import LlmStatus, VerifyOutcome, VerifyStep
from toolchain.llm import (
    ENV_BASE_URL,
    ENV_MAX_ATTEMPTS,
    ENV_MODEL,
    LlmConfigError,
    LlmSettings,
    extract_rust_source,
    llm_port,
    load_llm_settings,
)

GOOD = "#[cutile::module]\nmod softmax { /* good */ }\n"
BAD = "#[cutile::module]\nmod softmax { /* bad */ }\n"
IR = {"row": "entry @softmax_kernel() {\n  return\n}\n"}


def fenced(source: str) -> str:
    return f"Here is the port.\n\n```rust\n{source}```\n"


class Verifier:
    """Accepts only GOOD; records every source it was given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, source: str) -> VerifyOutcome:
        self.seen.append(source)
        if source == GOOD:
            return VerifyOutcome(ok=True, step=VerifyStep.IR_DIFF)
        return VerifyOutcome(
            ok=False, step=VerifyStep.COMPILE, feedback="error[E0425]: cannot find value `tile`"
        )


def settings(base_url: str, **overrides: object) -> LlmSettings:
    values: dict[str, object] = {
        "base_url": base_url,
        "model": "port-model",
        "api_key": "sk-test",
        "price_prompt_per_1k": 0.5,
        "price_completion_per_1k": 2.0,
        "timeout_s": 10.0,
        "backoff_s": 0.01,
    }
    values.update(overrides)
    return LlmSettings(**values)  # type: ignore[arg-type]


def test_success_on_the_second_attempt() -> None:
    replies = [Reply(fenced(BAD), 1000, 200), Reply(fenced(GOOD), 1500, 300)]
    verify = Verifier()
    with serve(replies) as endpoint:
        result = llm_port(
            analysis(),
            IR,
            "// partial",
            "load -> load_tile",
            verify,
            3,
            settings=settings(endpoint.base_url),
        )
    assert result.status is LlmStatus.SUCCEEDED
    assert result.source == GOOD
    assert [a.outcome.ok for a in result.attempts] == [False, True]
    assert verify.seen == [BAD, GOOD]
    assert result.usage.prompt_tokens == 2500
    assert result.usage.completion_tokens == 500
    assert result.usage.total_tokens == 3000
    assert result.usage.cost_usd == pytest.approx(2.5 * 0.5 + 0.5 * 2.0)
    assert len(endpoint.requests) == 2
    first, second = endpoint.requests
    assert first["model"] == "port-model"
    assert endpoint.headers[0]["authorization"] == "Bearer sk-test"
    assert "entry @softmax_kernel" in first["messages"][1]["content"]
    assert "// partial" in first["messages"][1]["content"]
    # The retry carries the failed reply and the compiler's feedback.
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert "cannot find value `tile`" in second["messages"][-1]["content"]
    assert "compile" in second["messages"][-1]["content"]


def test_all_attempts_fail() -> None:
    replies = [Reply(fenced(BAD)) for _ in range(3)]
    with serve(replies) as endpoint:
        result = llm_port(
            analysis(), IR, "", "", Verifier(), 3, settings=settings(endpoint.base_url)
        )
    assert result.status is LlmStatus.EXHAUSTED
    assert result.source is None
    assert len(result.attempts) == 3 and len(endpoint.requests) == 3
    assert "none of 3 attempt(s) verified" in result.reason
    assert "cannot find value" in result.reason
    assert result.usage.total_tokens == 3 * 150


def test_attempts_default_to_the_settings() -> None:
    replies = [Reply(fenced(BAD)) for _ in range(5)]
    with serve(replies) as endpoint:
        result = llm_port(
            analysis(), IR, "", "", Verifier(), settings=settings(endpoint.base_url, max_attempts=2)
        )
    assert result.status is LlmStatus.EXHAUSTED
    assert len(endpoint.requests) == 2


def test_a_reply_without_rust_is_a_failed_attempt_not_a_verification() -> None:
    replies = [Reply("I cannot port this kernel."), Reply(fenced(GOOD))]
    verify = Verifier()
    with serve(replies) as endpoint:
        result = llm_port(analysis(), IR, "", "", verify, 2, settings=settings(endpoint.base_url))
    assert result.status is LlmStatus.SUCCEEDED
    assert result.attempts[0].outcome.step is VerifyStep.EXTRACT
    assert verify.seen == [GOOD]


def test_server_error_stops_the_loop_after_its_retries() -> None:
    overloaded = Reply(status=500, error="model overloaded")
    with serve([Reply(fenced(BAD))], then=overloaded) as endpoint:
        result = llm_port(
            analysis(), IR, "", "", Verifier(), 3, settings=settings(endpoint.base_url, retries=2)
        )
    assert result.status is LlmStatus.ENDPOINT_ERROR
    assert "attempt 2" in result.reason and "HTTP 500" in result.reason
    assert "model overloaded" in result.reason and "after 2 repeat(s)" in result.reason
    assert len(result.attempts) == 1
    assert result.usage.total_tokens == 150  # what the first reply cost is still counted
    assert len(endpoint.requests) == 1 + 3  # the failed request and exactly its 2 repeats


def test_unreachable_endpoint() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = llm_port(
        analysis(),
        IR,
        "",
        "",
        Verifier(),
        2,
        settings=settings(f"http://127.0.0.1:{port}/v1", retries=1),
    )
    assert result.status is LlmStatus.ENDPOINT_ERROR
    assert "cannot reach" in result.reason and "after 1 repeat(s)" in result.reason


def test_not_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_BASE_URL, raising=False)
    monkeypatch.setenv(ENV_MODEL, "some-model")
    result = llm_port(analysis(), IR, "", "", Verifier())
    assert result.status is LlmStatus.NOT_CONFIGURED
    assert ENV_BASE_URL in result.reason
    assert result.attempts == [] and result.usage.total_tokens == 0


def test_invalid_settings_are_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_BASE_URL, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(ENV_MODEL, "m")
    monkeypatch.setenv(ENV_MAX_ATTEMPTS, "three")
    result = llm_port(analysis(), IR, "", "", Verifier())
    assert result.status is LlmStatus.NOT_CONFIGURED
    assert ENV_MAX_ATTEMPTS in result.reason


def test_settings_from_the_environment() -> None:
    assert load_llm_settings({}) is None
    assert load_llm_settings({ENV_BASE_URL: "http://x/v1"}) is None
    loaded = load_llm_settings(
        {
            ENV_BASE_URL: "http://x/v1/",
            ENV_MODEL: "m",
            ENV_MAX_ATTEMPTS: "4",
            "TILEPORT_LLM_PRICE_PROMPT_PER_1K": "0.25",
        }
    )
    assert loaded is not None
    assert loaded.base_url == "http://x/v1"
    assert loaded.max_attempts == 4 and loaded.price_prompt_per_1k == 0.25
    assert loaded.cost(2000, 1000) == pytest.approx(0.5)
    for bad in ({ENV_MAX_ATTEMPTS: "0"}, {"TILEPORT_LLM_PRICE_PROMPT_PER_1K": "-1"}):
        with pytest.raises(LlmConfigError):
            load_llm_settings({ENV_BASE_URL: "http://x/v1", ENV_MODEL: "m", **bad})


def test_rejects_a_nonpositive_attempt_bound() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        llm_port(analysis(), IR, "", "", Verifier(), 0, settings=settings("http://127.0.0.1:9/v1"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```rust\nfn a() {}\n```", "fn a() {}\n"),
        ("text\n```rs\nfn b() {}\n```\nmore", "fn b() {}\n"),
        ("```json\n{}\n```\n```rust\nfn c() {}\n```", "fn c() {}\n"),
        ("```\nfn d() {}\n```", "fn d() {}\n"),
        ("```\none\n```\n```\ntwo\n```", None),
        ("```rust\n   \n```", None),
        ("no code at all", None),
        ("```rust\nunterminated", None),
    ],
)
def test_extract_rust_source(text: str, expected: str | None) -> None:
    assert extract_rust_source(text) == expected
