"""The LLM fallback: an OpenAI-compatible chat endpoint through langchain-openai.

The deterministic lifter ports the supported subset with zero tokens; this
module is used only where it stops (and, for prose only, by the diagnostic
stages). Settings come from the environment:

    TILEPORT_LLM_BASE_URL     the endpoint, e.g. https://host/v1   (required)
    TILEPORT_LLM_MODEL        the model name                        (required)
    TILEPORT_LLM_API_KEY      bearer key; endpoints without auth accept any
    TILEPORT_LLM_MAX_ATTEMPTS attempts per port (default 3)
    TILEPORT_LLM_PRICE_PROMPT_PER_1K / TILEPORT_LLM_PRICE_COMPLETION_PER_1K
                              USD per 1000 tokens, for the cost record (default 0)
    TILEPORT_LLM_TIMEOUT_S    seconds per request (default 120)
    TILEPORT_LLM_RETRIES      repeats of a request after a 429, a 5xx, a timeout or
                              a refused connection (default 3)
    TILEPORT_LLM_BACKOFF_S    the first wait before a repeat, doubled each time, at
                              most 30 s; a Retry-After header sets it (default 1)
    TILEPORT_LLM_MAX_RUN_TOKENS / TILEPORT_LLM_MAX_RUN_COST_USD
                              the run's cap: no request starts once the run has
                              spent this many tokens or dollars (default 200000
                              and 10; 0 turns a cap off)

`llm_port` runs a bounded loop: each completion's Rust source goes to the
kernel writer's `verify` (compile, then IR diff), whose feedback is the next
prompt. A reply that cannot be read counts as a failed attempt; an endpoint
that still fails after its retries ends the loop. Tokens and cost come from
each response's usage metadata.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from schemas.llm import (
    LlmAttempt,
    LlmPortResult,
    LlmStatus,
    TokenUsage,
    VerifyOutcome,
    VerifyStep,
)
from schemas.reports import KernelAnalysis

ENV_BASE_URL: Final = "TILEPORT_LLM_BASE_URL"
ENV_MODEL: Final = "TILEPORT_LLM_MODEL"
ENV_API_KEY: Final = "TILEPORT_LLM_API_KEY"
ENV_MAX_ATTEMPTS: Final = "TILEPORT_LLM_MAX_ATTEMPTS"
ENV_PRICE_PROMPT: Final = "TILEPORT_LLM_PRICE_PROMPT_PER_1K"
ENV_PRICE_COMPLETION: Final = "TILEPORT_LLM_PRICE_COMPLETION_PER_1K"
ENV_TIMEOUT: Final = "TILEPORT_LLM_TIMEOUT_S"
ENV_RETRIES: Final = "TILEPORT_LLM_RETRIES"
ENV_BACKOFF: Final = "TILEPORT_LLM_BACKOFF_S"
ENV_MAX_RUN_TOKENS: Final = "TILEPORT_LLM_MAX_RUN_TOKENS"
ENV_MAX_RUN_COST: Final = "TILEPORT_LLM_MAX_RUN_COST_USD"

DEFAULT_MAX_ATTEMPTS: Final = 3
DEFAULT_TIMEOUT_S: Final = 120.0
DEFAULT_RETRIES: Final = 3
DEFAULT_BACKOFF_S: Final = 1.0
BACKOFF_CAP_S: Final = 30.0
DEFAULT_MAX_RUN_TOKENS: Final = 200_000
DEFAULT_MAX_RUN_COST_USD: Final = 10.0
RETRIED_STATUSES: Final = frozenset({408, 409, 429})  # and every 5xx
UNAUTHENTICATED_KEY: Final = "no-key"
NOT_CONFIGURED_REASON: Final = f"no LLM is configured: set {ENV_BASE_URL} and {ENV_MODEL}"

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_RUST_TAGS = frozenset({"rust", "rs"})


class LlmConfigError(ValueError):
    """An LLM setting is present but unusable (names the variable)."""


class LlmEndpointError(RuntimeError):
    """The endpoint did not answer, even after its retries."""

    def __init__(self, message: str, retries: int = 0) -> None:
        super().__init__(message)
        self.retries = retries


class LlmMalformedReply(LlmEndpointError):
    """The endpoint answered, but not with a readable chat completion."""


@dataclass(frozen=True)
class LlmSettings:
    base_url: str
    model: str
    api_key: str = UNAUTHENTICATED_KEY
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    price_prompt_per_1k: float = 0.0
    price_completion_per_1k: float = 0.0
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    max_run_tokens: int = DEFAULT_MAX_RUN_TOKENS
    max_run_cost_usd: float = DEFAULT_MAX_RUN_COST_USD

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens / 1000 * self.price_prompt_per_1k
            + completion_tokens / 1000 * self.price_completion_per_1k
        )

    def over_budget(self, spent: TokenUsage) -> str | None:
        """Why the run may start no further request, or None while it may."""
        if self.max_run_tokens and spent.total_tokens >= self.max_run_tokens:
            return (
                f"the run has spent {spent.total_tokens} LLM tokens, its cap is "
                f"{self.max_run_tokens} ({ENV_MAX_RUN_TOKENS})"
            )
        if self.max_run_cost_usd and spent.cost_usd >= self.max_run_cost_usd:
            return (
                f"the run has spent ${spent.cost_usd:.4f} on the LLM, its cap is "
                f"${self.max_run_cost_usd:.4f} ({ENV_MAX_RUN_COST})"
            )
        return None

    def backoff(self, retry: int, error: openai.OpenAIError) -> float:
        """Seconds to wait before repeat `retry` (0-based): the endpoint's Retry-After
        when it sends one, else the doubling backoff; at most BACKOFF_CAP_S."""
        wait: float = self.backoff_s * 2**retry
        if isinstance(error, openai.APIStatusError):
            asked = _retry_after(error.response.headers)
            wait = wait if asked is None else asked
        return min(wait, BACKOFF_CAP_S)


def load_llm_settings(env: Mapping[str, str] | None = None) -> LlmSettings | None:
    """The settings from the environment; None when no endpoint is configured."""
    env = os.environ if env is None else env
    base_url = env.get(ENV_BASE_URL, "").strip()
    model = env.get(ENV_MODEL, "").strip()
    if not base_url or not model:
        return None
    settings = LlmSettings(
        base_url=base_url.rstrip("/"),
        model=model,
        api_key=env.get(ENV_API_KEY, "").strip() or UNAUTHENTICATED_KEY,
        max_attempts=_int_setting(env, ENV_MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS),
        price_prompt_per_1k=_float_setting(env, ENV_PRICE_PROMPT, 0.0),
        price_completion_per_1k=_float_setting(env, ENV_PRICE_COMPLETION, 0.0),
        timeout_s=_float_setting(env, ENV_TIMEOUT, DEFAULT_TIMEOUT_S),
        retries=_int_setting(env, ENV_RETRIES, DEFAULT_RETRIES),
        backoff_s=_float_setting(env, ENV_BACKOFF, DEFAULT_BACKOFF_S),
        max_run_tokens=_int_setting(env, ENV_MAX_RUN_TOKENS, DEFAULT_MAX_RUN_TOKENS),
        max_run_cost_usd=_float_setting(env, ENV_MAX_RUN_COST, DEFAULT_MAX_RUN_COST_USD),
    )
    if settings.max_attempts < 1:
        raise LlmConfigError(f"{ENV_MAX_ATTEMPTS} must be at least 1")
    if settings.timeout_s <= 0:
        raise LlmConfigError(f"{ENV_TIMEOUT} must be positive")
    return settings


def _int_setting(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise LlmConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < 0:
        raise LlmConfigError(f"{name} must not be negative, got {raw!r}")
    return value


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait an endpoint asks for (`retry-after-ms`, or `retry-after` in seconds)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name, "")) * scale)
        except ValueError:
            continue
    return None


def _float_setting(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise LlmConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < 0:
        raise LlmConfigError(f"{name} must not be negative, got {raw!r}")
    return value


# -- one completion ---------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    text: str
    usage: TokenUsage
    retries: int = 0


class ChatModel(Protocol):
    """What the loop needs from a chat endpoint (the real one, or a test double)."""

    def complete(self, messages: Sequence[BaseMessage]) -> Completion: ...


class OpenAIChat:
    """An OpenAI-compatible /v1/chat/completions endpoint through langchain-openai."""

    def __init__(self, settings: LlmSettings) -> None:
        self.settings = settings
        # The openai client's own retries are off: `complete` repeats a request itself,
        # so that every repeat is counted and bounded by the settings.
        self._client = ChatOpenAI(
            base_url=settings.base_url,
            api_key=SecretStr(settings.api_key),
            model=settings.model,
            timeout=settings.timeout_s,
            max_retries=0,
            temperature=0,
        )

    def complete(self, messages: Sequence[BaseMessage]) -> Completion:
        """One completion; a 429, 5xx, timeout or refused connection is repeated up to
        `retries` times with backoff. Raises LlmEndpointError when the endpoint still
        fails, LlmMalformedReply when its answer is not a readable completion."""
        retry = 0
        while True:
            try:
                reply = self._client.invoke(list(messages))
                break
            except openai.OpenAIError as exc:
                if not _retried(exc) or retry >= self.settings.retries:
                    raise LlmEndpointError(_endpoint_problem(exc, retry), retry) from exc
                time.sleep(self.settings.backoff(retry, exc))
                retry += 1
            except (ValueError, LookupError, TypeError) as exc:
                # The body was not a chat completion (not JSON, no choices, wrong shape).
                problem = f"the endpoint's reply is not a chat completion: {exc}"
                raise LlmMalformedReply(problem, retry) from exc
        if not isinstance(reply, AIMessage) or not isinstance(reply.content, str):
            raise LlmMalformedReply("the endpoint's reply has no text content", retry)
        return Completion(text=reply.content, usage=self._usage(reply), retries=retry)

    def _usage(self, reply: AIMessage) -> TokenUsage:
        meta = reply.usage_metadata
        if meta is None:
            return TokenUsage()
        prompt, completion = meta["input_tokens"], meta["output_tokens"]
        return TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=meta["total_tokens"],
            cost_usd=self.settings.cost(prompt, completion),
        )


def _retried(exc: openai.OpenAIError) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRIED_STATUSES or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)  # timeouts included


def _endpoint_problem(exc: openai.OpenAIError, retries: int) -> str:
    after = f" (after {retries} repeat(s))" if retries else ""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code} from the LLM endpoint{after}: {exc.message}"
    if isinstance(exc, openai.APITimeoutError):
        return f"the LLM endpoint timed out{after}"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach the LLM endpoint{after}: {exc.message}"
    return f"LLM endpoint error{after}: {exc}"


def ask(chat: ChatModel, system: str, question: str) -> Completion:
    """One question, one answer (the diagnostic stages' optional prose)."""
    return chat.complete([SystemMessage(system), HumanMessage(question)])


# -- the port loop ------------------------------------------------------------------

PORT_SYSTEM_PROMPT: Final = """\
You port cuTile Python GPU kernels to cuTile Rust (crate `cutile`, pinned =0.5.0).
The port must reproduce the reference kernel's Tile IR: the same memory-op families
(partition-view loads/stores vs pointer gather/scatter), tile shapes, reductions (kind,
axis, identity), padding values, math ops and hints. Constants that change tile shapes,
trip counts or branches are const generics; dtypes are a generic `E: ElementType`.
Keep the entry names and parameters the request gives, and name generic parameters
only from its list. Where cutile-rs's own function emits something else than the
reference, a `#[cutile::module]` may declare the op itself with `#[cuda_tile::op(..)]`.
Reply with the complete `kernel.rs` in a single ```rust fenced block, nothing else."""


def port_prompt(
    analysis: KernelAnalysis,
    reference_ir: Mapping[str, str],
    partial_kernel: str,
    op_mapping: str,
    context: Sequence[tuple[str, str]] = (),
) -> str:
    """The first request: the analysis, the reference IR per variant, what the
    lifter produced, the op mapping it used, then the caller's `context`
    sections (title, text): what the lifter could not do and why, the entries
    the port must have."""
    analysis_json = json.dumps(analysis.model_dump(mode="json"), indent=1)
    parts = [
        "## analysis.json",
        f"```json\n{analysis_json}\n```",
        *(
            f"## reference Tile IR, variant {name}\n```mlir\n{text}\n```"
            for name, text in sorted(reference_ir.items())
        ),
        "## the deterministic lifter's partial kernel.rs (unsupported constructs marked)",
        f"```rust\n{partial_kernel}\n```",
        "## op mapping (cuTile Python / Tile IR -> cutile-rs)",
        op_mapping,
        *(f"## {title}\n\n{text}" for title, text in context),
        "Write the complete kernel.rs.",
    ]
    return "\n\n".join(parts)


def retry_prompt(outcome: VerifyOutcome) -> str:
    return (
        f"That kernel.rs failed at the {outcome.step.value} step:\n\n{outcome.feedback}\n\n"
        "Reply with the corrected complete kernel.rs in one ```rust block."
    )


def extract_rust_source(text: str) -> str | None:
    """The Rust source of a completion: its first ```rust block, else its only
    fenced block; None when there is neither."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    for tag, body in blocks:
        if tag in _RUST_TAGS and body.strip():
            return _tidy(body)
    untagged = [body for tag, body in blocks if not tag and body.strip()]
    if len(blocks) == 1 and untagged:
        return _tidy(untagged[0])
    return None


def _tidy(body: str) -> str:
    """Drop blank lines around the code, keep the first line's indentation."""
    return body.strip("\n").rstrip() + "\n"


def not_configured_result(reason: str = NOT_CONFIGURED_REASON) -> LlmPortResult:
    return LlmPortResult(status=LlmStatus.NOT_CONFIGURED, reason=reason)


def llm_port(
    analysis: KernelAnalysis,
    reference_ir: Mapping[str, str],
    partial_kernel: str,
    op_mapping: str,
    verify: Callable[[str], VerifyOutcome],
    max_attempts: int | None = None,
    *,
    settings: LlmSettings | None = None,
    chat: ChatModel | None = None,
    context: Sequence[tuple[str, str]] = (),
    spent: TokenUsage | None = None,
) -> LlmPortResult:
    """Ask the configured model for a kernel.rs until `verify` accepts one, at most
    `max_attempts` times (default: the settings'), and never once the run
    (`spent` before the loop, plus the loop's own) reaches its cap. Never raises
    for endpoint trouble: the result says what happened."""
    if settings is None:
        try:
            settings = load_llm_settings()
        except LlmConfigError as exc:
            return not_configured_result(f"the LLM settings are invalid: {exc}")
    if settings is None:
        return not_configured_result()
    limit = max_attempts if max_attempts is not None else settings.max_attempts
    if limit < 1:
        raise ValueError(f"max_attempts must be at least 1, got {limit}")
    model = chat or OpenAIChat(settings)
    first = port_prompt(analysis, reference_ir, partial_kernel, op_mapping, context)
    loop = _PortLoop(model, verify, settings, spent or TokenUsage())
    return loop.run(first, limit)


class _PortLoop:
    def __init__(
        self,
        chat: ChatModel,
        verify: Callable[[str], VerifyOutcome],
        settings: LlmSettings,
        spent: TokenUsage,
    ) -> None:
        self.chat = chat
        self.verify = verify
        self.settings = settings
        self.spent = spent
        self.attempts: list[LlmAttempt] = []
        self.usage = TokenUsage()

    def run(self, first_prompt: str, limit: int) -> LlmPortResult:
        messages: list[BaseMessage] = [
            SystemMessage(PORT_SYSTEM_PROMPT),
            HumanMessage(first_prompt),
        ]
        for number in range(1, limit + 1):
            over = self.settings.over_budget(self.spent + self.usage)
            if over is not None:
                return self._result(
                    LlmStatus.BUDGET_EXHAUSTED, reason=f"no attempt {number}: {over}"
                )
            started = time.monotonic()
            try:
                completion = self.chat.complete(messages)
            except LlmMalformedReply as exc:
                # Counted as a failed attempt; the same request goes out again.
                outcome = VerifyOutcome(ok=False, step=VerifyStep.EXTRACT, feedback=str(exc))
                self._record(number, TokenUsage(), outcome, exc.retries, started)
                continue
            except LlmEndpointError as exc:
                return self._result(LlmStatus.ENDPOINT_ERROR, reason=f"attempt {number}: {exc}")
            self.usage = self.usage + completion.usage
            source = extract_rust_source(completion.text)
            outcome = self._check(source)
            self._record(number, completion.usage, outcome, completion.retries, started)
            if outcome.ok and source is not None:
                return self._result(LlmStatus.SUCCEEDED, source=source)
            messages += [AIMessage(completion.text), HumanMessage(retry_prompt(outcome))]
        last = self.attempts[-1].outcome
        reason = (
            f"none of {limit} attempt(s) verified; the last failed at {last.step.value}: "
            f"{_first_line(last.feedback)}"
        )
        return self._result(LlmStatus.EXHAUSTED, reason=reason)

    def _record(
        self, number: int, usage: TokenUsage, outcome: VerifyOutcome, retries: int, started: float
    ) -> None:
        seconds = round(time.monotonic() - started, 3)
        self.attempts.append(
            LlmAttempt(
                number=number, usage=usage, outcome=outcome, retries=retries, seconds=seconds
            )
        )

    def _check(self, source: str | None) -> VerifyOutcome:
        if source is None:
            return VerifyOutcome(
                ok=False,
                step=VerifyStep.EXTRACT,
                feedback="the reply has no ```rust fenced block holding kernel.rs",
            )
        return self.verify(source)

    def _result(
        self, status: LlmStatus, *, source: str | None = None, reason: str = ""
    ) -> LlmPortResult:
        return LlmPortResult(
            status=status,
            source=source,
            attempts=self.attempts,
            usage=self.usage,
            reason=reason,
            model=self.settings.model,
        )


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


# -- prose for the diagnostic stages ----------------------------------------------------


def optional_commentary(
    system: str,
    question: str,
    *,
    settings: LlmSettings | None = None,
    chat: ChatModel | None = None,
    spent: TokenUsage | None = None,
) -> tuple[str | None, TokenUsage]:
    """A few sentences of explanation for a report's notes, or (None, zero usage)
    when no LLM is configured. Endpoint trouble and a run past its cap (`spent`
    so far) become a note, never an error: the prose is optional and the verdict
    never depends on it."""
    if settings is None:
        try:
            settings = load_llm_settings()
        except LlmConfigError as exc:
            return f"LLM commentary unavailable: {exc}", TokenUsage()
    if settings is None:
        return None, TokenUsage()
    over = settings.over_budget(spent or TokenUsage())
    if over is not None:
        return f"LLM commentary skipped: {over}", TokenUsage()
    try:
        answer = ask(chat or OpenAIChat(settings), system, question)
    except LlmEndpointError as exc:
        return f"LLM commentary unavailable: {exc}", TokenUsage()
    text = " ".join(answer.text.split())
    return (f"LLM commentary ({settings.model}): {text}" if text else None), answer.usage
