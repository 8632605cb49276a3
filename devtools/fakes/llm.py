"""FakeLLM: an OpenAI-compatible chat-completions server that answers schema-valid JSON.

Point the `openai` client at `fake.url + "/v1"`. The JSON schema comes from `response_format`
(`json_schema` mode) or, in `json_object` and plain-text modes, from two lines the app writes into a message:
`JSON schema name: <name>` and, later, `JSON schema: <one-line JSON>`.

Switches make it behave like the servers teams run (see `FakeLLM`): a context window enforced as vLLM does it,
reported where vLLM, llama.cpp or Ollama report it; Ollama's silent truncation of a long prompt's start; reasoning
blocks; JSON in prose and fences; no `json_schema` or no `json_object`; answers cut at their limit; a tokenizer
that does not count four characters a token.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devtools.fakes.server import FakeServer, Request

Handler = Callable[[dict[str, Any], dict[str, Any]], "dict[str, Any] | list[Any] | str"]
ArrayLen = int | Callable[[str, str, int], int] | None

INVALID_JSON = 'Sure! Here is the JSON you asked for: {"items": [1, 2,'

_NAME_LINE = re.compile(r"^\s*JSON schema name:\s*(\S.*?)\s*$", re.MULTILINE)
_SCHEMA_LINE = re.compile(r"^\s*JSON schema:\s*(\{.*)$", re.MULTILINE)

_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "server_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
}

_FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt".split()


@dataclass(frozen=True)
class _Fault:
    kind: str  # "error" or "invalid_json"
    status: int = 200
    retry_after: float | None = None


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def find_schema(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None, str]:
    """(schema name, schema, mode) of a request; mode is "json_schema", "json_object" or "text"."""
    fmt = body.get("response_format") or {}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "json_schema":
        spec = fmt.get("json_schema") or {}
        return spec.get("name"), spec.get("schema") or {}, "json_schema"
    name: str | None = None
    schema: dict[str, Any] | None = None
    # System messages first: that is where apps put format instructions.
    messages = sorted(body.get("messages") or [], key=lambda m: m.get("role") != "system")
    for message in messages:
        text = message_text(message)
        if name is None and (m := _NAME_LINE.search(text)):
            name = m.group(1)
        if schema is None and (m := _SCHEMA_LINE.search(text)):
            try:
                # raw_decode tolerates trailing text after the JSON on the same line.
                schema, _ = json.JSONDecoder().raw_decode(m.group(1).strip())
            except ValueError:
                schema = None
    if kind != "json_object":
        # Plain text: a model answers JSON only when the prompt asks for it with a schema.
        return (name, schema, "text") if isinstance(schema, dict) and schema else (None, None, "text")
    # json_object mode promises an object even when the app sent no schema lines.
    return name, schema if isinstance(schema, dict) and schema else {"type": "object"}, "json_object"


def error_body(status: int, message: str) -> dict[str, Any]:
    kind, code = _ERROR_KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# Items an array with no `maxItems` gets from a model that writes as much as it may (`fill_to_max`).
UNBOUNDED_FILL = 24


def filled(value: Any, schema: dict[str, Any]) -> Any:
    """`value` with every array repeated (cycling its own items) or cut to the schema's `maxItems`, or repeated to
    UNBOUNDED_FILL items where it has none; an empty array stays empty (nothing to repeat)."""
    if isinstance(value, list) and isinstance(schema, dict):
        items = [filled(item, schema.get("items") or {}) for item in value]
        if not items:
            return items
        size = schema.get("maxItems", UNBOUNDED_FILL)
        return [items[index % len(items)] for index in range(size)]
    if isinstance(value, dict) and isinstance(schema, dict):
        properties = schema.get("properties") or {}
        return {key: filled(item, properties.get(key) or {}) for key, item in value.items()}
    return value


class SchemaInstance:
    """Deterministic generator of an instance valid against a JSON schema (the subset LLM APIs accept)."""

    def __init__(self, name: str, root: dict[str, Any], array_len: ArrayLen = None) -> None:
        self.name = name
        self.root = root
        self.array_len = array_len

    def build(self) -> Any:
        return self._value(self.root, path="", label=self.name or "value", index=0)

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        # Local refs only ("#/$defs/X"); that is what pydantic and hand-written strict schemas use.
        seen = 0
        while isinstance(schema.get("$ref"), str) and seen < 32:
            target: Any = self.root
            for part in schema["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            seen += 1
        return schema

    def _value(self, schema: dict[str, Any], path: str, label: str, index: int) -> Any:
        schema = self._resolve(schema)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][index % len(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                options = [self._resolve(o) for o in schema[key]]
                chosen = next((o for o in options if o.get("type") != "null"), options[0])
                return self._value(chosen, path, label, index)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged.update(self._resolve(part))
            return self._value(merged, path, label, index)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        if kind == "object":
            props: dict[str, Any] = schema.get("properties") or {}
            # Pass the item index down so the objects of an array read "query 1", "query 2", ...
            out = {key: self._value(sub, f"{path}.{key}" if path else key, key, index) for key, sub in props.items()}
            for key in schema.get("required") or []:
                out.setdefault(key, f"{key} {index + 1}")  # required but undeclared: any value is valid
            return out
        if kind == "array":
            default = schema.get("maxItems", schema.get("minItems", 3))
            n = self._length(path, default)
            items = schema.get("items") or {}
            return [self._value(items, f"{path}[]", label, i) for i in range(n)]
        if kind in ("integer", "number"):
            return self._number(schema, index, kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self._string(schema, label, index)

    def _length(self, path: str, default: int) -> int:
        if self.array_len is None:
            return default
        if callable(self.array_len):
            return max(0, int(self.array_len(self.name, path, default)))
        return max(0, int(self.array_len))

    @staticmethod
    def _number(schema: dict[str, Any], index: int, integer: bool) -> int | float:
        value: float = index + 1
        if "minimum" in schema:
            value = max(value, schema["minimum"])
        if "exclusiveMinimum" in schema:
            value = max(value, schema["exclusiveMinimum"] + (1 if integer else 0.5))
        if "maximum" in schema:
            value = min(value, schema["maximum"])
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            value = schema["exclusiveMaximum"] - (1 if integer else 0.5)
        return int(value) if integer else float(value)

    @staticmethod
    def _string(schema: dict[str, Any], label: str, index: int) -> str:
        if schema.get("format") in ("uri", "url"):
            text = f"https://example.com/{label}-{index + 1}"
        else:
            text = f"{label} {index + 1}"
        words = iter(_FILLER * 100)
        while len(text) < schema.get("minLength", 0):
            text += " " + next(words)
        if "maxLength" in schema:
            text = text[: schema["maxLength"]]
        return text


class FakeLLM(FakeServer):
    """OpenAI-compatible `POST /v1/chat/completions` answering schema-valid JSON, with fault switches.

    Per request, in order: `delay` + `delays[name]` sleep; `fail_always`; 400 for json_schema when
    `supports_json_schema` is False; one queued fault (`fail_next` / `invalid_json_next`); otherwise
    `handlers[name](body, schema)`, or the generic generator, or `text_reply` for plain-text requests.

    `array_len` bends the generic generator's array lengths past the schema's limits:
    `fake.array_len = 1`, or `fake.array_len = lambda name, path, n: n + 2` (path like "queries" or
    "sections[].quotes"; n is the length the schema asks for). `reset()` also clears `handlers`.

    Servers as teams run them, each a switch:
    - `context_window = N`: vLLM's window. A prompt plus `max_tokens` over N is refused with vLLM's 400 message;
      without `max_tokens` the answer is cut at what the window leaves (`finish_reason: "length"`). Where the
      window shows: `window_api` "vllm" (`max_model_len` in `GET /v1/models`), "llamacpp" (`GET /props`),
      "ollama" (`POST /api/show` `num_ctx`) or None (nowhere).
    - `truncate_prompt_to = N`: Ollama's default context. A longer prompt loses its start silently, and `usage`
      counts N; `POST /api/show` reports only the trained context (`trained_context`).
    - `chars_per_token = 3.0`: how the tokenizer counts (None: one token a word); `usage` and the window use it.
    - `think = True`: a `<think>` block, with a draft JSON inside, before the answer; `reasoning_field = True`: the
      reasoning in `reasoning_content` instead (a server with a reasoning parser).
    - `prose = True`: "Sure! Here is the JSON:", the JSON in a fence, and a closing sentence.
    - `supports_json_schema = False` / `supports_json_object = False`: 400 for that response format.
    - `cut_next(n)`: the next n answers stop halfway, `finish_reason: "length"`; an answer longer than
      `max_tokens` is always cut there.
    - `first_delay = s`: the first completion request waits s seconds before it answers.
    - `fill_to_max = True`: a model that writes as much as the schema allows: every array of the answer (the
      handler's or the generic one) repeated or cut to its `maxItems`, and one with no `maxItems` repeated to
      UNBOUNDED_FILL items.
    - `output_limit = N`: the server's own cap on answers: one longer than N tokens is cut there
      (`finish_reason: "length"`), whatever `max_tokens` asks.
    """

    def __init__(self, model: str = "fake-model") -> None:
        super().__init__()
        self.model = model  # answered when a request names no model
        self.handlers: dict[str, Handler] = {}
        self._seq = 0
        self.reset_switches()

    def reset_switches(self) -> None:
        with self._lock:
            self.handlers.clear()
            self.array_len: ArrayLen = None
            self.supports_json_schema = True
            self.supports_json_object = True
            self.context_window: int | None = None
            self.window_api: str | None = "vllm"
            self.truncate_prompt_to: int | None = None
            self.trained_context = 131072
            self.chars_per_token: float | None = None
            self.think = False
            self.reasoning_field = False
            self.prose = False
            self.first_delay = 0.0
            self.fill_to_max = False
            self.output_limit: int | None = None
            self._cuts = 0
            self.overflows = 0  # requests refused because they did not fit the window
            self.delay = 0.0
            self.delays: dict[str, float] = {}
            self.text_reply: str | Callable[[dict[str, Any]], str] = "ok"
            self._faults: deque[_Fault] = deque()
            self._always: int | None = None
            self._every: tuple[int, int, float | None] | None = None
            self._served = 0

    # --- switches ---

    def fail_next(self, count: int = 1, status: int = 500, retry_after: float | None = None) -> None:
        """The next `count` requests get an OpenAI-style error, with `Retry-After` when given."""
        with self._lock:
            self._faults.extend(_Fault("error", status, retry_after) for _ in range(count))

    def invalid_json_next(self, count: int = 1) -> None:
        """The next `count` requests get 200 with content that is not JSON."""
        with self._lock:
            self._faults.extend(_Fault("invalid_json") for _ in range(count))

    def fail_every(self, n: int, status: int = 429, retry_after: float | None = None) -> None:
        """Every n-th completion request (n=2: half of them) fails with `status`, until reset."""
        with self._lock:
            self._every = (n, status, retry_after)

    def fail_always(self, status: int | None = 500) -> None:
        """Every request fails with `status` until reset (None turns it off)."""
        with self._lock:
            self._always = status

    def cut_next(self, count: int = 1) -> None:
        """The next `count` answers stop halfway with `finish_reason: "length"`."""
        with self._lock:
            self._cuts += count

    def tokens(self, text: str) -> int:
        """Tokens in `text` as this fake's tokenizer counts them."""
        if self.chars_per_token:
            return math.ceil(len(text) / self.chars_per_token)
        return len(text.split())

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        return sum(self.tokens(message_text(m)) for m in body.get("messages") or [])

    def pending_faults(self) -> int:
        """Queued faults not yet served: 0 means every `fail_next` / `invalid_json_next` reached a client."""
        with self._lock:
            return len(self._faults)

    def generate(self, name: str, schema: dict[str, Any]) -> Any:
        """The generic schema-valid answer (honouring `array_len`); handy inside custom handlers."""
        return SchemaInstance(name, schema, self.array_len).build()

    # --- log helpers ---

    def calls(self, name: str | None = None) -> list[dict[str, Any]]:
        """Bodies of the chat-completion requests received, optionally only those for one schema name."""
        bodies = [r.body for r in self.requests if r.path.endswith("/chat/completions") and isinstance(r.body, dict)]
        if name is None:
            return bodies
        return [b for b in bodies if find_schema(b)[0] == name]

    def count(self, name: str | None = None) -> int:
        return len(self.calls(name))

    # --- protocol ---

    def handle(self, request: Request) -> None:
        path = request.record.path.rstrip("/")
        if request.command == "GET" and path in ("/v1/models", "/models"):
            entry: dict[str, Any] = {"id": self.model, "object": "model", "owned_by": "fake"}
            if self.context_window and self.window_api == "vllm":
                entry["max_model_len"] = self.context_window
            request.send_json(200, {"object": "list", "data": [entry]})
            return
        if path in ("/props", "/api/show", "/api/ps"):
            self._window_endpoint(request, path)
            return
        if path not in ("/v1/chat/completions", "/chat/completions"):
            request.send_json(404, error_body(404, f"Unknown path {path}"))
            return
        if request.command != "POST":
            request.send_json(405, error_body(405, "Use POST"))
            return
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            request.send_json(400, error_body(400, "Request body must be JSON with 'messages'"))
            return
        name, schema, mode = find_schema(body)

        with self._lock:
            first, self.first_delay = self.first_delay, 0.0
        self.sleep(first + self.delay + (self.delays.get(name, 0.0) if name else 0.0))
        with self._lock:
            always = self._always
            unsupported = (mode == "json_schema" and not self.supports_json_schema) or (
                mode == "json_object" and not self.supports_json_object
            )
            fault = self._faults.popleft() if always is None and not unsupported and self._faults else None
            self._served += 1
            if fault is None and always is None and self._every and self._served % self._every[0] == 0:
                fault = _Fault("error", self._every[1], self._every[2])
        if always is not None:
            self._send_error(request, always, None)
            return
        if unsupported:
            message = f"Invalid parameter: 'response_format' of type '{mode}' is not supported with this model."
            request.send_json(400, error_body(400, message))
            return
        body = self._truncated(body)
        prompt = self.prompt_tokens(body)
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if self.context_window and prompt + (max_tokens or 0) > self.context_window:
            with self._lock:
                self.overflows += 1
            message = (
                f"This model's maximum context length is {self.context_window} tokens. However, you requested "
                f"{prompt + (max_tokens or 0)} tokens ({prompt} in the messages, {max_tokens or 0} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            request.send_json(400, error_body(400, message))
            return
        if fault is not None and fault.kind == "error":
            self._send_error(request, fault.status, fault.retry_after)
            return

        if fault is not None:
            content = INVALID_JSON
        elif schema is None:
            reply = self.text_reply
            content = reply(body) if callable(reply) else reply
        else:
            handler = self.handlers.get(name) if name else None
            result = handler(body, schema) if handler else self.generate(name or "", schema)
            if self.fill_to_max and not isinstance(result, str):
                result = filled(result, schema)
            content = result if isinstance(result, str) else json.dumps(result)
            content = self._dressed(content)
        self._send_completion(request, body, content)

    def _dressed(self, content: str) -> str:
        """The answer as the switched-on model habits wrap it."""
        if self.prose:
            fenced = f"```json\n{content}\n```"
            content = f"Sure! Here is the JSON you asked for:\n\n{fenced}\n\nLet me know if you need anything else."
        if self.think:
            draft = '{"draft": true, "questions": ["not this one"]}'
            content = (
                "<think>\nThe user wants JSON. Let me think about the answer step by step before I write it. A first "
                f"draft could be {draft}, but that is not quite right; I will write the final answer now.\n</think>\n\n"
                + content
            )
        return content

    def _truncated(self, body: dict[str, Any]) -> dict[str, Any]:
        """Ollama's silent cut: a prompt over `truncate_prompt_to` tokens keeps only its end."""
        limit = self.truncate_prompt_to
        if not limit or self.prompt_tokens(body) <= limit:
            return body
        kept: list[dict[str, Any]] = []
        left = limit
        for message in reversed(body["messages"]):
            text = message_text(message)
            size = self.tokens(text)
            if size <= left:
                kept.insert(0, message)
                left -= size
                continue
            if left > 0:
                if self.chars_per_token:
                    tail = text[len(text) - int(left * self.chars_per_token) :]
                else:
                    tail = " ".join(text.split()[-left:])
                kept.insert(0, {**message, "content": tail})
            break
        return {**body, "messages": kept}

    def _window_endpoint(self, request: Request, path: str) -> None:
        """Where llama.cpp and Ollama say what window a model runs with."""
        window = self.context_window
        if path == "/props" and self.window_api == "llamacpp" and window:
            request.send_json(200, {"default_generation_settings": {"n_ctx": window}, "total_slots": 1})
        elif path == "/api/show" and (self.window_api == "ollama" or self.truncate_prompt_to):
            parameters = f"num_ctx {window}\nstop <|eot_id|>" if window and self.window_api == "ollama" else ""
            info = {"general.architecture": "llama", "llama.context_length": self.trained_context}
            request.send_json(200, {"parameters": parameters, "model_info": info, "details": {"format": "gguf"}})
        elif path == "/api/ps" and self.window_api == "ollama":
            request.send_json(200, {"models": []})
        else:
            request.send_json(404, error_body(404, f"Unknown path {path}"))

    def _send_error(self, request: Request, status: int, retry_after: float | None) -> None:
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        request.send_json(status, error_body(status, f"Fake failure with status {status}"), headers)

    def _send_completion(self, request: Request, body: dict[str, Any], content: str) -> None:
        with self._lock:
            self._seq += 1
            completion_id = f"chatcmpl-fake{self._seq:06d}"
        model = body.get("model") or self.model
        prompt_tokens = self.prompt_tokens(body)
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if self.context_window and not limit:
            limit = max(1, self.context_window - prompt_tokens)
        if self.output_limit:
            limit = min(limit or self.output_limit, self.output_limit)
        finish = "stop"
        with self._lock:
            cut_now = self._cuts > 0
            self._cuts -= 1 if cut_now else 0
        if cut_now:
            limit = max(1, min(limit or 10**9, self.tokens(content) // 2))
        if limit and self.tokens(content) > limit:
            content, finish = self._cut(content, limit), "length"
        completion_tokens = self.tokens(content)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        created = int(time.time())
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if self.reasoning_field:
            message["reasoning_content"] = 'The user wants JSON; a draft {"draft": true} will not do.'
        if body.get("stream"):
            self._send_stream(request, completion_id, created, model, content, usage, body)
            return
        request.send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": usage,
            },
        )

    def _cut(self, content: str, limit: int) -> str:
        if self.chars_per_token:
            return content[: int(limit * self.chars_per_token)]
        return " ".join(content.split(" ")[:limit])

    @staticmethod
    def _send_stream(
        request: Request,
        completion_id: str,
        created: int,
        model: str,
        content: str,
        usage: dict[str, int],
        body: dict[str, Any],
    ) -> None:
        """Server-sent events as the real API streams them: role, content, finish, optional usage, [DONE]."""
        base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        deltas = [
            {"role": "assistant", "content": ""},
            {"content": content},
        ]
        chunks: list[dict[str, Any]] = [
            {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
        ]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": usage})
        request.start_chunked(200, "text/event-stream")
        for chunk in chunks:
            request.write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        request.write_chunk(b"data: [DONE]\n\n")
        request.end_chunked()
