"""The loopback fakes, exercised through the real clients (`openai`, `requests`); no database."""

from __future__ import annotations

import gzip
import json
import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest
import requests
from bs4 import BeautifulSoup

from devtools.fakes import Canary, FakeLLM, FakeSearx, FakeWeb
from devtools.fakes.llm import SchemaInstance
from devtools.fakes.web import gzip_bomb

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "minItems": 2,
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 10, "maxLength": 80},
                    "objective": {"type": "string"},
                    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                    "kind": {"type": "string", "enum": ["fact", "quote"]},
                    "note": {"type": ["string", "null"]},
                    "confident": {"type": "boolean"},
                },
                "required": ["query", "objective", "priority", "kind", "note", "confident"],
                "additionalProperties": False,
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["queries", "tags"],
    "additionalProperties": False,
}


def json_schema_format(name: str = "plan", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": schema or PLAN_SCHEMA, "strict": True},
    }


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake
    assert not fake.errors


@pytest.fixture
def client(llm: FakeLLM) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.url + "/v1", api_key="test", max_retries=0, timeout=5)


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake
    assert not fake.errors


@pytest.fixture
def searx(web: FakeWeb) -> Iterator[FakeSearx]:
    with FakeSearx(web=web) as fake:
        yield fake
    assert not fake.errors


def ask(client: openai.OpenAI, response_format: dict[str, Any] | None = None, content: str = "plan it") -> str:
    kwargs: dict[str, Any] = {"response_format": response_format} if response_format else {}
    completion = client.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": content}], **kwargs
    )
    return completion.choices[0].message.content or ""


# --- FakeLLM ---


def test_llm_json_schema_answer_is_schema_valid(client: openai.OpenAI, llm: FakeLLM) -> None:
    completion = client.chat.completions.create(
        model="test-model",
        messages=[{"role": "system", "content": "You plan."}, {"role": "user", "content": "plan it"}],
        response_format=json_schema_format(),
    )

    data = json.loads(completion.choices[0].message.content or "")
    jsonschema.validate(data, PLAN_SCHEMA)
    assert len(data["queries"]) == 4  # maxItems wins over minItems
    assert [q["query"][:7] for q in data["queries"]] == ["query 1", "query 2", "query 3", "query 4"]
    assert len(data["tags"]) == 3
    assert completion.model == "test-model"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert llm.count("plan") == 1 and llm.count("other") == 0
    assert llm.calls()[0]["messages"][1]["content"] == "plan it"


def test_llm_generator_is_deterministic_and_handles_refs() -> None:
    schema = {
        "$defs": {"Quote": {"type": "object", "properties": {"text": {"type": "string"}, "url": {"type": "string"}}}},
        "type": "object",
        "properties": {
            "quotes": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Quote"}},
            "score": {"anyOf": [{"type": "null"}, {"type": "number", "minimum": 0.5, "maximum": 1}]},
            "label": {"const": "fixed"},
        },
    }

    first = SchemaInstance("quotes", schema).build()

    assert first == SchemaInstance("quotes", schema).build()
    assert first == {"quotes": [{"text": "text 1", "url": "url 1"}], "score": 1.0, "label": "fixed"}
    jsonschema.validate(first, schema)


def test_llm_handlers_answer_dicts_and_raw_strings(client: openai.OpenAI, llm: FakeLLM) -> None:
    seen: list[dict[str, Any]] = []

    def plan(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        seen.append(schema)
        return {"queries": [], "tags": ["custom"]}

    llm.handlers["plan"] = plan
    llm.handlers["raw"] = lambda body, schema: "not even json"

    assert json.loads(ask(client, json_schema_format())) == {"queries": [], "tags": ["custom"]}
    assert seen == [PLAN_SCHEMA]
    assert ask(client, json_schema_format("raw")) == "not even json"


def test_llm_array_len_overrides_schema_limits(client: openai.OpenAI, llm: FakeLLM) -> None:
    llm.array_len = lambda name, path, n: n + 2 if path == "queries" else n
    too_many = json.loads(ask(client, json_schema_format()))
    assert len(too_many["queries"]) == 6 and len(too_many["tags"]) == 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(too_many, PLAN_SCHEMA)

    llm.array_len = 1
    too_few = json.loads(ask(client, json_schema_format()))
    assert len(too_few["queries"]) == 1 and len(too_few["tags"]) == 1


def test_llm_fail_next_sends_openai_error_with_retry_after(client: openai.OpenAI, llm: FakeLLM) -> None:
    llm.fail_next(2, status=429, retry_after=1.5)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    raw = requests.post(llm.url + "/v1/chat/completions", json=body, timeout=5)
    assert raw.status_code == 429
    assert raw.headers["Retry-After"] == "1.5"
    assert set(raw.json()["error"]) >= {"message", "type", "code"}

    with pytest.raises(openai.RateLimitError):
        ask(client)
    assert ask(client) == "ok"  # faults are consumed, then it answers again


def test_llm_fail_always_until_reset(client: openai.OpenAI, llm: FakeLLM) -> None:
    llm.fail_always(503)
    with pytest.raises(openai.InternalServerError):
        ask(client)
    with pytest.raises(openai.InternalServerError):
        ask(client)

    llm.reset()

    assert llm.requests == []
    assert ask(client) == "ok"


def test_llm_invalid_json_next(client: openai.OpenAI, llm: FakeLLM) -> None:
    llm.invalid_json_next(1)

    with pytest.raises(json.JSONDecodeError):
        json.loads(ask(client, json_schema_format()))
    jsonschema.validate(json.loads(ask(client, json_schema_format())), PLAN_SCHEMA)


def test_llm_json_object_mode_reads_schema_from_messages(client: openai.OpenAI, llm: FakeLLM) -> None:
    system = (
        "You write research plans.\nJSON schema name: plan\nAnswer with JSON only.\n"
        f"JSON schema: {json.dumps(PLAN_SCHEMA)}\nThanks."
    )
    completion = client.chat.completions.create(
        model="test-model",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": "plan it"}],
        response_format={"type": "json_object"},
    )

    jsonschema.validate(json.loads(completion.choices[0].message.content or ""), PLAN_SCHEMA)
    assert llm.count("plan") == 1


def test_llm_without_json_schema_support_answers_400(client: openai.OpenAI, llm: FakeLLM) -> None:
    llm.supports_json_schema = False

    with pytest.raises(openai.BadRequestError):
        ask(client, json_schema_format())
    assert ask(client, {"type": "json_object"}) == "{}"  # json_object mode without schema lines


def test_llm_plain_text_and_per_schema_delay(client: openai.OpenAI, llm: FakeLLM) -> None:
    llm.delays["plan"] = 0.3

    started = time.monotonic()
    assert ask(client) == "ok"
    plain = time.monotonic() - started
    started = time.monotonic()
    ask(client, json_schema_format())
    delayed = time.monotonic() - started

    assert plain < 0.25 <= delayed


# --- FakeSearx ---


def test_searx_json_shape_points_at_fake_web(searx: FakeSearx, web: FakeWeb) -> None:
    response = requests.get(searx.url + "/search", params={"q": "Solid state batteries", "format": "json"}, timeout=5)

    assert response.status_code == 200
    data = response.json()
    assert set(data) >= {
        "query",
        "number_of_results",
        "results",
        "answers",
        "suggestions",
        "unresponsive_engines",
    }
    assert data["query"] == "Solid state batteries"
    urls = [r["url"] for r in data["results"]]
    assert len(urls) == 9 and len(set(urls)) == 8  # one duplicate for the client to drop
    assert urls[0] == web.page_url("solid-state-batteries-1")
    assert all({"url", "title", "content", "engine", "score"} <= set(r) for r in data["results"])
    assert requests.get(urls[0], timeout=5).status_code == 200
    assert searx.queries() == ["Solid state batteries"]


def test_searx_without_json_format_is_forbidden(searx: FakeSearx) -> None:
    assert requests.get(searx.url + "/search", params={"q": "x"}, timeout=5).status_code == 403


def test_searx_faults_delays_and_custom_results(searx: FakeSearx) -> None:
    params = {"q": "slow topic", "format": "json"}
    searx.fail_next(1, status=502)
    assert requests.get(searx.url + "/search", params=params, timeout=5).status_code == 502

    searx.results_for = lambda q: ["https://a.example/x", {"url": "https://b.example/y", "title": "B"}]
    searx.delays = [("slow", 0.2)]
    started = time.monotonic()
    results = requests.get(searx.url + "/search", params=params, timeout=5).json()["results"]
    assert time.monotonic() - started >= 0.2
    assert [(r["url"], r["title"]) for r in results] == [
        ("https://a.example/x", "X"),
        ("https://b.example/y", "B"),
    ]

    searx.fail_always()
    assert requests.get(searx.url + "/search", params=params, timeout=5).status_code == 500
    searx.reset()
    assert len(requests.get(searx.url + "/search", params=params, timeout=5).json()["results"]) == 9


# --- FakeWeb ---


def test_web_article_page_has_sentences_boilerplate_and_hidden_text(web: FakeWeb) -> None:
    response = requests.get(web.page_url("rust-async-2"), timeout=5)

    soup = BeautifulSoup(response.text, "html.parser")
    sentences = FakeWeb.page_text_sentences("rust-async-2")
    assert response.headers["Content-Type"].startswith("text/html")
    assert soup.title is not None and soup.title.string == "Rust Async 2"
    article_text = soup.find("article").get_text(" ")  # type: ignore[union-attr]
    assert len(sentences) == len(set(sentences)) >= 8
    assert all(s in article_text and "rust async 2" in s.lower() for s in sentences)
    assert all(any(ch.isdigit() for ch in s) for s in sentences)
    assert FakeWeb.HIDDEN_MARKER not in article_text and FakeWeb.SCRIPT_MARKER not in article_text
    assert soup.find(style="display:none") is not None and soup.find(hidden=True) is not None
    assert soup.find("nav") and soup.find("footer") and soup.find("script")
    assert sentences != FakeWeb.page_text_sentences("rust-async-3")


def test_web_custom_pages_and_status_routes(web: FakeWeb) -> None:
    url = web.add_page("/paywall", "<p>Subscribe</p>", status=402, headers={"X-Test": "1"})

    response = requests.get(url, timeout=5)
    assert (response.status_code, response.text, response.headers["X-Test"]) == (402, "<p>Subscribe</p>", "1")
    assert requests.get(web.url + "/status/503", timeout=5).status_code == 503
    assert requests.get(web.url + "/nowhere", timeout=5).status_code == 404
    assert "Content-Type" not in requests.get(web.url + "/no-content-type", timeout=5).headers
    assert web.count("/paywall") == 1


def test_web_redirects(web: FakeWeb) -> None:
    chain = requests.get(web.url + "/redirect-chain?n=3", timeout=5)
    assert chain.status_code == 200 and len(chain.history) == 3

    with pytest.raises(requests.TooManyRedirects):
        requests.get(web.url + "/redirect-loop", timeout=5)
    with pytest.raises(requests.TooManyRedirects):
        requests.get(web.url + "/redirect-cycle/a", timeout=5)

    hop = requests.get(web.url + "/redirect", params={"to": "http://127.0.0.1:9/x"}, allow_redirects=False, timeout=5)
    assert hop.status_code == 302 and hop.headers["Location"] == "http://127.0.0.1:9/x"


def test_web_binary_routes(web: FakeWeb) -> None:
    pdf = requests.get(web.url + "/pdf", timeout=5)
    png = requests.get(web.url + "/image.png", timeout=5)
    binary = requests.get(web.url + "/binary?kb=4", timeout=5)

    assert pdf.headers["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF-")
    assert png.headers["Content-Type"] == "image/png" and png.content.startswith(b"\x89PNG")
    assert binary.headers["Content-Type"] == "application/octet-stream" and len(binary.content) == 4096


def test_web_gzip_bomb_is_small_on_the_wire(web: FakeWeb) -> None:
    assert gzip.decompress(gzip_bomb(4)) == bytes(4 << 20)  # the construction is a valid gzip stream

    with requests.get(web.url + "/gzip-bomb", stream=True, timeout=5) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        wire = response.raw.read(decode_content=False)
    assert len(wire) < 2 << 20
    inflated = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(wire, 1 << 20)
    assert inflated == bytes(1 << 20)


def test_web_huge_slow_and_drip(web: FakeWeb) -> None:
    with requests.get(web.url + "/huge?mb=100", stream=True, timeout=5) as response:
        assert "Content-Length" not in response.headers
        first = response.raw.read(1 << 20)
    assert len(first) == 1 << 20 and first.startswith(b"<p>")

    with pytest.raises(requests.ReadTimeout):
        requests.get(web.url + "/slow?seconds=5", timeout=0.2)

    drip = requests.get(web.url + "/drip?seconds=1", timeout=5)
    assert drip.headers["Transfer-Encoding"] == "chunked" and "drip 1" in drip.text


def test_web_hostile_page(web: FakeWeb) -> None:
    response = requests.get(web.url + "/hostile", timeout=5)

    html = response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)</script>" in html
    assert "<img src=x onerror=alert(1)>" in html and 'href="javascript:alert(1)"' in html
    assert FakeWeb.INJECTION in BeautifulSoup(html, "html.parser").get_text()


def test_server_request_log_and_fast_stop() -> None:
    web = FakeWeb().start()
    requests.post(web.url + "/page/a?x=1", json={"k": [1]}, timeout=5)
    record = web.requests[0]
    assert (record.method, record.path, record.query, record.body) == (
        "POST",
        "/page/a",
        {"x": "1"},
        {"k": [1]},
    )
    assert web.host_port in web.url

    with pytest.raises(requests.ReadTimeout):
        requests.get(web.url + "/slow?seconds=30", timeout=0.1)
    started = time.monotonic()
    web.stop()
    assert time.monotonic() - started < 2  # a sleeping handler does not hold the server up


# --- Canary ---


def test_canary_counts_connections(web: FakeWeb) -> None:
    with Canary() as canary:
        assert canary.hits == 0
        socket.create_connection(("127.0.0.1", canary.port), timeout=2).close()
        assert canary.hits == 1

        with pytest.raises(requests.ConnectionError):
            requests.get(web.url + "/redirect", params={"to": canary.url + "/"}, timeout=5)
        assert canary.hits == 2
