"""Every step is bounded in time: model calls, searches and DNS lookups end by their deadlines, SQL statements and
lock waits by PostgreSQL's timeouts, and the follow-up questions request by QUESTIONS_WAIT_SECONDS.

Bounds are asserted loosely (a hang of 60 s against a deadline of 2 s must end well under 30 s), never tightly.
The hung and trickling servers are this module's own, stopped with it: a handler of the session's FakeLLM left
asleep for a minute would wake in a later test and take that test's queued faults.
"""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import OperationalError, connection, connections
from django.db.models.signals import pre_migrate

from devtools.fakes import FakeLLM
from devtools.fakes.server import FakeServer, Request
from research.control import lifecycle, services
from research.models import Event, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from researchsite.celery import app as celery_app
from tests.support.factories import running_research
from workers import tasks
from workers.clients import llm, netguard, searxng
from workers.clients.fetch import FetchError, fetch_page
from workers.errors import DeadlineExceeded, TransientError
from workers.pipeline import lifecycle as pipeline_lifecycle
from workers.pipeline.followups import generate_followups
from workers.pipeline.scrape import scrape_website

HANG = 60.0  # how long a hung peer stays silent: far past every deadline below
BOUND = 30.0  # what "ended in bounded time" means here, against deadlines of about 2 s
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


class Silent(FakeServer):
    """Takes every request and answers nothing for a minute (or until the module's tests are over)."""

    def handle(self, request: Request) -> None:
        self.sleep(HANG)
        request.close_connection = True


def _completions(server: FakeServer) -> int:
    """Chat completions the server was asked for: the model calls."""
    return sum(1 for request in server.requests if request.path.endswith("/chat/completions"))


@pytest.fixture(scope="module")
def silent() -> Iterator[Silent]:
    with Silent() as server:
        yield server


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


def test_hung_model_server_ends_the_call_by_its_deadline(silent: Silent, settings) -> None:
    # given a model server that accepts the request and then says nothing for a minute, and retries to spare
    settings.OPENAI_BASE_URL = silent.url + "/v1"
    settings.LLM_CALL_DEADLINE = 2.0
    settings.LLM_MAX_RETRIES = 10
    # when
    error, took = timed(ask_model)
    # then the call ended, as a timeout, long before the server would have answered
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND
    assert silent.requests, "the call never reached the silent server"


def test_model_server_that_trickles_ends_the_call_by_its_deadline(trickle: Trickle, settings) -> None:
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


def test_hung_search_engine_ends_the_search_by_its_deadline(silent: Silent, settings) -> None:
    settings.SEARXNG_URL = silent.url
    settings.SEARCH_DEADLINE = 2.0
    settings.SEARCH_MAX_RETRIES = 10
    error, took = timed(lambda: searxng.search("hung"))
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND


def test_search_engine_that_trickles_ends_the_search_by_its_deadline(trickle: Trickle, settings) -> None:
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
    # the query's last website settled: it goes on to its review
    assert SerpQuery.objects.get(pk=query.pk).status == QueryStatus.REVIEWING


# --- database ---------------------------------------------------------------------------------------------------


def server_setting(name: str, using: Any = connection) -> int:
    """A PostgreSQL setting of this connection, in its base unit (milliseconds for timeouts)."""
    with using.cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = %s", [name])
        return int(cursor.fetchone()[0])


@pytest.mark.django_db
def test_database_connections_carry_the_statement_and_lock_timeouts(settings) -> None:
    assert settings.DB_STATEMENT_TIMEOUT > settings.DB_LOCK_TIMEOUT > 0
    assert server_setting("statement_timeout") == settings.DB_STATEMENT_TIMEOUT * 1000
    assert server_setting("lock_timeout") == settings.DB_LOCK_TIMEOUT * 1000
    # a session left idle in a transaction (its host cut off) is ended by the server, and its row locks with it
    assert server_setting("idle_in_transaction_session_timeout") == settings.DB_IDLE_IN_TRANSACTION_TIMEOUT * 1000 > 0


@pytest.mark.django_db
def test_migrations_run_without_the_statement_timeout(settings) -> None:
    # given a look at the connection's statement timeout while migrate runs (after the research app's own hook)
    research_app = apps.get_app_config("research")
    seen: list[int] = []

    def look(using: str, **kwargs: Any) -> None:
        seen.append(server_setting("statement_timeout", connections[using]))

    pre_migrate.connect(look, sender=research_app)
    try:
        call_command("migrate", verbosity=0)
    finally:
        pre_migrate.disconnect(look, sender=research_app)
    # then migrations ran with none, and the connection has its own back afterwards
    assert seen == [0]
    assert server_setting("statement_timeout") == settings.DB_STATEMENT_TIMEOUT * 1000


@pytest.fixture
def short_db_timeouts() -> Iterator[None]:
    """This test's connection with the timeouts of a deployment that set them to 2 s and 1 s."""
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '2s'")
        cursor.execute("SET lock_timeout = '1s'")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")
            cursor.execute("RESET lock_timeout")


@contextmanager
def locked_elsewhere(research: Research) -> Iterator[None]:
    """The research's row locked by another connection, as a stuck transaction holds it, for the block."""
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {Research._meta.db_table} WHERE id = %s FOR UPDATE", [research.pk])
        yield
    finally:
        other.rollback()
        other.close()


def queued_research(owner: Any) -> Research:
    return Research.objects.create(owner=owner, prompt="p", title="t", status=ResearchStatus.QUEUED, breadth=1, depth=1)


@pytest.mark.django_db(transaction=True)
def test_long_locked_row_ends_its_step_in_bounded_time(user, published, short_db_timeouts) -> None:
    # given a queued research whose row another transaction holds for far longer than the lock timeout
    research = queued_research(user)
    with locked_elsewhere(research):
        # when the start step and a cancel (the service behind the API) try to take the row
        start_error, start_took = timed(lambda: pipeline_lifecycle.start_research(str(research.pk)))
        cancel_error, cancel_took = timed(lambda: lifecycle.cancel_research(research.pk))
    # then both ended with an OperationalError in bounded time, an error the tasks retry as an infrastructure one
    assert isinstance(start_error, OperationalError), start_error
    assert isinstance(cancel_error, OperationalError), cancel_error
    assert start_took < BOUND and cancel_took < BOUND
    assert isinstance(start_error, tasks.INFRASTRUCTURE_ERRORS)
    assert OperationalError in tasks.ResearchTask.autoretry_for
    assert Research.objects.get(pk=research.pk).status == ResearchStatus.QUEUED
    assert published == []


@pytest.mark.django_db(transaction=True)
def test_lock_timeout_is_transient_the_step_runs_once_the_row_is_free(user, published, short_db_timeouts) -> None:
    # given a queued research whose start failed on a row locked elsewhere
    research = queued_research(user)
    with locked_elsewhere(research), pytest.raises(OperationalError):
        pipeline_lifecycle.start_research(str(research.pk))
    # when the step runs again with the row free (as Celery's retry or the sweeper runs it)
    pipeline_lifecycle.start_research(str(research.pk))
    # then it does its work
    assert Research.objects.get(pk=research.pk).status == ResearchStatus.RUNNING
    assert published == ["workers.tasks.plan_queries_task"]


@pytest.mark.django_db(transaction=True)
def test_long_statement_ends_by_the_statement_timeout(short_db_timeouts) -> None:
    def sleep_in_sql() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [HANG])

    error, took = timed(sleep_in_sql)
    assert isinstance(error, OperationalError), error
    assert took < BOUND


def test_no_task_time_limits_that_the_threads_pool_would_ignore() -> None:
    assert celery_app.conf.task_time_limit is None
    assert celery_app.conf.task_soft_time_limit is None


# --- the follow-up questions request ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_questions_request_ends_by_its_wait_and_calls_no_model(api, silent: Silent, published, settings) -> None:
    # given a model that says nothing for a minute (were the request to call it), and a wait of 2 s
    settings.OPENAI_BASE_URL = silent.url + "/v1"
    settings.QUESTIONS_WAIT_SECONDS = 2.0
    # (model calls only: an earlier test's call may still be asking the silent server for the model's context
    # window in the background, one endpoint after another, which is no call of this request)
    asked_before = _completions(silent)
    # when
    started = time.monotonic()
    response = api.post(
        "/api/research/questions",
        data=json.dumps({"prompt": "How do heat pumps perform in cold climates?", "num_questions": 2}),
        content_type="application/json",
    )
    took = time.monotonic() - started
    # then it answers 202 once its wait is over, the step queued for a worker and the model never called from here
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "generating_followups"
    assert 2.0 <= took < BOUND
    assert published == ["workers.tasks.generate_followups_task"]
    assert _completions(silent) == asked_before
    # and the research waits for its questions: a slow model fails nothing
    research = Research.objects.get()
    assert research.status == ResearchStatus.DRAFT
    assert list(Event.objects.filter(research=research).values_list("type", flat=True)) == ["generating_followups"]


@pytest.mark.django_db
def test_followups_of_a_hung_model_end_by_the_call_deadline_and_stay_to_be_retried(
    user, silent: Silent, settings
) -> None:
    # given a draft, a model that says nothing for a minute, and a call deadline of 2 s
    settings.OPENAI_BASE_URL = silent.url + "/v1"
    settings.LLM_CALL_DEADLINE = 2.0
    research = services.create_draft(user, "How do heat pumps perform in cold climates?", 2)
    # when its step runs
    error, took = timed(lambda: generate_followups(research.pk, task_id="t1"))
    # then the call ended by its deadline as a transient error (its task retries it) and the draft still waits
    assert isinstance(error, DeadlineExceeded), error
    assert took < BOUND
    assert Research.objects.get(pk=research.pk).status == ResearchStatus.DRAFT
