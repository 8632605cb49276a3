"""Every step is bounded in time: model calls, searches and DNS lookups end by their deadlines, SQL statements and
lock waits by PostgreSQL's timeouts, and the follow-up questions request by QUESTIONS_DEADLINE.

Bounds are asserted loosely (a hang of 60 s against a deadline of 2 s must end well under 30 s), never tightly.
"""

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from research.models import QueryStatus, SerpQuery, Website, WebsiteStatus
from tests.fakes import FakeLLM, FakeSearx
from tests.fakes.server import FakeServer, Request
from tests.support.factories import running_research
from workers.clients import llm, netguard, searxng
from workers.clients.fetch import FetchError, fetch_page
from workers.errors import DeadlineExceeded, TransientError
from workers.pipeline.scrape import scrape_website

HANG = 60.0  # how long a hung peer stays silent: far past every deadline below
BOUND = 30.0  # what "ended in bounded time" means here, against deadlines of about 2 s
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


class Trickle(FakeServer):
    """Answers every request with headers at once, then one byte every half second for a minute: never silent long
    enough to trip a read timeout, so only a deadline on the whole call ends it."""

    def handle(self, request: Request) -> None:
        request.start_chunked(200, "application/json")
        started = time.monotonic()
        while time.monotonic() - started < HANG and self.sleep(0.5):
            request.write_chunk(b" ")


@pytest.fixture(scope="module")
def trickle() -> Iterator[Trickle]:
    with Trickle() as server:
        yield server


def ask_model() -> llm.LLMResult:
    return llm.complete_json("prompt_analyzer", [{"role": "user", "content": "hi"}], "numbers", SCHEMA)


def timed(call: Any) -> tuple[BaseException | None, float]:
    """The exception `call()` raised (None if it returned) and how long it took."""
    started = time.monotonic()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - returned for the test to check
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


# --- model calls ----------------------------------------------------------------------------------------------


def test_hung_model_server_ends_the_call_by_its_deadline(fakes, fake_llm: FakeLLM, settings) -> None:
    # given a model server that accepts the request and then says nothing for a minute, and retries to spare
    settings.LLM_CALL_DEADLINE = 2.0
    settings.LLM_MAX_RETRIES = 10
    fake_llm.delay = HANG
    # when
    error, took = timed(ask_model)
    # then the call ended, as a timeout, long before the server would have answered
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND


def test_model_server_that_trickles_ends_the_call_by_its_deadline(fakes, trickle: Trickle, settings) -> None:
    # given a model server that keeps its answer coming a byte at a time (each read well within LLM_TIMEOUT)
    settings.OPENAI_BASE_URL = trickle.url + "/v1"
    settings.LLM_CALL_DEADLINE = 2.0
    # when
    error, took = timed(ask_model)
    # then
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND
    assert trickle.requests, "the call never reached the trickling server"


def test_model_retries_and_backoff_end_by_the_call_deadline(fakes, fake_llm: FakeLLM, settings) -> None:
    # given a model that answers 500 every time, and more retries than the deadline leaves room for
    settings.LLM_CALL_DEADLINE = 3.0
    settings.LLM_MAX_RETRIES = 20
    fake_llm.fail_always(500)
    # when
    error, took = timed(ask_model)
    # then it gave up within the deadline, as a failure of the model (it answered), not as a timeout
    assert isinstance(error, TransientError) and not isinstance(error, DeadlineExceeded), error
    assert took < BOUND
    assert 1 <= fake_llm.count("numbers") < 21


# --- search -----------------------------------------------------------------------------------------------------


def test_hung_search_engine_ends_the_search_by_its_deadline(fakes, fake_searx: FakeSearx, settings) -> None:
    settings.SEARCH_DEADLINE = 2.0
    settings.SEARCH_MAX_RETRIES = 10
    fake_searx.delay = HANG
    error, took = timed(lambda: searxng.search("hung"))
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND


def test_search_engine_that_trickles_ends_the_search_by_its_deadline(fakes, trickle: Trickle, settings) -> None:
    settings.SEARXNG_URL = trickle.url
    settings.SEARCH_DEADLINE = 2.0
    error, took = timed(lambda: searxng.search("trickle"))
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND


# --- DNS --------------------------------------------------------------------------------------------------------


@pytest.fixture
def hung_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A resolver that never answers for `hung.example` (for the length of the test); yields the names asked."""
    real = socket.getaddrinfo
    release = threading.Event()
    asked: list[str] = []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "hung.example":
            asked.append(host)
            release.wait(HANG)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(netguard.socket, "getaddrinfo", getaddrinfo)
    yield asked
    release.set()


def test_hung_dns_lookup_ends_the_fetch_within_its_connect_timeout(hung_dns: list[str]) -> None:
    # given a fetch whose deadline is long but whose connect timeout, which the lookup gets, is short
    # when
    error, took = timed(lambda: fetch_page("http://hung.example/page", deadline=HANG, connect_timeout=1.0))
    # then
    assert isinstance(error, FetchError) and error.reason == "timeout", error
    assert "DNS lookup of hung.example" in error.message
    assert took < BOUND
    assert hung_dns == ["hung.example"]


@pytest.mark.django_db(transaction=True)
def test_hung_dns_lookup_ends_its_step_in_bounded_time(hung_dns: list[str], user, published, settings) -> None:
    # given a website on a host whose name never resolves, and a scrape deadline of 2 s
    settings.SCRAPE_DEADLINE = 2.0
    research = running_research(user, breadth=1, depth=1)
    query = SerpQuery.objects.create(
        research=research,
        depth=1,
        position=0,
        query="q",
        objective="o",
        status=QueryStatus.SCRAPING,
        pending_websites=1,
    )
    website = Website.objects.create(research=research, query=query, position=0, url="http://hung.example/page")
    # when the scrape step runs
    error, took = timed(lambda: scrape_website(website.pk))
    # then it ended in bounded time with the page failed as a timeout, and the query went on
    assert error is None, error
    assert took < BOUND
    website.refresh_from_db()
    assert (website.status, website.failure_reason) == (WebsiteStatus.FAILED, "timeout")
    assert SerpQuery.objects.get(pk=query.pk).status == QueryStatus.DONE
