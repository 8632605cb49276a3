"""The SearxNG and LLM clients against the loopback fakes, and the backoff they share."""

import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from workers.clients import llm, searxng
from workers.clients.backoff import backoff_delay, parse_retry_after
from workers.errors import PermanentError, TransientError


def test_search_returns_up_to_7_distinct_http_urls(fakes, fake_searx, fake_web) -> None:
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


def test_search_retries_transient_then_gives_up(fakes, fake_searx, settings) -> None:
    settings.SEARCH_MAX_RETRIES = 1
    fake_searx.fail_next(1, status=503)
    assert searxng.search("recovers")  # one retry rides out one failure
    fake_searx.fail_always(500)
    with pytest.raises(TransientError):
        searxng.search("down")


def test_search_json_disabled_is_permanent(fakes, fake_searx, settings) -> None:
    settings.SEARCH_MAX_RETRIES = 3
    fake_searx.fail_always(403)
    with pytest.raises(PermanentError):
        searxng.search("forbidden")
    assert fake_searx.count("forbidden") == 1  # not retried


def test_search_honours_retry_after(fakes, fake_searx, settings) -> None:
    # given a search engine that answers 429 once, asking for a 1.5 s pause (backoff alone waits at most 0.5 s)
    settings.SEARCH_MAX_RETRIES = 1
    fake_searx.fail_next(1, status=429, retry_after=1.5)
    # when
    started = time.monotonic()
    results = searxng.search("patience")
    # then
    assert time.monotonic() - started >= 1.5
    assert results and fake_searx.count("patience") == 2


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


def test_llm_honours_retry_after(fakes, fake_llm) -> None:
    fake_llm.fail_next(1, status=429, retry_after=1.0)
    started = time.monotonic()
    result = llm.complete_json("prompt_analyzer", [{"role": "user", "content": "hi"}], "numbers", SCHEMA)
    assert time.monotonic() - started >= 1.0
    assert result.data == {"n": 1} and fake_llm.count("numbers") == 2


def test_llm_gives_up_after_max_retries(fakes, fake_llm, settings) -> None:
    settings.LLM_MAX_RETRIES = 1
    fake_llm.fail_always(500)
    with pytest.raises(TransientError):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "hi"}], "numbers", SCHEMA)
    assert fake_llm.count("numbers") == 2


def test_llm_reasks_on_invalid_json_then_fails_permanently(fakes, fake_llm, settings) -> None:
    fake_llm.invalid_json_next(1)
    assert llm.complete_json("prompt_analyzer", [{"role": "user", "content": "x"}], "numbers", SCHEMA).calls == 2
    settings.LLM_INVALID_OUTPUT_RETRIES = 1
    fake_llm.invalid_json_next(5)
    with pytest.raises(llm.InvalidOutputError):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "x"}], "numbers", SCHEMA)


def test_llm_client_error_is_permanent(fakes, fake_llm, settings) -> None:
    settings.LLM_MAX_RETRIES = 3
    fake_llm.fail_always(401)
    with pytest.raises(PermanentError):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "x"}], "numbers", SCHEMA)
    assert fake_llm.count("numbers") == 1  # not retried


@pytest.mark.parametrize("attempt", [0, 1, 3, 10])
def test_backoff_is_jittered_within_its_bounds(attempt: int) -> None:
    # given the exponential step for this attempt (0.5 s doubling, capped at 30 s)
    step = min(30.0, 0.5 * 2**attempt)
    # when
    delays = [backoff_delay(attempt, None) for _ in range(2000)]
    # then every delay is between half the step and the step, and they spread over that whole range
    assert all(step / 2 <= delay <= step for delay in delays)
    assert min(delays) < step * 0.55 and max(delays) > step * 0.95
    assert len(set(delays)) > 1900
    quarters = [0] * 4
    for delay in delays:
        quarters[min(3, int((delay - step / 2) / (step / 8)))] += 1
    assert min(quarters) > 350, quarters  # uniform: about 500 in each quarter of the range


def test_backoff_waits_what_retry_after_asks_plus_a_little_jitter() -> None:
    delays = [backoff_delay(0, 2.0) for _ in range(1000)]
    assert all(2.0 <= delay <= 2.25 for delay in delays)
    assert len(set(delays)) > 900
    assert all(60.0 <= backoff_delay(0, 3600.0) <= 60.25 for _ in range(100))  # a runaway ask is capped


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("-1") == 0.0
    in_ten = format_datetime(datetime.now(UTC) + timedelta(seconds=10), usegmt=True)
    assert 8.0 < parse_retry_after(in_ten) <= 10.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None


def test_threads_making_their_first_model_call_at_once_build_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict] = []

    class SlowClient:
        def __init__(self, **options) -> None:
            time.sleep(0.05)  # long enough for every thread to arrive while the first is building
            built.append(options)

    monkeypatch.setattr(llm, "_clients", {})
    monkeypatch.setattr(llm.openai, "OpenAI", SlowClient)
    barrier = threading.Barrier(8)
    clients: list[object] = []

    def first_call() -> None:
        barrier.wait(5)
        clients.append(llm._client())

    callers = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(10)
    assert len(built) == 1
    assert len(clients) == 8 and all(client is clients[0] for client in clients)
    assert built[0]["max_retries"] == 0
