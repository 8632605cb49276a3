"""What a model's server can take: its context window, how it counts tokens, how fast it answers.

The window comes from the settings (LLM_CONTEXT_TOKENS, or LLM_CONTEXT_TOKENS_<AGENT>), else from the server
itself, asked once per process: vLLM lists `max_model_len` with each model at `GET /v1/models`, llama.cpp's server
reports `n_ctx` at `GET /props`, Ollama the `num_ctx` a model runs with at `/api/ps` or `/api/show` (its trained
context is not its window: by default Ollama runs a few thousand tokens and silently drops the start of a longer
prompt). Whatever the source, a server's own "maximum context length" error is the last word: the window it names
is learned, and the request is made smaller.

Token counts are learned per model from the `usage` the server reports: the characters per token of the prompts
sent so far. A fixed four characters per token is wrong by a third for code, by half for many tokenizers on
non-English text, and a prompt that is estimated short overflows the window. Until the first answer, a
conservative 2.5 is assumed (as dense as URLs and figures count).

All of this is kept per (server, model) where every worker reads it (see ModelFacts): one worker's lesson spares
the others the same mistake.
"""

import logging
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlparse, urlunparse

import redis
import requests
from django.conf import settings

log = logging.getLogger(__name__)

# Before any usage is seen: as dense as tokenizers count (URLs, figures, ids), so the first prompts err small.
DEFAULT_CHARS_PER_TOKEN = 2.5
# No tokenizer packs more characters than this into a token on average; more means the server cut the prompt.
MAX_PLAUSIBLE_CHARS_PER_TOKEN = 8.0
# Tokens a chat template adds around each message (role markers, separators), beyond the text itself.
TOKENS_PER_MESSAGE = 8
DISCOVERY_TIMEOUT = 5.0
# A failed discovery is tried again after this long: a server that was down may have come up.
REDISCOVER_AFTER = 600.0

_CONTEXT_ERROR = re.compile(
    r"maximum context length|context length|context window|context size|n_ctx|too many tokens|"
    r"prompt is too long|exceeds? (?:the )?(?:available |model'?s? )?context",
    re.IGNORECASE,
)
_WINDOW_IN_ERROR = [
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),  # vLLM, OpenAI
    re.compile(r"context length of only (\d+)", re.IGNORECASE),  # LM Studio
    re.compile(r"n_ctx[\"']?\s*[:=]\s*(\d+)", re.IGNORECASE),  # llama.cpp
    re.compile(r"context (?:window|size|length) (?:is |of )?(\d+)", re.IGNORECASE),
]
# vLLM says what the prompt took: "(P in the messages, C in the completion)"; newer: "your request has P input".
_PROMPT_TOKENS_IN_ERROR = [
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),
    re.compile(r"has (\d+) input tokens", re.IGNORECASE),
    re.compile(r"n_prompt_tokens[\"']?\s*[:=]\s*(\d+)", re.IGNORECASE),
]


# Everything learned of one model on one server, shared by every process in a Redis hash: a window one worker
# learned from an error spares the others the same error.
KEY_PREFIX = "model-server:"
KEY_TTL = 7 * 24 * 3600
# Calibration sums are halved past this many tokens, so the ratio follows the recent prompts.
CALIBRATION_TOKENS = 200_000


@dataclass(frozen=True)
class ModelFacts:
    """What the fleet has learned of one model on one server (a snapshot read from the store)."""

    window: int | None = None
    window_source: str = ""
    learned_window: int | None = None  # from the server's own overflow error or a cut prompt: it beats the rest
    discovered_at: float | None = None
    chars: float = 0.0
    tokens: float = 0.0
    slowest: float = 0.0  # seconds of the slowest recent answer
    unanswered: float = 0.0  # the longest wait for an answer that did not come
    reasoning: bool = False  # answers came with reasoning blocks: thinking takes answer tokens
    output_format: int = 0  # index into the client's formats: the first one the server has not refused
    completion_tokens_param: bool = False  # the server wants max_completion_tokens, not max_tokens
    # The most tokens the server lets an answer have, whatever `max_tokens` asks (a server's own cap, llama.cpp's
    # n_predict): learned from an answer cut short of the room it was given.
    output_limit: int | None = None
    # The largest request (prompt and answer room, in tokens) the server has answered: while its window is unknown,
    # a larger one is sent only through the probe (see Probe).
    proven: int = 0

    @classmethod
    def parse(cls, raw: dict[str, str]) -> "ModelFacts":
        def number(name: str) -> float:
            try:
                return float(raw.get(name) or 0)
            except ValueError:
                return 0.0

        return cls(
            window=int(number("window")) or None,
            window_source=raw.get("window_source", ""),
            learned_window=int(number("learned_window")) or None,
            discovered_at=number("discovered_at") or None,
            chars=number("chars"),
            tokens=number("tokens"),
            slowest=number("slowest"),
            unanswered=number("unanswered"),
            reasoning=raw.get("reasoning") == "1",
            output_format=int(number("output_format")),
            completion_tokens_param=raw.get("completion_tokens_param") == "1",
            output_limit=int(number("output_limit")) or None,
            proven=int(number("proven")),
        )


_lock = threading.Lock()
_redis_clients: dict[str, redis.Redis] = {}


def _redis(url: str | None = None) -> redis.Redis:
    url = settings.REDIS_URL if url is None else url
    client = _redis_clients.get(url)
    if client is None:
        client = _redis_clients[url] = redis.Redis.from_url(url, socket_timeout=5, decode_responses=True)
    return client


def _key(model: str) -> str:
    return f"{KEY_PREFIX}{settings.OPENAI_BASE_URL or ''}|{model}"


# What this process read of each model's facts, and when: a model call asks for them a dozen times or more (its
# format, its window, its characters per token for each message), and one read of the store per call and per
# second is enough. What this process learns replaces its copy at once; another worker's lesson arrives within
# FACTS_FRESH_SECONDS (and is learned here again at worst, from the same error).
FACTS_FRESH_SECONDS = 1.0
# key: (when read, the store's fields as read, merged with what this process wrote since, and their facts)
_read: dict[str, tuple[float, dict[str, str], ModelFacts]] = {}
# key: how many writes this process has made to it (a read that saw the count change does not replace the copy)
_generation: dict[str, int] = {}


def facts(model: str) -> ModelFacts:
    key = _key(model)
    now = time.monotonic()
    with _lock:
        kept = _read.get(key)
        generation = _generation.get(key, 0)
    if kept is not None and now - kept[0] < FACTS_FRESH_SECONDS:
        return kept[2]
    raw = cast(dict[str, str], _redis().hgetall(key))  # a synchronous client's reply
    with _lock:
        if _generation.get(key, 0) != generation:
            # This process wrote while the store was read: the read may predate the write, which this process's
            # copy holds. Kept, the read replaced that copy for a second, and a window just learned was forgotten
            # by the threads that read it next (each then overflowed it again). Both, not kept: read again next.
            current = _read.get(key)
            return ModelFacts.parse({**raw, **(current[1] if current else {})})
        read = ModelFacts.parse(raw)
        _read[key] = (now, raw, read)
    return read


def _write(model: str, *, where: tuple[str, str] | None = None, **fields: Any) -> None:
    """Store fields of the model's facts; `where` (key, Redis URL) for a thread that runs outside the settings'
    current values."""
    key, url = where or (_key(model), settings.REDIS_URL)
    values = {name: ("1" if value is True else "0" if value is False else str(value)) for name, value in fields.items()}
    with _lock:
        # This process's copy takes what it wrote at once, as a read of the store would give it, without reading
        # the store again (the store's other fields arrive with the next read, within FACTS_FRESH_SECONDS; with no
        # copy yet, the next call reads the store).
        kept = _read.get(key)
        merged = {**(kept[1] if kept else {}), **values}
        _read[key] = (kept[0] if kept else -FACTS_FRESH_SECONDS, merged, ModelFacts.parse(merged))
        _generation[key] = _generation.get(key, 0) + 1
    with _redis(url).pipeline() as pipe:
        pipe.hset(key, mapping=values)
        pipe.expire(key, KEY_TTL)
        pipe.execute()


def _lower(model: str, name: str, value: int) -> None:
    """Set a window field to `value` unless it already holds a smaller one."""
    current = getattr(facts(model), name)
    if current is None or value < current:
        field: dict[str, Any] = {name: value}
        _write(model, **field)


def forget() -> None:
    """Everything learned of every model server (tests, and `check_model`, which measures afresh)."""
    with _lock:
        _read.clear()
        _generation.clear()
        _pending.clear()
        _sampled.clear()
    client = _redis()
    keys = list(client.scan_iter(f"{KEY_PREFIX}*", count=500))
    if keys:
        client.delete(*keys)


def output_format(model: str) -> int:
    return facts(model).output_format


def refuse_format(model: str, index: int) -> None:
    """The server refused format `index`: the next one from now on."""
    _write(model, output_format=index + 1)


def wants_completion_tokens(model: str) -> bool:
    return facts(model).completion_tokens_param


def refuse_max_tokens(model: str) -> None:
    _write(model, completion_tokens_param=True)


# --- the window ---


def configured_window(agent: str) -> int | None:
    """The window the settings give this agent, if any."""
    return settings.LLM_CONTEXT_TOKENS_AGENTS.get(agent) or settings.LLM_CONTEXT_TOKENS or None


def window(agent: str, model: str) -> tuple[int | None, str]:
    """(context window in tokens, where it came from) for the agent's model; (None, "") when nobody knows."""
    known = facts(model)
    configured = configured_window(agent)
    found: int | None
    if configured:
        found, source = configured, "setting"
    else:
        _discover_once(model, known)
        found, source = known.window, known.window_source
    if known.learned_window and (found is None or known.learned_window < found):
        return known.learned_window, "learned from the server"
    return found, source


def _discover_once(model: str, known: ModelFacts) -> None:
    """Ask the server for the window, in the background: no call waits on a server that is slow to say (the first
    calls go with the budgets alone, and a context-length error still teaches the window)."""
    now = time.time()
    if known.discovered_at is not None and (known.window or now - known.discovered_at < REDISCOVER_AFTER):
        return
    _write(model, discovered_at=now)  # one discovery at a time (near enough: a second one does no harm)
    base_url, api_key, where = settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, (_key(model), settings.REDIS_URL)

    def run() -> None:
        found, source = discover(base_url, model, api_key)
        if found:
            log.info("context window of %s: %s tokens (%s)", model, found, source)
            _write(model, where=where, window=found, window_source=source)

    threading.Thread(target=run, name=f"window of {model}"[:60], daemon=True).start()


def discover(
    base_url: str | None, model: str, api_key: str = "", timeout: float = DISCOVERY_TIMEOUT
) -> tuple[int | None, str]:
    """The window the server reports for the model, and which endpoint said so; (None, "") when none does."""
    if not base_url:
        return None, ""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = _server_root(base_url)
    attempts = (
        (lambda: _from_models(_get(base_url.rstrip("/") + "/models", headers, timeout), model), "GET /v1/models"),
        (lambda: _from_props(_get(root + "/props", headers, timeout)), "GET /props"),
        (lambda: _from_ollama_ps(_get(root + "/api/ps", headers, timeout), model), "GET /api/ps"),
        (lambda: _from_ollama_show(_post(root + "/api/show", {"model": model}, headers, timeout)), "POST /api/show"),
    )
    for attempt, source in attempts:
        try:
            found = attempt()
        except (requests.RequestException, ValueError, TypeError, AttributeError):
            continue
        if found:
            return found, source
    return None, ""


def ollama_trained_context(base_url: str, model: str, api_key: str = "") -> int | None:
    """The context a model was trained for, as Ollama's `/api/show` gives it (not the window it runs with)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        shown = _post(_server_root(base_url) + "/api/show", {"model": model}, headers, DISCOVERY_TIMEOUT)
    except (requests.RequestException, ValueError):
        return None
    info = shown.get("model_info") if isinstance(shown, dict) else None
    if not isinstance(info, dict):
        return None
    lengths = [v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)]
    return max(lengths) if lengths else None


def _server_root(base_url: str) -> str:
    parts = urlparse(base_url)
    path = re.sub(r"/v1/?$", "", parts.path.rstrip("/"))
    return urlunparse(parts._replace(path=path, query="", fragment="")).rstrip("/")


def _get(url: str, headers: dict[str, str], timeout: float) -> Any:
    response = requests.get(url, headers=headers, timeout=timeout)
    response.raise_for_status()
    return response.json()


def _post(url: str, body: dict[str, Any], headers: dict[str, str], timeout: float) -> Any:
    response = requests.post(url, json=body, headers=headers, timeout=timeout)
    response.raise_for_status()
    return response.json()


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_models(listing: Any, model: str) -> int | None:
    entries = [e for e in listing.get("data", []) if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in named:
        found = _positive(entry.get("max_model_len")) or _positive(entry.get("context_length"))
        if found:
            return found
    return None


def _from_props(props: Any) -> int | None:
    generation = props.get("default_generation_settings") or {}
    return _positive(generation.get("n_ctx")) or _positive(props.get("n_ctx"))


def _from_ollama_ps(running: Any, model: str) -> int | None:
    for entry in running.get("models", []):
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
            return _positive(entry.get("context_length"))
    return None


def _from_ollama_show(shown: Any) -> int | None:
    parameters = shown.get("parameters") or ""
    match = re.search(r"^\s*num_ctx\s+(\d+)", parameters, re.MULTILINE) if isinstance(parameters, str) else None
    return int(match.group(1)) if match else None


def is_context_error(message: str) -> bool:
    return bool(_CONTEXT_ERROR.search(message))


def learn_from_error(
    model: str, message: str, body: Any, sent_chars: int, max_tokens: int | None
) -> tuple[int, int | None]:
    """(the window a context-length error tells of, the prompt's tokens as the server counted them, if it says):
    the window is learned for the model.

    Where the error names no window, the prompt as sent (in tokens) is taken as over it by a quarter. Where it says
    how many tokens the prompt took, that is a calibration sample too, stored at once: the next prompt, here or on
    another worker, is counted by it.
    """
    text = f"{message} {body if isinstance(body, dict | str) else ''}"
    prompt_tokens = _first_int(_PROMPT_TOKENS_IN_ERROR, text)
    if prompt_tokens:
        observe_usage(model, sent_chars, prompt_tokens, at_once=True)
    found = window_in_error(text)
    if found is None:
        sent = prompt_tokens or estimate_tokens(model, sent_chars)
        found = max(256, int((sent + (max_tokens or 0)) * 0.75))
    _lower(model, "learned_window", found)
    log.warning("model %s: the server's window is %s tokens (from its error: %s)", model, found, message[:200])
    return found, prompt_tokens


# A window nobody reports is taken to hold at least this much: no agent works in less.
UNKNOWN_WINDOW_FLOOR = 4096


def observe_accepted(model: str, tokens: int) -> None:
    """The server answered a request of `tokens` (prompt and answer room): its window holds at least that."""
    if tokens > facts(model).proven * 1.1:
        _write(model, proven=tokens)


def reread(model: str) -> None:
    """Drop this process's copy of the model's facts: the next look reads the store (what another worker learned
    a moment ago included)."""
    with _lock:
        _read.pop(_key(model), None)


def unproven(model: str, tokens: int) -> bool:
    """Whether a request of `tokens` (prompt and answer room) is larger than any the server has answered (and than
    UNKNOWN_WINDOW_FLOOR): sent into a window nobody knows, it goes through the probe."""
    return tokens > max(UNKNOWN_WINDOW_FLOOR, facts(model).proven)


class Probe:
    """One request at a time, fleet-wide, into a window nobody knows yet: the first request larger than any the
    server has answered finds out, by its answer (the window holds it) or by its error (which names the window),
    before the others are sent. Without it a burst of large requests in parallel, each of a worker's threads at
    once, all overflowed before the first error taught the window. Held in Redis (SET NX with an expiry, so a
    worker that dies does not hold it)."""

    def __init__(self, model: str, hold_seconds: float) -> None:
        self._key = f"{KEY_PREFIX}probe:{_key(model)}"
        self._token = secrets.token_hex(8)
        self._hold_ms = max(1000, int(hold_seconds * 1000))
        self._held = False

    def acquire(self, until: float) -> bool:
        """Wait for the probe until `until` (a `time.monotonic()` value); whether it was taken."""
        client = _redis()
        while not self._held:
            self._held = bool(client.set(self._key, self._token, nx=True, px=self._hold_ms))
            if not self._held:
                if time.monotonic() >= until:
                    return False
                time.sleep(0.05)
        return True

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        client = _redis()
        if client.get(self._key) == self._token:
            client.delete(self._key)  # ours still (an expired hold may have passed to another): theirs is kept


def output_limit(model: str) -> int | None:
    """The most tokens the server lets an answer have, where an answer cut short of its room showed it."""
    return facts(model).output_limit


def learn_output_limit(model: str, tokens: int) -> None:
    """An answer stopped for its length at `tokens`, short of the room it was given: the server caps answers."""
    _lower(model, "output_limit", tokens)
    log.warning("model %s: the server cuts answers at %s tokens, whatever max_tokens asks", model, tokens)


def window_in_error(text: str) -> int | None:
    """The window a server's context-length error names (vLLM, OpenAI, LM Studio, llama.cpp wordings), if any."""
    return _first_int(_WINDOW_IN_ERROR, text)


def _first_int(patterns: list[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


# --- tokens ---


def chars_per_token(model: str) -> float:
    """Characters per prompt token for this model, from the usage its server reported (see the module doc)."""
    known = facts(model)
    return known.chars / known.tokens if known.tokens else DEFAULT_CHARS_PER_TOKEN


def estimate_tokens(model: str, text: str | int, messages: int = 0) -> int:
    """Tokens `text` (or that many characters) will take in this model's prompt, plus template overhead."""
    chars = text if isinstance(text, int) else len(text)
    return math.ceil(chars / chars_per_token(model)) + messages * TOKENS_PER_MESSAGE


def observe_usage(model: str, prompt_chars: int, prompt_tokens: int, at_once: bool = False) -> None:
    """Learn from a prompt's size as the server counted it (`at_once`: stored now, not with the next second's).

    A count far below what the characters can make means the server cut the prompt without saying so (Ollama does,
    at its `num_ctx`): its window is learned instead, and the sample is not a ratio.
    """
    if prompt_tokens <= 0 or prompt_chars <= 0:
        return
    if prompt_chars / prompt_tokens > MAX_PLAUSIBLE_CHARS_PER_TOKEN and prompt_chars > 4000:
        _lower(model, "learned_window", prompt_tokens)
        log.warning(
            "model %s: the server counted %s tokens for a prompt of %s characters: it cuts long prompts silently; "
            "its window is taken as %s tokens (set the server's context length, e.g. Ollama's num_ctx)",
            model,
            prompt_tokens,
            prompt_chars,
            prompt_tokens,
        )
        return
    # The samples go to the store at most once per FACTS_FRESH_SECONDS per process and model, summed meanwhile:
    # a write per model call was a third of a worker's Redis commands at zero latency, for a ratio that a few
    # samples settle. The first sample of a model goes at once.
    key, now = _key(model), time.monotonic()
    with _lock:
        pending_chars, pending_tokens = _pending.get(key, (0.0, 0.0))
        _pending[key] = (pending_chars + prompt_chars, pending_tokens + prompt_tokens)
        if not at_once and key in _sampled and now - _sampled[key] < FACTS_FRESH_SECONDS:
            return
        _sampled[key] = now
        pending_chars, pending_tokens = _pending.pop(key)
    known = facts(model)
    chars, tokens = known.chars + pending_chars, known.tokens + pending_tokens
    if tokens > CALIBRATION_TOKENS:
        chars, tokens = chars / 2, tokens / 2
    _write(model, chars=chars, tokens=tokens)


# Prompt sizes observed and not yet written (characters, tokens), and when each model's were last written.
_pending: dict[str, tuple[float, float]] = {}
_sampled: dict[str, float] = {}


# --- speed and reasoning ---


def observe_answer(model: str, seconds: float, reasoning: bool) -> None:
    known = facts(model)
    # The slowest answer, decaying: a model that sped up (a warm cache, a freed GPU) is trusted again over time.
    slowest = max(seconds, known.slowest * 0.9)
    if reasoning and not known.reasoning:
        _write(model, slowest=round(slowest, 3), reasoning=True)
    elif abs(slowest - known.slowest) > 0.05:
        _write(model, slowest=round(slowest, 3))


def observe_timeout(model: str, seconds: float) -> None:
    """A request went unanswered for `seconds`: the model may take longer, so the next request waits longer."""
    if seconds > facts(model).unanswered:
        _write(model, unanswered=round(seconds, 3))


def attempt_timeout(model: str) -> float:
    """Seconds one request may take: LLM_TIMEOUT, or more for a model that has shown it is slower.

    A CPU-served model that needs a minute per answer is slow, not broken: a request gets three times the slowest
    recent answer, and after one went unanswered, twice that wait.
    """
    known = facts(model)
    return max(settings.LLM_TIMEOUT, 3 * known.slowest, 2 * known.unanswered)


def call_deadline(model: str) -> float:
    """Seconds one call may take in all (attempts, backoff, re-asks): LLM_CALL_DEADLINE, or room for four of the
    slowest answers this model has given."""
    return max(settings.LLM_CALL_DEADLINE, 4 * facts(model).slowest)


def reasoning_seen(model: str) -> bool:
    return facts(model).reasoning


@dataclass(frozen=True)
class Room:
    """What one prompt may take, in tokens, and the model's token arithmetic to fill it."""

    model: str
    tokens: int  # the whole prompt, every message included
    # Characters per token to count in, where the call has learned better than the model's average (the server
    # counted this very prompt denser: URLs, figures and ids take more tokens than prose); None: the model's.
    ratio: float | None = None

    @property
    def chars_per_token(self) -> float:
        average = chars_per_token(self.model)
        return average if self.ratio is None else min(average, self.ratio)

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def left(self, *fixed: str, reserve: int = 0) -> int:
        """Tokens left for the variable part once the fixed texts (and `reserve`) are in."""
        used = sum(self.count(text) for text in fixed) + 2 * TOKENS_PER_MESSAGE + reserve
        return max(0, self.tokens - used)

    def chars(self, tokens: int) -> int:
        return int(tokens * self.chars_per_token)

    def fits(self, *texts: str) -> bool:
        """Whether a prompt of these messages fits the room."""
        return sum(self.count(text) + TOKENS_PER_MESSAGE for text in texts) <= self.tokens
