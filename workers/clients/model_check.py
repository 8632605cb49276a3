"""What `manage.py check_model` measures of each agent's model, and the verdict it gives each agent.

A team points the app at the server it runs (vLLM, Ollama, llama.cpp server, LM Studio, a hosted API) and needs
to know, before a research fails an hour in, whether it will work and what to set. Each distinct model is probed
once, afresh (nothing the running fleet learned is read or written: the probes call the server directly):

- reachable, and the seconds a short answer takes;
- the context window the server reports (model_window.discover), and whether it is Ollama (its `/api/show`);
- each output format the client may use (json_schema, json_object, plain text with the schema in the prompt),
  judged as the client judges answers: find_json, then the schema;
- reasoning noise: `<think>` blocks in the answer, or a reasoning parser's separate field;
- tokens per second, from an answer of a hundred numbers;
- the characters per token of a prompt of known size, and whether a long one (about 9k tokens) arrives whole: a
  server that counts far fewer tokens than the characters can make cut it without saying so (Ollama does, at its
  default context).

Then each agent gets a verdict from what its model showed and what it needs (its window, its answer's room, the
time one request may take): works, works with settings (listed, as env lines), or will not work, and why.
"""

import json
import logging
import math
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import jsonschema
import openai
from django.conf import settings
from openai.types.chat import ChatCompletionMessageParam

from research.models import ModelVerdict
from workers.clients import model_window
from workers.clients.llm import ANSWER_TOKENS, FORMATS, REASONING_TOKENS, schema_prompt
from workers.clients.model_answer import NoJSON, find_json, has_reasoning

log = logging.getLogger(__name__)

# Below this an agent's instructions, its input and its answer do not fit together.
MIN_WINDOW = 4096
# The report writer plans the report from every source at once: below this window they are cut to fit.
REPORT_WINDOW_GOOD = 16384
# Below this the outline sees few of them.
REPORT_WINDOW_LOW = 8192
# Below this a page is cut well short of PAGE_TOKEN_BUDGET before the website analyzer reads it.
PAGE_WINDOW_COMFORTABLE = 8192
# What to ask an Ollama server for, and to tell the app when nothing reports the window.
SUGGESTED_WINDOW = 16384

PROBE_NAME = "probe"
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
PROBE_QUESTION = "Is water wet? Answer with a JSON object whose field `ok` is true or false."
COUNT_NAME = "numbers"
COUNT_TO = 100
COUNT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "numbers": {"type": "array", "items": {"type": "integer"}, "minItems": COUNT_TO, "maxItems": COUNT_TO}
    },
    "required": ["numbers"],
    "additionalProperties": False,
}
COUNT_QUESTION = f"Count from 1 to {COUNT_TO}: a JSON object whose field `numbers` lists the integers 1 to {COUNT_TO}."
# Room for a probe's answer: a reasoning model thinks inside it before the JSON.
PROBE_ANSWER_TOKENS = 1024
# Prompts of known size: the medium one calibrates characters per token and fits any window worth having; the long
# one (about 9k tokens of English) shows a server that cuts prompts at 2k, 4k or 8k. Cut at 4,096 tokens it is still
# over model_window.MAX_PLAUSIBLE_CHARS_PER_TOKEN characters a token.
MEDIUM_PROMPT_CHARS = 6_000
LONG_PROMPT_CHARS = 36_000
SIZE_QUESTION = "Answer with one word: what colour is the sky on a clear day?"
# A long prompt counted at less than this share of the tokens the medium one's ratio predicts was cut.
CUT_SHARE = 0.75
_FILLER = (
    "The harbour town kept its old mill running through the long winter, and the miller wrote down every sack.",
    "Each Friday the market opened at dawn; farmers brought apples, cheese and wool from the valley farms.",
    "A new bridge was built in the spring, after the floods had carried the wooden one down the river.",
    "Children walked to the school on the hill, where one teacher taught reading, sums and a little history.",
    "In the evenings the fishermen mended their nets and talked about the weather and the price of salt.",
    "The railway reached the town late, and with it came letters, newspapers and visitors from the capital.",
)


@dataclass
class FormatResult:
    ok: bool
    detail: str  # "ok", "ok (repaired)", "refused: …", "no JSON in the answer", …


@dataclass
class ModelProbe:
    """What one model on the configured server showed."""

    model: str
    reachable: bool = False
    error: str = ""  # why it is not reachable or usable (401, 404, connection refused, …)
    latency_s: float | None = None  # a short answer, request to response
    slowest_s: float = 0.0  # the slowest probe that answered
    window: int | None = None  # as the server reports it, or as its context-length error names it
    window_source: str = ""
    ollama: bool = False  # the server answers Ollama's /api/show
    trained_context: int | None = None  # Ollama: the context the model was trained for (not its window)
    formats: dict[str, FormatResult] = field(default_factory=dict)
    reasoning: str = ""  # how the model's reasoning showed, "" when it did not
    tokens_per_s: float | None = None
    chars_per_token: float | None = None
    long_prompt_chars: int = 0
    long_prompt_tokens: int | None = None
    cut_at: int | None = None  # the server silently cut a long prompt to this many tokens
    overflowed_at: int | None = None  # about this many tokens were refused as too long, the window unnamed
    notes: list[str] = field(default_factory=list)

    @property
    def best_format(self) -> str | None:
        """The first format, in the client's order, whose answer was valid JSON."""
        return next((mode for mode in FORMATS if self.formats.get(mode) and self.formats[mode].ok), None)


@dataclass
class AgentVerdict:
    agent: str
    model: str
    verdict: str  # a ModelVerdict value
    window: int | None
    window_source: str
    reasons: list[str] = field(default_factory=list)  # why it will not work, or why it needs the settings
    notes: list[str] = field(default_factory=list)  # works, but the team should know
    settings: dict[str, int] = field(default_factory=dict)  # app settings (env name → value)
    server: list[str] = field(default_factory=list)  # what to change on the model server


@dataclass
class CheckReport:
    base_url: str
    models: list[ModelProbe]
    agents: list[AgentVerdict]
    verdict: str  # the worst of the agents' verdicts
    settings: list[str]  # env lines to paste, comments included
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- probing ---


@dataclass
class _Answer:
    content: str
    reasoning_field: str  # the name of the field the reasoning came in, "" when none
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    seconds: float


class _Probe:
    """The calls made to one model, with the openai package as the client makes them (no retries)."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float) -> None:
        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-set", timeout=timeout, max_retries=0)
        self.completion_tokens_param = False
        self.result = ModelProbe(model=model)

    def ask(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        mode: str = "text",
        schema: tuple[str, dict[str, Any]] = (PROBE_NAME, PROBE_SCHEMA),
    ) -> _Answer:
        options: dict[str, Any] = {}
        if mode == "json_schema":
            name, body = schema
            options["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": body}}
        elif mode == "json_object":
            options["response_format"] = {"type": "json_object"}
        while True:
            options["max_completion_tokens" if self.completion_tokens_param else "max_tokens"] = max_tokens
            started = time.monotonic()
            try:
                sent = cast(list[ChatCompletionMessageParam], messages)  # role and content, as the API takes them
                response = self.client.chat.completions.create(model=self.model, messages=sent, **options)
            except openai.BadRequestError as exc:
                # OpenAI's reasoning models take max_completion_tokens instead (the client learns it the same way).
                message = str(exc.message)
                if not self.completion_tokens_param and "max_completion_tokens" in message:
                    self.completion_tokens_param = True
                    options.pop("max_tokens", None)
                    continue
                raise
            seconds = time.monotonic() - started
            self.result.slowest_s = max(self.result.slowest_s, seconds)
            choice = response.choices[0] if response.choices else None
            extra = (getattr(choice.message, "model_extra", None) if choice is not None else None) or {}
            # A reasoning parser's separate field (vLLM and others: reasoning_content; some: reasoning).
            fields = [name for name in ("reasoning_content", "reasoning") if extra.get(name)]
            usage = response.usage
            return _Answer(
                content=(choice.message.content or "") if choice is not None else "",
                reasoning_field=fields[0] if fields else "",
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=usage.completion_tokens if usage else None,
                finish_reason=(choice.finish_reason or "") if choice is not None else "",
                seconds=seconds,
            )

    def failure(self, exc: Exception) -> str:
        """Why a request failed, in words a team can act on."""
        if isinstance(exc, openai.APITimeoutError):
            return f"no answer within {self.timeout:g} s (--timeout)"
        if isinstance(exc, openai.APIConnectionError):
            return f"cannot connect to {self.base_url} ({exc.__cause__ or exc})"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                return f"the server refused the API key (HTTP {status}): set OPENAI_API_KEY"
            if status == 404:
                return (
                    f"the server does not know the model {self.model!r} (HTTP 404): check LLM_MODEL, or pull it "
                    "(Ollama: ollama pull)"
                )
            return f"HTTP {status}: {_message(exc)[:200]}"
        return f"{type(exc).__name__}: {exc}"[:300]

    def noticed(self, answer: _Answer) -> None:
        if answer.reasoning_field:
            self.result.reasoning = f"a separate reasoning field ({answer.reasoning_field}), not in the answer"
        elif has_reasoning(answer.content) and not self.result.reasoning:
            self.result.reasoning = "<think> blocks in the answer"


def _message(exc: openai.APIStatusError) -> str:
    """The server's own words: the openai package puts "Error code: 400 - {...}" around them."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return str(exc.message)


def probe_model(base_url: str, api_key: str, model: str, timeout: float) -> ModelProbe:
    """Everything check_model measures of one model (see the module doc)."""
    probe = _Probe(base_url, api_key, model, timeout)
    result = probe.result
    try:
        answer = probe.ask([{"role": "user", "content": "Reply with the single word: ok"}], max_tokens=16)
    except openai.OpenAIError as exc:
        result.error = probe.failure(exc)
        return result
    result.reachable = True
    result.latency_s = round(answer.seconds, 3)
    probe.noticed(answer)
    _probe_window(probe, api_key)
    _probe_formats(probe)
    failed = [r.detail for r in result.formats.values() if r.detail.startswith("failed: ")]
    if len(failed) == len(FORMATS):  # it answered once, then no more: nothing else would answer either
        result.error = failed[0].removeprefix("failed: ")
        return result
    _probe_speed(probe)
    _probe_prompt_sizes(probe)
    return result


def _probe_window(probe: _Probe, api_key: str) -> None:
    result = probe.result
    # The discovery functions themselves, not model_window.window(): that one reads and writes what the fleet
    # learned, and a check measures afresh without touching it.
    timeout = min(probe.timeout, model_window.DISCOVERY_TIMEOUT)
    result.window, result.window_source = model_window.discover(probe.base_url, probe.model, api_key, timeout)
    result.trained_context = model_window.ollama_trained_context(probe.base_url, probe.model, api_key)
    result.ollama = result.trained_context is not None or result.window_source in ("GET /api/ps", "POST /api/show")


def _format_messages(mode: str, name: str, schema: dict[str, Any], question: str) -> list[dict[str, str]]:
    """What the client sends for `mode`: the schema goes in the prompt unless the server is given it."""
    user = {"role": "user", "content": question}
    if mode == "json_schema":
        return [user]
    return [{"role": "system", "content": schema_prompt(name, schema)}, user]


def _answer_room(probe: _Probe) -> int:
    window = probe.result.window
    return min(PROBE_ANSWER_TOKENS, window // 2) if window else PROBE_ANSWER_TOKENS


def _probe_formats(probe: _Probe) -> None:
    validator = jsonschema.Draft202012Validator(PROBE_SCHEMA)
    for mode in FORMATS:
        messages = _format_messages(mode, PROBE_NAME, PROBE_SCHEMA, PROBE_QUESTION)
        try:
            answer = probe.ask(messages, _answer_room(probe), mode, (PROBE_NAME, PROBE_SCHEMA))
        except openai.BadRequestError as exc:
            probe.result.formats[mode] = FormatResult(False, "refused (HTTP 400)")
            probe.result.notes.append(f"{mode} refused: {_message(exc)[:200]}")
            continue
        except openai.OpenAIError as exc:
            probe.result.formats[mode] = FormatResult(False, f"failed: {probe.failure(exc)}")
            continue
        probe.noticed(answer)
        probe.result.formats[mode] = _judge(answer, validator)


def _judge(answer: _Answer, validator: jsonschema.Draft202012Validator) -> FormatResult:
    """The answer as the client would take it: its JSON found, then held to the schema."""
    cut = " (cut at its length limit)" if answer.finish_reason == "length" else ""
    try:
        data, repaired = find_json(answer.content)
    except NoJSON:
        return FormatResult(False, f"no JSON in the answer{cut}")
    errors = list(validator.iter_errors(data))
    if errors:
        return FormatResult(False, f"JSON not valid against the schema: {errors[0].message[:120]}{cut}")
    return FormatResult(True, "ok (repaired)" if repaired else "ok")


def _probe_speed(probe: _Probe) -> None:
    mode = probe.result.best_format or "text"
    messages = _format_messages(mode, COUNT_NAME, COUNT_SCHEMA, COUNT_QUESTION)
    try:
        answer = probe.ask(messages, _answer_room(probe), mode, (COUNT_NAME, COUNT_SCHEMA))
    except openai.OpenAIError as exc:
        probe.result.notes.append(f"the speed probe failed: {probe.failure(exc)}")
        return
    probe.noticed(answer)
    if answer.completion_tokens and answer.seconds > 0:
        # Request to response, so the latency is in it: a lower bound of the generation speed.
        probe.result.tokens_per_s = round(answer.completion_tokens / answer.seconds, 1)
    else:
        probe.result.notes.append("the server reports no usage: tokens per second unknown")


def filler(chars: int) -> str:
    """English prose of about `chars` characters, numbered so no two sentences are alike."""
    sentences, size, index = [], 0, 0
    while size < chars:
        sentence = f"{index + 1}. {_FILLER[index % len(_FILLER)]}"
        sentences.append(sentence)
        size += len(sentence) + 1
        index += 1
    return " ".join(sentences)


def _size_prompt(chars: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{filler(chars)}\n\n{SIZE_QUESTION}"}]


def _sent(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


def _probe_prompt_sizes(probe: _Probe) -> None:
    """Characters per token from a medium prompt; then whether a long one arrives whole."""
    result = probe.result
    medium = _size_prompt(MEDIUM_PROMPT_CHARS)
    counted = _send_sized(probe, medium)
    if counted is None:
        return
    ratio = _sent(medium) / counted
    if ratio > model_window.MAX_PLAUSIBLE_CHARS_PER_TOKEN:
        result.cut_at, result.long_prompt_chars, result.long_prompt_tokens = counted, _sent(medium), counted
        return
    result.chars_per_token = round(ratio, 2)
    chars = LONG_PROMPT_CHARS
    if result.window:
        # A server that reports its window refuses a longer prompt: the long probe is sized to fit it.
        chars = min(chars, int((result.window - 300) * ratio * 0.9))
    if chars <= MEDIUM_PROMPT_CHARS:
        return
    long = _size_prompt(chars)
    counted = _send_sized(probe, long)
    if counted is None:
        return
    sent = _sent(long)
    result.long_prompt_chars, result.long_prompt_tokens = sent, counted
    expected = sent / ratio
    if sent / counted > model_window.MAX_PLAUSIBLE_CHARS_PER_TOKEN or counted < CUT_SHARE * expected:
        result.cut_at = counted
    else:
        result.chars_per_token = round(sent / counted, 2)


def _send_sized(probe: _Probe, messages: list[dict[str, str]]) -> int | None:
    """The prompt tokens the server counted for `messages`; None when it did not say (the reason is noted)."""
    result = probe.result
    try:
        answer = probe.ask(messages, max_tokens=16)
    except openai.BadRequestError as exc:
        message = _message(exc)
        if model_window.is_context_error(message):
            found = _window_in_error(message)
            if found and (result.window is None or found < result.window):
                result.window, result.window_source = found, "the server's context-length error"
            elif not found:
                ratio = result.chars_per_token or model_window.DEFAULT_CHARS_PER_TOKEN
                result.overflowed_at = int(_sent(messages) / ratio)
            result.notes.append(f"a prompt of {_sent(messages)} characters did not fit: {message[:160]}")
        else:
            result.notes.append(f"a prompt of {_sent(messages)} characters was refused: {message[:160]}")
        return None
    except openai.OpenAIError as exc:
        result.notes.append(f"a prompt of {_sent(messages)} characters failed: {probe.failure(exc)}")
        return None
    probe.noticed(answer)
    if not answer.prompt_tokens:
        result.notes.append("the server reports no usage: whether it cuts long prompts is unknown")
        return None
    return answer.prompt_tokens


def _window_in_error(message: str) -> int | None:
    # The same patterns the client learns a window from (vLLM, OpenAI, LM Studio, llama.cpp).
    return model_window.window_in_error(message)


# --- verdicts ---


def _round_up(seconds: float, step: int) -> int:
    return int(math.ceil(seconds / step) * step)


def judge_agent(agent: str, probe: ModelProbe) -> AgentVerdict:
    """The agent's verdict from what its model showed and what the agent needs."""
    configured = model_window.configured_window(agent)
    verdict = AgentVerdict(agent, probe.model, ModelVerdict.WORKS, None, "")
    if not probe.reachable or probe.error:
        verdict.verdict = ModelVerdict.WILL_NOT_WORK
        verdict.reasons.append(probe.error or "the model did not answer")
        return verdict
    best = probe.best_format
    if best is None:
        verdict.verdict = ModelVerdict.WILL_NOT_WORK
        tried = "; ".join(f"{mode}: {result.detail}" for mode, result in probe.formats.items())
        verdict.reasons.append(f"no valid JSON in any output format ({tried})")
        return verdict
    first_accepted = next((m for m in FORMATS if m in probe.formats and not _refused(probe.formats[m])), None)
    if first_accepted is not None and first_accepted != best:
        # The client moves to the next format only when the server refuses one; an accepted format that gives no
        # valid JSON costs re-asks on every call.
        verdict.notes.append(
            f"the server accepts {first_accepted} but the answer was not valid JSON "
            f"({probe.formats[first_accepted].detail}); {best} worked: calls may need re-asking"
        )
    if probe.reasoning:
        verdict.notes.append(
            f"the model reasons before it answers ({probe.reasoning}): the client gives each answer "
            f"{REASONING_TOKENS} more tokens of room, and drops the reasoning"
        )
    _judge_window(agent, probe, configured, verdict)
    _judge_time(agent, probe, verdict)
    if verdict.verdict == ModelVerdict.WORKS and (verdict.settings or verdict.server):
        verdict.verdict = ModelVerdict.WORKS_WITH_SETTINGS
    return verdict


def _refused(result: FormatResult) -> bool:
    return result.detail.startswith(("refused", "failed"))


def _judge_window(agent: str, probe: ModelProbe, configured: int | None, verdict: AgentVerdict) -> None:
    """The window the agent will have, and what to set where the server cuts prompts or keeps its window quiet."""
    if probe.cut_at:
        window, source = _cut_window(probe, configured, verdict)
    elif probe.ollama and probe.window_source not in ("GET /api/ps", "POST /api/show"):
        target = min(SUGGESTED_WINDOW, probe.trained_context or SUGGESTED_WINDOW)
        verdict.reasons.append(
            "an Ollama server that reports no num_ctx for this model: unless OLLAMA_CONTEXT_LENGTH is set on the "
            "server, it runs a few thousand tokens and silently drops the start of longer prompts"
        )
        verdict.server.append(_ollama_server_line(target))
        if not configured:
            verdict.settings["LLM_CONTEXT_TOKENS"] = target
        window, source = configured or target, "setting" if configured else "once the server runs it with this"
    elif configured:
        window, source = configured, "setting"
        if probe.window and configured > probe.window:
            verdict.reasons.append(
                f"the settings give a window of {configured} tokens but the server's is {probe.window} "
                f"({probe.window_source}): prompts that large are refused, then built again smaller"
            )
            verdict.settings["LLM_CONTEXT_TOKENS"] = probe.window
            window, source = probe.window, probe.window_source
    elif probe.window:
        window, source = probe.window, probe.window_source
    else:
        whole, over = probe.long_prompt_tokens, probe.overflowed_at
        if over and over <= MIN_WINDOW:
            verdict.verdict = ModelVerdict.WILL_NOT_WORK
            verdict.reasons.append(
                f"a prompt of about {over} tokens is too long for the server's window: an agent's instructions, "
                f"input and answer need {MIN_WINDOW} or more; raise the server's context length"
            )
            return
        proven = f" (a prompt of {whole} tokens went through whole)" if whole else ""
        if over:
            proven = f" (a prompt of about {over} tokens was refused as too long)"
        verdict.reasons.append(
            f"the server does not report the model's context window{proven}: the first prompts may overflow it; "
            "set the window the server runs the model with"
        )
        below = over // 1024 * 1024 if over else 0
        verdict.settings["LLM_CONTEXT_TOKENS"] = min(SUGGESTED_WINDOW, below) if below else SUGGESTED_WINDOW
        window, source = None, ""
    verdict.window, verdict.window_source = window, source
    if window is not None and window < MIN_WINDOW:
        verdict.verdict = ModelVerdict.WILL_NOT_WORK
        verdict.reasons.append(
            f"a context window of {window} tokens: an agent's instructions, input and answer need {MIN_WINDOW} or "
            "more; raise the server's context length"
        )
    elif window is not None:
        _window_notes(agent, window, verdict)


def _cut_window(probe: ModelProbe, configured: int | None, verdict: AgentVerdict) -> tuple[int, str]:
    """A server that cut a long prompt silently: Ollama is told to run a larger context; another server's cut
    is the window the app must keep to."""
    cut_at = probe.cut_at or 0
    cut = (
        f"the server cut a prompt of {probe.long_prompt_chars} characters to {cut_at} tokens without saying so: "
        "the start of every longer prompt is lost"
    )
    if probe.ollama and (probe.trained_context or SUGGESTED_WINDOW) >= MIN_WINDOW:
        target = min(SUGGESTED_WINDOW, probe.trained_context or SUGGESTED_WINDOW)
        verdict.reasons.append(f"{cut} (Ollama's default context)")
        verdict.server.append(_ollama_server_line(target))
        verdict.settings["LLM_CONTEXT_TOKENS"] = target
        return target, "once the server runs it with this"
    verdict.reasons.append(f"{cut}; raise the server's context length, or keep the app within it")
    if cut_at >= MIN_WINDOW and (not configured or configured > cut_at):
        verdict.settings["LLM_CONTEXT_TOKENS"] = cut_at
    return min(configured or cut_at, cut_at), "the server cut a longer prompt to it"


def _window_notes(agent: str, window: int, verdict: AgentVerdict) -> None:
    """What a window that works costs the agent: what does not fit one prompt is split over more calls."""
    if agent == "report_writer" and window < REPORT_WINDOW_LOW:
        verdict.notes.append(
            f"a window of {window} tokens: every finding still reaches a writer, but the outline is planned in many "
            f"parts and sections are written in pieces, so the report reads less as a whole; {REPORT_WINDOW_GOOD} "
            "or more writes a good one"
        )
    elif agent == "report_writer" and window < REPORT_WINDOW_GOOD:
        verdict.notes.append(
            f"a window of {window} tokens: the outline and large sections are split over more calls (every "
            f"finding still reaches a writer); {REPORT_WINDOW_GOOD} or more writes a better report"
        )
    elif agent == "website_analyzer" and window < PAGE_WINDOW_COMFORTABLE:
        verdict.notes.append(
            f"a window of {window} tokens: a long page is analysed in more, smaller parts (at most PAGE_MAX_PARTS="
            f"{settings.PAGE_MAX_PARTS}, spread over the page); {PAGE_WINDOW_COMFORTABLE} or more is comfortable"
        )


def _ollama_server_line(tokens: int) -> str:
    return (
        f"OLLAMA_CONTEXT_LENGTH={tokens} in the Ollama server's environment (or PARAMETER num_ctx {tokens} in the "
        "model's Modelfile)"
    )


def _judge_time(agent: str, probe: ModelProbe, verdict: AgentVerdict) -> None:
    """A request must be answered within LLM_TIMEOUT, and a call (its attempts) within LLM_CALL_DEADLINE."""
    answer = ANSWER_TOKENS.get(agent, 2048) + (REASONING_TOKENS if probe.reasoning else 0)
    needed = probe.slowest_s
    if probe.tokens_per_s:
        # The agent's largest answer at the measured speed: the report writer writes thousands of tokens.
        needed = max(needed, (probe.latency_s or 0) + answer / probe.tokens_per_s)
    if needed <= settings.LLM_TIMEOUT:
        return
    timeout = _round_up(needed * 1.5, 10)
    verdict.reasons.append(
        f"a request may take about {needed:.0f} s (an answer of up to {answer} tokens at "
        f"{probe.tokens_per_s or '?'} tokens/s), more than LLM_TIMEOUT={settings.LLM_TIMEOUT:g}: raise LLM_TIMEOUT"
    )
    verdict.settings["LLM_TIMEOUT"] = timeout
    if timeout * 2 > settings.LLM_CALL_DEADLINE:
        verdict.settings["LLM_CALL_DEADLINE"] = timeout * 2


def settings_lines(verdicts: list[AgentVerdict]) -> list[str]:
    """Env lines to paste (comments say why); server-side changes as comments, so the block pastes whole."""
    values: dict[str, int] = {}
    windows: dict[str, int] = {}
    for verdict in verdicts:
        for name, value in verdict.settings.items():
            if name == "LLM_CONTEXT_TOKENS":
                windows[verdict.agent] = value
            else:
                values[name] = max(values.get(name, 0), value)
    lines: list[str] = []
    if windows:
        lines.append("# The context window, in tokens, the server runs the model with (it does not say, or cuts).")
        if len(set(windows.values())) == 1 and len(windows) == len(verdicts):
            lines.append(f"LLM_CONTEXT_TOKENS={next(iter(windows.values()))}")
        else:
            lines += [f"LLM_CONTEXT_TOKENS_{agent.upper()}={value}" for agent, value in windows.items()]
    if "LLM_TIMEOUT" in values:
        lines.append("# Seconds one request may take: the largest answer at the speed measured, with margin.")
        lines.append(f"LLM_TIMEOUT={values['LLM_TIMEOUT']}")
    if "LLM_CALL_DEADLINE" in values:
        lines.append("# Seconds one call may take in all, its retries included.")
        lines.append(f"LLM_CALL_DEADLINE={values['LLM_CALL_DEADLINE']}")
    server = list(dict.fromkeys(line for verdict in verdicts for line in verdict.server))
    if server:
        lines.append("# On the model server:")
        lines += [f"#   {line}" for line in server]
    return lines


def overall(verdicts: Iterable[AgentVerdict]) -> str:
    order: list[str] = [ModelVerdict.WORKS, ModelVerdict.WORKS_WITH_SETTINGS, ModelVerdict.WILL_NOT_WORK]
    return max((v.verdict for v in verdicts), key=order.index, default=ModelVerdict.WORKS)


def model_of(agent: str) -> str:
    return settings.LLM_AGENT_MODELS.get(agent, settings.LLM_MODEL)


def check(timeout: float | None = None) -> CheckReport:
    """Probe each agent's model (each distinct model once) on the configured server; a verdict per agent."""
    started = time.monotonic()
    base_url = settings.OPENAI_BASE_URL or ""
    timeout = timeout or max(settings.LLM_TIMEOUT, settings.LLM_CALL_DEADLINE)
    agents = list(settings.LLM_AGENTS)
    models = list(dict.fromkeys(model_of(agent) for agent in agents))
    probes = {}
    for model in models:
        log.info("checking model %s at %s", model, base_url)
        probes[model] = probe_model(base_url, settings.OPENAI_API_KEY, model, timeout)
    verdicts = [judge_agent(agent, probes[model_of(agent)]) for agent in agents]
    return CheckReport(
        base_url=base_url,
        models=list(probes.values()),
        agents=verdicts,
        verdict=overall(verdicts),
        settings=settings_lines(verdicts),
        seconds=round(time.monotonic() - started, 2),
    )


# --- the printed report ---


def _cells(probe: ModelProbe) -> list[str]:
    if not probe.reachable:
        return ["no: " + probe.error] + [""] * 8
    window = f"{probe.window} ({probe.window_source})" if probe.window else "not reported"
    if probe.ollama and probe.trained_context:
        window += f"; trained for {probe.trained_context}"
    if probe.cut_at:
        size = f"CUT: {probe.long_prompt_chars} chars counted as {probe.cut_at} tokens"
    elif probe.long_prompt_tokens:
        size = f"whole: {probe.long_prompt_chars} chars, {probe.long_prompt_tokens} tokens"
    else:
        size = "not measured"
    return [
        f"yes ({probe.latency_s:.2f} s to a short answer)",
        window,
        *(probe.formats[mode].detail if mode in probe.formats else "not tried" for mode in FORMATS),
        probe.reasoning or "none",
        f"{probe.tokens_per_s:g}" if probe.tokens_per_s else "unknown",
        f"{probe.chars_per_token:g}" if probe.chars_per_token else "unknown",
        size,
    ]


def render_table(report: CheckReport) -> str:
    rows = ["reachable", "context window", *FORMATS, "reasoning noise", "tokens/s", "chars/token", "long prompt"]
    columns = [_cells(probe) for probe in report.models]
    head = max(len(row) for row in rows)
    widths = [
        max(len(probe.model), *(len(cell) for cell in cells))
        for probe, cells in zip(report.models, columns, strict=True)
    ]
    lines = [
        (
            "".ljust(head) + "  " + "  ".join(p.model.ljust(w) for p, w in zip(report.models, widths, strict=True))
        ).rstrip()
    ]
    for index, row in enumerate(rows):
        cells = "  ".join(column[index].ljust(width) for column, width in zip(columns, widths, strict=True))
        lines.append((row.ljust(head) + "  " + cells).rstrip())
    for probe in report.models:
        lines += [f"note ({probe.model}): {note}" for note in probe.notes]
    return "\n".join(lines)


def render_verdicts(report: CheckReport) -> str:
    """A line per verdict, the agents that share it (same model, same findings) together, and why."""
    groups: dict[str, list[AgentVerdict]] = {}
    for verdict in report.agents:
        key = json.dumps([verdict.model, verdict.verdict, verdict.window, verdict.reasons, verdict.notes])
        groups.setdefault(key, []).append(verdict)
    lines = []
    for same in groups.values():
        first = same[0]
        window = f", window {first.window}" if first.window else ""
        agents = ", ".join(verdict.agent for verdict in same)
        lines.append(f"{agents}: {ModelVerdict(first.verdict).label} ({first.model}{window})")
        lines += [f"  - {reason}" for reason in first.reasons]
        lines += [f"  - note: {note}" for note in first.notes]
    return "\n".join(lines)


def render(report: CheckReport) -> str:
    """The whole report as check_model prints it (and the admin shows it)."""
    parts = [
        f"Model check of {report.base_url} ({report.seconds:g} s)",
        "",
        render_table(report),
        "",
        f"Verdict: {ModelVerdict(report.verdict).label}",
        render_verdicts(report),
    ]
    if report.settings:
        parts += ["", "Settings to use (paste into .env):", *report.settings]
    return "\n".join(parts)


def as_json(report: CheckReport) -> str:
    return json.dumps(report.as_dict(), indent=2)
