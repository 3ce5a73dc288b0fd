"""Optional prose for the diagnostic stages, through the real client."""

from __future__ import annotations

from openai_fake import Reply, serve

from toolchain.llm import LlmSettings, optional_commentary


def settings(base_url: str) -> LlmSettings:
    return LlmSettings(base_url=base_url, model="m", timeout_s=10.0, retries=1, backoff_s=0.01)


def test_commentary_from_the_endpoint() -> None:
    with serve([Reply("Two   lines\nof prose.", 10, 5)]) as endpoint:
        note, usage = optional_commentary("sys", "why?", settings=settings(endpoint.base_url))
    assert note == "LLM commentary (m): Two lines of prose."
    assert usage.total_tokens == 15
    assert [m["role"] for m in endpoint.requests[0]["messages"]] == ["system", "user"]


def test_endpoint_trouble_is_a_note_not_an_error() -> None:
    with serve([], then=Reply(status=503, error="maintenance")) as endpoint:
        note, usage = optional_commentary("sys", "why?", settings=settings(endpoint.base_url))
    assert note is not None and "HTTP 503" in note and "maintenance" in note
    assert usage.total_tokens == 0 and len(endpoint.requests) == 2  # one repeat


def test_no_llm_no_commentary(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("TILEPORT_LLM_BASE_URL", raising=False)
    assert optional_commentary("sys", "why?") == (None, optional_commentary("s", "q")[1])
