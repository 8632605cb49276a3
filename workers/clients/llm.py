"""The LLM client: JSON answers from any OpenAI-compatible server, through the `openai` package.

Servers as teams run them (vLLM, Ollama, llama.cpp server, LM Studio, hosted APIs) differ in what they accept and
how they answer, so a call adapts to the server and remembers what it learned:
- Output format: `json_schema`, else `json_object` with the schema in the prompt, else plain text with the schema
  in the prompt; a server that answers 400 to one gets the next, remembered per base URL.
- The window (workers/clients/model_window.py): every prompt is built to fit the model's context window with room
  for the answer, and `max_tokens` is sent. Agents pass a builder that cuts their variable text to the room given;
  a server's "maximum context length" error teaches the window and the request is built again, smaller.
- The answer (workers/clients/model_answer.py): reasoning blocks are dropped, the JSON is found in prose or
  fences and near-JSON repaired, then validated against the schema. An answer cut at its length limit is asked
  again with more room, or for a shorter answer when the window has none to give, never identically. Output that
  is still invalid is re-asked a bounded number of times.
- Time: transient failures (timeouts, connection errors, 429 honouring Retry-After, 5xx) are retried with jittered
  backoff. One call, all of that included, ends by its deadline (LLM_CALL_DEADLINE, or more for a model that has
  shown it is slow, or the caller's if sooner): each attempt runs in a thread the call stops waiting for when its
  time is up (workers/clients/deadline.py), because the HTTP timeouts are per socket read and a server that
  trickles bytes, or a resolver that never answers, would outlast them.

Every request is recorded against the research the caller charges it to (`charged_to`), whatever came of it:
retried, failed and re-asked requests cost money too.
"""

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import jsonschema
import openai
from django.conf import settings

from research.control import budgets
from research.models import CallOutcome
from research.record.usage import BudgetState, record_call
from research.types import ResearchId
from workers.clients import model_window, ratelimit
from workers.clients.backoff import backoff_delay, parse_retry_after
from workers.clients.deadline import call_within, expiry, time_left
from workers.clients.model_answer import NoJSON, find_json, has_reasoning
from workers.clients.model_window import Room
from workers.errors import DeadlineExceeded, PermanentError, ResearchStopped, TransientError

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]
# An agent's prompt, built to fit the room a call has for it (see model_window.Room).
Builder = Callable[[Room], Messages]

# Output formats in the order tried. A server that refuses one with a 400 gets the next, from then on (kept with
# what else is known of the model's server: workers/clients/model_window.py).
FORMATS = ("json_schema", "json_object", "text")

# Room for each agent's answer (`max_tokens`): its largest plausible answer, with margin. A reasoning model thinks
# inside the same limit, so once a model has shown reasoning its answers get REASONING_TOKENS more. With a known
# window an answer never takes more than a third of it.
ANSWER_TOKENS = {
    "prompt_analyzer": 1024,
    "query_generator": 1024,
    "evaluator": 1024,
    "website_analyzer": 2048,
    "memory": 2048,
    "report_writer": 4096,
}
REASONING_TOKENS = 2048
MIN_ANSWER_TOKENS = 256
# Context-length errors a call rides out by building its prompt smaller before it gives up.
MAX_SHRINKS = 3
# A model whose window is unknown: the prompt's room is bounded only by the agents' own budgets.
UNKNOWN_WINDOW_ROOM = 10**9
_clients: dict[tuple[str, str, float], openai.OpenAI] = {}
# A worker's threads all make their first call at once: unlocked, each built a client of its own (tens of ms of
# CPU each, and a connection pool each), of which one was kept.
_clients_lock = threading.Lock()


# The research whose budget the model calls made in this context are charged to.
@dataclass
class _Charge:
    research_id: ResearchId
    # The research's budget state as the step read it just before (its start check): the first request of the
    # block is admitted on it rather than on a read of its own; later ones (retries, re-asks) read it again.
    known: BudgetState | None = None
    # The research is writing its report: a budget stops only a running research (the report is bounded by what
    # is left of the budgets instead, budgets.report_prompt_tokens), so no request of the block reads it first.
    reporting: bool = False


_charge: ContextVar[_Charge | None] = ContextVar("charge", default=None)


@contextmanager
def charged_to(research_id: ResearchId, known: BudgetState | None = None, reporting: bool = False) -> Iterator[None]:
    """Record every model request made inside the block against the research; `known`, `reporting`: see
    _Charge."""
    token = _charge.set(_Charge(research_id, known, reporting))
    try:
        yield
    finally:
        _charge.reset(token)


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
        charge = _charge.get()
        if charge is None or charge.reporting:
            return
        known, charge.known = charge.known, None
        if budgets.check(charge.research_id, known):
            raise ResearchStopped(f"research {charge.research_id} reached its budget")

    def record(self, outcome: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        self.made += 1
        charge = _charge.get()
        if charge is not None:  # calls outside a research (a client test, a benchmark) are not charged
            research_id = charge.research_id
            state = record_call(
                research_id, self.agent, self.model, prompt_tokens, completion_tokens, self.made, outcome
            )
            if state is not None and (prompt_tokens or completion_tokens):
                # The call that reaches a budget stops the research at once: no step starts after it, and the
                # calls still in flight are all it can spend past the budget.
                budgets.check(research_id, state)


class InvalidOutputError(PermanentError):
    """The model kept answering with JSON that is not valid against the schema."""


class AnswerCut(InvalidOutputError):
    """The answer was cut off at its length limit and no more room can be given: ask for less (the caller splits
    its material), never the same again. Raised only to callers that said they can split (`can_split`)."""


class PromptTooLarge(PermanentError):
    """The prompt did not fit the model's window even built again for the window and token count the server's
    errors named."""


class NoRoom(Exception):  # noqa: N818  (a signal between a builder and its caller, not an error)
    """Raised by a builder whose material does not fit the room it is given (the room shrank after a
    context-length error): the caller splits the material into parts that fit `room` and asks for each."""

    def __init__(self, room: Room) -> None:
        super().__init__(f"the material does not fit a prompt of {room.tokens} tokens")
        self.room = room


@dataclass(frozen=True)
class LLMResult:
    """The validated answer, and how many requests it took. Each request's tokens are recorded as it is made
    (`_Requests.record`: the research's usage and budget), so they are not returned."""

    data: Any
    calls: int


def _client() -> openai.OpenAI:
    key = (settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.LLM_TIMEOUT)
    client = _clients.get(key)
    if client is not None:
        return client
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            # The openai package's own retries are off: ours honour Retry-After and count toward one budget.
            client = _clients[key] = openai.OpenAI(
                base_url=settings.OPENAI_BASE_URL,
                api_key=settings.OPENAI_API_KEY or "not-set",
                timeout=settings.LLM_TIMEOUT,
                max_retries=0,
            )
    return client


def _post_completion(client: openai.OpenAI, body: dict[str, Any], seconds: float) -> dict[str, Any]:
    """POST /chat/completions through the openai client, as `chat.completions.create` does (the same transport and
    errors), without its conversion of the parameters against the SDK's typed dicts (an identity on the plain JSON
    sent here, and 0.5-1 ms of CPU a call, a call or more per step) and without its `ChatCompletion` model: the
    answer's JSON as it came (another seventh of the SDK's CPU; `Completion` reads the few fields used). An answer
    that is not a JSON object is an empty one."""
    answer = client.post("/chat/completions", body=body, cast_to=object, options={"timeout": seconds})
    return answer if isinstance(answer, dict) else {}


@dataclass(frozen=True)
class Completion:
    """What a chat completion's JSON says that a call uses, read defensively: servers omit fields, send nulls, or
    put the reasoning in a field of their own."""

    content: str  # the first choice's message ("" where there is none)
    finish_reason: str | None
    # A reasoning parser's separate field (vLLM and others: `reasoning_content`; some: `reasoning`): never the
    # answer, but a sign the model thinks inside its answer's room.
    reasoning: str
    prompt_tokens: int
    completion_tokens: int

    @classmethod
    def of(cls, answer: dict[str, Any]) -> "Completion":
        usage = _object(answer.get("usage"))
        choices = answer.get("choices")
        choice = _object(choices[0]) if isinstance(choices, list) and choices else {}
        message = _object(choice.get("message"))
        content = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        finish_reason = choice.get("finish_reason")
        return cls(
            content=content if isinstance(content, str) else "",
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            reasoning=reasoning if isinstance(reasoning, str) else "",
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
        )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _retry_after(exc: openai.APIStatusError) -> float | None:
    return parse_retry_after(exc.response.headers.get("retry-after") if exc.response is not None else None)


def schema_prompt(name: str, schema: dict[str, Any]) -> str:
    return (
        "Answer with a single JSON object and nothing else.\n"
        f"JSON schema name: {name}\n"
        f"JSON schema: {json.dumps(schema, separators=(',', ':'))}"
    )


def output_format(model: str) -> str:
    """The output format the model's server is asked for now (see FORMATS)."""
    return FORMATS[min(model_window.output_format(model), len(FORMATS) - 1)]


def answer_tokens(agent: str, model: str) -> int:
    """`max_tokens` for the agent's answer (see ANSWER_TOKENS), within what the server lets an answer have."""
    tokens = ANSWER_TOKENS.get(agent, 2048)
    if model_window.reasoning_seen(model):
        tokens += REASONING_TOKENS
    window, _ = model_window.window(agent, model)
    if window:
        tokens = min(tokens, window // 3)
    limit = model_window.output_limit(model)
    if limit:
        tokens = min(tokens, limit)
    return max(MIN_ANSWER_TOKENS, tokens)


def writing_tokens(agent: str, model: str, answer: int | None = None) -> int:
    """Of the agent's answer room (`answer`, or its usual one), what its JSON may take: a model that reasons
    writes its thinking in the same room, which keeps up to half of it."""
    answer = answer_tokens(agent, model) if answer is None else answer
    if model_window.reasoning_seen(model):
        return max(answer // 2, answer - REASONING_TOKENS)
    return answer


def room_for(
    agent: str, model: str, answer: int, extra: Sequence[dict[str, str]] = (), ratio: float | None = None
) -> Room:
    """The prompt's room: the window less the answer's room, a safety margin and the messages added to it
    (counted at `ratio` characters per token where the call has learned one, see Room)."""
    window, _ = model_window.window(agent, model)
    if not window:
        return Room(model, UNKNOWN_WINDOW_ROOM, ratio)
    margin = max(64, window // 32)
    room = Room(model, window - answer - margin, ratio)
    taken = sum(room.count(m["content"]) + model_window.TOKENS_PER_MESSAGE for m in extra)
    return Room(model, max(0, room.tokens - taken), ratio)


def prompt_room(agent: str, model: str | None = None) -> Room:
    """The room an agent's prompt has now, its answer's room and the schema's instructions left out: what its
    material is split to before the first call (each call's builder is given the room that call has)."""
    model = model or settings.LLM_AGENT_MODELS.get(agent, settings.LLM_MODEL)
    return room_for(agent, model, answer_tokens(agent, model))


def _tokens(model: str, messages: Messages) -> int:
    """The prompt's tokens, as estimated for the model."""
    return sum(model_window.estimate_tokens(model, m["content"], messages=1) for m in messages)


def _chars(messages: Messages) -> int:
    return sum(len(m["content"]) for m in messages)


def _create(
    requests: _Requests,
    build: Builder,
    tail: Messages,
    name: str,
    schema: dict[str, Any],
    expires_at: float,
    answer: int,
) -> tuple[dict[str, Any], int, float]:
    """One chat-completions call with transient-error retries, all ended by `expires_at`: the answer's JSON,
    the characters of the prompt it answered, and the seconds it took.

    A request refused for its output format is made again in the next format; one refused for the window is
    built again for the window the error names. Requests that fail are recorded here; the caller records the one
    that answered, once it has judged it.
    """
    model = requests.model
    client = _client()
    base_url = settings.OPENAI_BASE_URL or ""
    attempt = shrinks = 0
    # Characters per token this call's prompt has shown (a server's count in its context-length error): a prompt
    # of URLs and figures counts denser than the model's average, and is built again at its own density.
    ratio: float | None = None
    while True:
        mode = output_format(model)
        # Outside json_schema mode the schema goes in a message of its own: it takes room like any other.
        instructions = [] if mode == "json_schema" else [{"role": "system", "content": schema_prompt(name, schema)}]
        room = room_for(requests.agent, model, answer, [*instructions, *tail], ratio)
        sent = [*instructions, *build(room), *tail]
        options: dict[str, Any] = {}
        if mode == "json_schema":
            options["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        elif mode == "json_object":
            options["response_format"] = {"type": "json_object"}
        options["max_completion_tokens" if model_window.wants_completion_tokens(model) else "max_tokens"] = answer
        size = _tokens(model, sent) + answer
        probe = None
        if room.tokens >= UNKNOWN_WINDOW_ROOM and model_window.unproven(model, size):
            # Built with the window unknown, and larger than any request the server has answered: one such request
            # at a time finds the window out (model_window.Probe); the others are built again for what it learned.
            # Before the rate limiter: a request built again has not been sent, and takes no admission.
            probe = model_window.Probe(model, min(model_window.attempt_timeout(model), time_left(expires_at, "LLM")))
            if not probe.acquire(until=expires_at):
                raise DeadlineExceeded("LLM call: another request was still finding out the model's window")
            model_window.reread(model)  # the probe's last holder may have been another worker: what did it learn?
            if model_window.window(requests.agent, model)[0] or not model_window.unproven(model, size):
                probe.release()
                continue
        try:
            ratelimit.wait_for_rate_until(
                f"llm:{urlparse(base_url).netloc}", settings.LLM_RATE_LIMIT, expires_at, "LLM call"
            )
            requests.admit()
        except BaseException:
            if probe is not None:
                probe.release()
            raise
        # Each attempt gets what this model has shown it needs (at least LLM_TIMEOUT), or what is left of the
        # deadline; the openai package's own timeout is per socket read.
        seconds = min(model_window.attempt_timeout(model), time_left(expires_at, "LLM call"))
        started = time.monotonic()
        try:
            create = functools.partial(_post_completion, client, {"model": model, "messages": sent, **options}, seconds)
            return call_within(create, seconds, "LLM call"), _chars(sent), time.monotonic() - started
        except openai.BadRequestError as exc:
            requests.record(CallOutcome.ERROR)
            message = _error_text(exc)
            if model_window.is_context_error(message):
                chars = _chars(sent)
                window, counted = model_window.learn_from_error(model, message, exc.body, chars, answer)
                shrinks += 1
                if shrinks > MAX_SHRINKS:
                    raise PromptTooLarge(
                        f"the prompt does not fit the model's window of {window} tokens even cut down: {message}"
                    ) from exc
                # Built again at the density the server counted (a little under it, for the template's tokens),
                # or, where it did not say, a fifth denser than this attempt was counted at.
                ratio = chars / counted * 0.97 if counted else room.chars_per_token * 0.8
                answer = min(answer, max(MIN_ANSWER_TOKENS, window // 3))
                continue
            refused_max_tokens = "max_tokens" in message and "max_completion_tokens" in message
            if refused_max_tokens and not model_window.wants_completion_tokens(model):
                # OpenAI's reasoning models take max_completion_tokens instead.
                model_window.refuse_max_tokens(model)
                continue
            if FORMATS.index(mode) + 1 < len(FORMATS):
                # Servers without structured outputs answer 400; any other cause fails again in plain text.
                log.info("LLM server %s refused %s output (%s); trying the next format", base_url, mode, message[:200])
                model_window.refuse_format(model, FORMATS.index(mode))
                continue
            raise PermanentError(f"LLM request rejected: {message}") from exc
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
            if not connection_error:
                model_window.observe_timeout(model, time.monotonic() - started)
            error, retry_after = exc, None
        finally:
            if probe is not None:
                probe.release()
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


def _error_text(exc: openai.APIStatusError) -> str:
    """The server's error message, with the fields some servers put beside it (llama.cpp's n_ctx)."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        inner = error if isinstance(error, dict) else body
        extra = " ".join(f"{k}={v}" for k, v in inner.items() if k not in ("message", "type", "param", "code"))
        return f"{exc.message} {extra}".strip()
    return str(exc.message)


def _fixed(messages: Messages) -> Builder:
    """A builder of the same prompt (a copy of `messages`) whatever the room."""
    fixed = list(messages)
    return lambda room: fixed


# A schema made for the tokens its answer's JSON may take: it asks for as many items as fit.
SchemaFor = Callable[[int], dict[str, Any]]


def complete_json(
    agent: str,
    messages: Messages | Builder,
    name: str,
    schema: dict[str, Any] | SchemaFor,
    validation_schema: dict[str, Any] | None = None,
    deadline: float | None = None,
    can_split: bool = False,
) -> LLMResult:
    """Ask `agent`'s model for JSON matching `schema`; validate against `validation_schema` (default: schema).

    `schema` is the schema, or a function that makes it for the tokens the answer's JSON may take (made again
    for each request, so an answer asked for less asks for fewer items). `messages` is the prompt, or a builder
    that makes it for the room the window leaves (see model_window.Room): a builder's prompt is cut to fit, and
    built again smaller when the server says it did not (a builder may raise NoRoom instead, for its caller to
    split its material). The whole call (attempts, backoff, re-asks) ends by its
    deadline (see the module doc), or by `deadline` (a `time.monotonic()` value) if that comes first, with
    DeadlineExceeded when the model did not answer in time.

    An answer cut at its length limit is asked again with more room where the window and the server allow it;
    where they do not, a caller that can ask for less (`can_split`: it splits its material and asks for each part)
    gets AnswerCut at once, and any other is asked for a shorter answer, its schema made for half the tokens.
    """
    model = settings.LLM_AGENT_MODELS.get(agent, settings.LLM_MODEL)
    expires_at = expiry(model_window.call_deadline(model), deadline)
    build: Builder = messages if callable(messages) else _fixed(messages)
    requests = _Requests(agent, model)
    calls = 0
    answer = answer_tokens(agent, model)
    # The tokens the schema is made for: the answer's, halved each time an answer cut short is asked for less.
    asked = answer

    def schema_now() -> dict[str, Any]:
        return schema(writing_tokens(agent, model, min(answer, asked))) if callable(schema) else schema

    validator = jsonschema.Draft202012Validator(validation_schema or schema_now())
    tail: Messages = []
    problem = ""
    attempts = settings.LLM_INVALID_OUTPUT_RETRIES + 1
    for attempt in range(attempts):
        response, sent_chars, seconds = _create(requests, build, tail, name, schema_now(), expires_at, answer)
        calls += 1
        completion = Completion.of(response)
        used = (completion.prompt_tokens, completion.completion_tokens)
        content = completion.content
        reasoning = has_reasoning(content) or bool(completion.reasoning)
        model_window.observe_usage(model, sent_chars, used[0])
        # The window holds what the server took: its own count of the prompt where it gave one, and the answer's room.
        model_window.observe_accepted(model, (used[0] or model_window.estimate_tokens(model, sent_chars)) + answer)
        model_window.observe_answer(model, seconds, reasoning)
        cut = completion.finish_reason == "length"
        try:
            data, _repaired = find_json(content)
            errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
            # A cut answer that repairs into valid JSON may lack what was cut: asked again while attempts remain.
            if not errors and (not cut or attempt == attempts - 1):
                requests.record(CallOutcome.OK, *used)
                return LLMResult(data, calls)
            problem = f"the JSON did not match the schema: {errors[0].message[:300]}" if errors else ""
        except NoJSON:
            problem = "the answer held no JSON object"
        requests.record(CallOutcome.INVALID_OUTPUT, *used)
        if cut:
            if _capped(agent, model, completion, answer):
                model_window.learn_output_limit(model, completion.completion_tokens)
            problem = f"the answer was cut off at its limit of {answer} tokens"
            larger = _larger_answer(agent, model, answer)
            if larger is not None and attempt < attempts - 1:
                answer = larger
                log.warning("agent %s: answer cut at its length limit; asking again with %s tokens", agent, answer)
                continue
            if can_split:
                raise AnswerCut(f"agent {agent}: {problem}, with no more room to give")
            answer = min(answer, model_window.output_limit(model) or answer)
            asked = min(asked, answer) // 2
            again = " It was cut off again: give half as many items as the last time." if tail else ""
            limit = f" All of it must fit in {answer} tokens."
            tail = [{"role": "user", "content": SHORTER + limit + again}]
            log.warning("agent %s: answer cut at its length limit; asking for a shorter one", agent)
            continue
        log.warning("agent %s gave invalid output (%s); asking again", agent, problem)
        tail = [
            {"role": "assistant", "content": content[:2000]},
            {"role": "user", "content": f"That answer was unusable: {problem}. Answer again with valid JSON only."},
        ]
    if can_split and problem.startswith("the answer was cut off"):
        raise AnswerCut(f"agent {agent}: {problem}")
    raise InvalidOutputError(f"agent {agent} gave invalid output {calls} times; last problem: {problem}")


SHORTER = (
    "Your previous answer was too long and was cut off before it ended. Answer again, complete and shorter: fewer "
    "items, shorter texts, no commentary, and no reasoning before the JSON."
)


def _capped(agent: str, model: str, completion: Completion, answer: int) -> bool:
    """Whether an answer cut for its length shows a cap of the server's on answers: it stopped well short of the
    room it was given (and of MIN_ANSWER_TOKENS: no server caps answers lower), and not because the window was
    full (where the window is known)."""
    tokens = completion.completion_tokens
    if not MIN_ANSWER_TOKENS <= tokens < answer * 0.9:
        return False
    window, _ = model_window.window(agent, model)
    return window is None or completion.prompt_tokens + tokens < window * 0.9


def _larger_answer(agent: str, model: str, answer: int) -> int | None:
    """The room for the next answer after one was cut at `answer` tokens: twice as much where the window (half of
    it at most, so a prompt still fits) and the server's cap on answers allow more, else None."""
    window, _ = model_window.window(agent, model)
    larger = answer * 2 if not window else min(answer * 2, window // 2)
    limit = model_window.output_limit(model)
    if limit:
        larger = min(larger, limit)
    return larger if larger > answer else None
