"""The LLM client: JSON-schema structured output from any OpenAI-compatible server, through the `openai` package.

Retries with jittered backoff only for transient failures (timeouts, connection errors, 429 honouring
Retry-After, 5xx). A server that rejects `json_schema` response formats gets `json_object` with the schema in the
prompt instead, remembered per base URL. Output that is not valid JSON, or does not match the schema, is
re-asked a bounded number of times. One call, all of that included, ends by its deadline (LLM_CALL_DEADLINE, or
the caller's if sooner): each attempt runs in a thread the call stops waiting for when its time is up
(workers/clients/deadline.py), because the HTTP timeouts are per socket read and a server that trickles bytes,
or a resolver that never answers, would outlast them.

Every request is recorded against the research the caller charges it to (`charged_to`), whatever came of it:
retried, failed and re-asked requests cost money too.
"""

import functools
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import jsonschema
import openai
from django.conf import settings

from research import budgets
from research.models import CallOutcome
from research.usage import record_call
from workers.clients import ratelimit
from workers.clients.backoff import backoff_delay, parse_retry_after
from workers.clients.deadline import call_within, expiry, time_left
from workers.errors import DeadlineExceeded, PermanentError, ResearchStopped, TransientError

log = logging.getLogger(__name__)

# Base URLs whose server answered 400 to a json_schema response format.
_json_object_only: set[str] = set()
_clients: dict[tuple[str, str, float], openai.OpenAI] = {}
# The research whose budget the model calls made in this context are charged to.
_charged_research: ContextVar[Any] = ContextVar("charged_research", default=None)


@contextmanager
def charged_to(research_id: Any) -> Iterator[None]:
    """Record every model request made inside the block against the research."""
    token = _charged_research.set(research_id)
    try:
        yield
    finally:
        _charged_research.reset(token)


@dataclass
class _Requests:
    """The requests of one agent call, numbered across retries and re-asks, each recorded as it ends."""

    agent: str
    model: str
    made: int = 0

    def admit(self) -> None:
        """Before each request: a research stopped by its budget (now or before) makes no more calls.

        A step that passed its start check before the stop, or is retrying, would otherwise still spend: checking
        at each request leaves only the requests already sent as spending past the budget.
        """
        research_id = _charged_research.get()
        if research_id is not None and budgets.check(research_id):
            raise ResearchStopped(f"research {research_id} reached its budget")

    def record(self, outcome: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        self.made += 1
        research_id = _charged_research.get()
        if research_id is not None:  # calls outside a research (a client test, a benchmark) are not charged
            state = record_call(
                research_id, self.agent, self.model, prompt_tokens, completion_tokens, self.made, outcome
            )
            if state is not None and (prompt_tokens or completion_tokens):
                # The call that reaches a budget stops the research at once: no step starts after it, and the
                # calls still in flight are all it can spend past the budget.
                budgets.check(research_id, state)


class InvalidOutputError(PermanentError):
    """The model kept answering with JSON that is not valid against the schema."""


@dataclass(frozen=True)
class LLMResult:
    data: Any
    prompt_tokens: int
    completion_tokens: int
    calls: int


def _client() -> openai.OpenAI:
    key = (settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.LLM_TIMEOUT)
    client = _clients.get(key)
    if client is None:
        # The openai package's own retries are off: ours honour Retry-After and count toward one budget.
        client = openai.OpenAI(
            base_url=settings.OPENAI_BASE_URL,
            api_key=settings.OPENAI_API_KEY or "not-set",
            timeout=settings.LLM_TIMEOUT,
            max_retries=0,
        )
        _clients[key] = client
    return client


def _retry_after(exc: openai.APIStatusError) -> float | None:
    return parse_retry_after(exc.response.headers.get("retry-after") if exc.response is not None else None)


def _schema_prompt(name: str, schema: dict[str, Any]) -> str:
    return (
        "Answer with a single JSON object and nothing else.\n"
        f"JSON schema name: {name}\n"
        f"JSON schema: {json.dumps(schema, separators=(',', ':'))}"
    )


def _create(
    requests: _Requests, messages: list[dict[str, str]], name: str, schema: dict[str, Any], expires_at: float
) -> Any:
    """One chat-completions call with transient-error retries, all ended by `expires_at`; the openai response.

    Requests that fail are recorded here; the caller records the one that answered, once it has judged it.
    """
    model = requests.model
    client = _client()
    attempt = 0
    while True:
        json_object = settings.OPENAI_BASE_URL in _json_object_only
        if json_object:
            sent = [{"role": "system", "content": _schema_prompt(name, schema)}, *messages]
            response_format: dict[str, Any] = {"type": "json_object"}
        else:
            sent = messages
            response_format = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        ratelimit.wait_for_rate_until(
            f"llm:{urlparse(settings.OPENAI_BASE_URL).netloc}", settings.LLM_RATE_LIMIT, expires_at, "LLM call"
        )
        requests.admit()
        # Each attempt gets LLM_TIMEOUT, or what is left of the deadline; the openai package's timeout is per read.
        seconds = min(settings.LLM_TIMEOUT, time_left(expires_at, "LLM call"))
        try:
            create = functools.partial(
                client.chat.completions.create,
                model=model,
                messages=sent,
                response_format=response_format,
                timeout=seconds,
            )
            return call_within(create, seconds, "LLM call")
        except openai.BadRequestError as exc:
            requests.record(CallOutcome.ERROR)
            # Servers without structured outputs answer 400; any other cause fails again in json_object mode.
            if not json_object:
                log.info("LLM server rejected json_schema output; using json_object for %s", settings.OPENAI_BASE_URL)
                _json_object_only.add(settings.OPENAI_BASE_URL)
                continue
            raise PermanentError(f"LLM request rejected: {exc.message}") from exc
        except (openai.RateLimitError, openai.InternalServerError) as exc:
            requests.record(CallOutcome.ERROR)
            error: Exception = exc
            retry_after = _retry_after(exc)
        except openai.APIStatusError as exc:
            requests.record(CallOutcome.ERROR)
            if exc.status_code in (408, 409) or exc.status_code >= 500:
                error, retry_after = exc, _retry_after(exc)
            else:
                raise PermanentError(f"LLM request failed with HTTP {exc.status_code}: {exc.message}") from exc
        except (openai.APITimeoutError, openai.APIConnectionError, DeadlineExceeded) as exc:
            connection_error = isinstance(exc, openai.APIConnectionError) and not isinstance(
                exc, openai.APITimeoutError
            )
            requests.record(CallOutcome.ERROR if connection_error else CallOutcome.TIMEOUT)
            error, retry_after = exc, None
        delay = backoff_delay(attempt, retry_after)
        if time.monotonic() + delay >= expires_at:
            # No time for another attempt: a model that did not answer ran out of time; one that answered with
            # errors failed.
            if isinstance(error, openai.APITimeoutError | DeadlineExceeded):
                raise DeadlineExceeded(f"LLM call not answered by its deadline ({attempt + 1} attempts)") from error
            raise TransientError(f"LLM call failed, no time left to retry: {error}", retry_after) from error
        if attempt >= settings.LLM_MAX_RETRIES:
            raise TransientError(f"LLM call failed after {attempt + 1} attempts: {error}", retry_after) from error
        log.warning("LLM call failed (%s); retry %s in %.1fs", type(error).__name__, attempt + 1, delay)
        time.sleep(delay)
        attempt += 1


def complete_json(
    agent: str,
    messages: list[dict[str, str]],
    name: str,
    schema: dict[str, Any],
    validation_schema: dict[str, Any] | None = None,
    deadline: float | None = None,
) -> LLMResult:
    """Ask `agent`'s model for JSON matching `schema`; validate against `validation_schema` (default: schema).

    The whole call (attempts, backoff, re-asks) ends by LLM_CALL_DEADLINE seconds from now, or by `deadline` (a
    `time.monotonic()` value) if that comes first, with DeadlineExceeded when the model did not answer in time.
    """
    expires_at = expiry(settings.LLM_CALL_DEADLINE, deadline)
    model = settings.LLM_AGENT_MODELS.get(agent, settings.LLM_MODEL)
    validator = jsonschema.Draft202012Validator(validation_schema or schema)
    requests = _Requests(agent, model)
    prompt_tokens = completion_tokens = calls = 0
    conversation = list(messages)
    problem = ""
    for _ in range(settings.LLM_INVALID_OUTPUT_RETRIES + 1):
        response = _create(requests, conversation, name, schema, expires_at)
        calls += 1
        used = (response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0) if response.usage else (0, 0)
        prompt_tokens += used[0]
        completion_tokens += used[1]
        content = (response.choices[0].message.content or "") if response.choices else ""
        try:
            data = json.loads(_strip_fences(content))
            errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
            if not errors:
                requests.record(CallOutcome.OK, *used)
                return LLMResult(data, prompt_tokens, completion_tokens, calls)
            problem = f"the JSON did not match the schema: {errors[0].message[:300]}"
        except json.JSONDecodeError as exc:
            problem = f"the answer was not valid JSON ({exc.msg})"
        requests.record(CallOutcome.INVALID_OUTPUT, *used)
        log.warning("agent %s gave invalid output (%s); asking again", agent, problem)
        conversation = [
            *messages,
            {"role": "assistant", "content": content[:2000]},
            {"role": "user", "content": f"That answer was unusable: {problem}. Answer again with valid JSON only."},
        ]
    raise InvalidOutputError(f"agent {agent} gave invalid output {calls} times; last problem: {problem}")


def _strip_fences(content: str) -> str:
    """Some servers wrap JSON in ```json fences even in JSON mode."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text
