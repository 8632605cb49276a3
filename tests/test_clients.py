"""The SearxNG and LLM clients against the loopback fakes."""

import time

import pytest

from workers.clients import llm, searxng
from workers.errors import PermanentError, TransientError


def test_search_returns_up_to_7_distinct_http_urls(fakes, fake_searx, fake_web) -> None:  # noqa: ANN001
    fake_searx.results_for = lambda q: [
        "ftp://x.example/a",
        fake_web.url + "/page/a#one",
        fake_web.url + "/page/a#two",
        *[fake_web.url + f"/page/p{i}" for i in range(10)],
    ]
    results = searxng.search("anything")
    assert len(results) == 7
    assert results[0].url == fake_web.url + "/page/a"
    assert len({r.url for r in results}) == 7
    assert fake_searx.requests[-1].query["format"] == "json"


def test_search_retries_transient_then_gives_up(fakes, fake_searx, settings) -> None:  # noqa: ANN001
    settings.SEARCH_MAX_RETRIES = 1
    fake_searx.fail_next(1, status=503)
    assert searxng.search("recovers")  # one retry rides out one failure
    fake_searx.fail_always(500)
    with pytest.raises(TransientError):
        searxng.search("down")


def test_search_json_disabled_is_permanent(fakes, fake_searx) -> None:  # noqa: ANN001
    fake_searx.fail_always(403)
    with pytest.raises(PermanentError):
        searxng.search("forbidden")


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


def test_llm_honours_retry_after(fakes, fake_llm) -> None:  # noqa: ANN001
    fake_llm.fail_next(1, status=429, retry_after=1.0)
    started = time.monotonic()
    result = llm.complete_json("prompt_analyzer", [{"role": "user", "content": "hi"}], "numbers", SCHEMA)
    assert time.monotonic() - started >= 1.0
    assert result.data == {"n": 1} and fake_llm.count("numbers") == 2


def test_llm_gives_up_after_max_retries(fakes, fake_llm, settings) -> None:  # noqa: ANN001
    settings.LLM_MAX_RETRIES = 1
    fake_llm.fail_always(500)
    with pytest.raises(TransientError):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "hi"}], "numbers", SCHEMA)
    assert fake_llm.count("numbers") == 2


def test_llm_reasks_on_invalid_json_then_fails_permanently(fakes, fake_llm, settings) -> None:  # noqa: ANN001
    fake_llm.invalid_json_next(1)
    assert llm.complete_json("prompt_analyzer", [{"role": "user", "content": "x"}], "numbers", SCHEMA).calls == 2
    settings.LLM_INVALID_OUTPUT_RETRIES = 1
    fake_llm.invalid_json_next(5)
    with pytest.raises(llm.InvalidOutputError):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "x"}], "numbers", SCHEMA)


def test_llm_client_error_is_permanent(fakes, fake_llm) -> None:  # noqa: ANN001
    fake_llm.fail_always(401)
    with pytest.raises(PermanentError):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "x"}], "numbers", SCHEMA)
