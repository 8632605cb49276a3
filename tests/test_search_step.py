"""The search step: one read, one claim and one insert of its websites, whose rows hold what the ORM would store."""

from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research.models import Event, EventType, QueryStatus, Research, SerpQuery, Website, WebsiteStatus
from tests.support.factories import running_research
from workers.pipeline import search

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


def results(*urls: str, title: str = "T", snippet: str = "S") -> list[SimpleNamespace]:
    return [SimpleNamespace(url=url, title=f"{title} {k}", snippet=f"{snippet} {k}") for k, url in enumerate(urls)]


def test_a_search_stores_its_results_in_order_as_the_orm_would_and_queues_each(running, published, monkeypatch) -> None:
    # given a pending query and a search engine that finds three pages
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    urls = ["https://a.example/3", "https://a.example/1", "https://a.example/2"]
    monkeypatch.setattr("workers.pipeline.search.search_client.search", lambda text, owner_id: results(*urls))
    # when the step runs
    with CaptureQueriesContext(connection) as captured:
        search.run_query(query.pk, task_id="t1")
    # then the query waits for three websites, stored in the engine's order with the model's defaults
    query.refresh_from_db()
    assert (query.status, query.pending_websites, query.attempts) == (QueryStatus.SCRAPING, 3, 0)
    assert query.started_at is not None and query.claimed_by.startswith("t1")
    stored = list(Website.objects.filter(query=query).order_by("position"))
    assert [(w.position, w.url, w.title, w.snippet) for w in stored] == [
        (k, url, f"T {k}", f"S {k}") for k, url in enumerate(urls)
    ]
    default = Website(research=running, query=query, position=0, url="x")
    for website in stored:
        assert website.research_id == running.pk and website.created_at is not None
        for name in ("status", "failure_reason", "error", "http_status", "content_type", "attempts", "page_id"):
            assert getattr(website, name) == getattr(default, name), name
        assert (website.claimed_at, website.claimed_by, website.finished_at) == (None, "", None)
    # and the event names them in that order, and each is queued for its scrape
    event = Event.objects.get(research=running, type=EventType.GOT_WEBSITES)
    assert event.data == {"query_id": query.pk, "query": "q", "urls": urls}
    assert published == ["workers.tasks.scrape_website_task"] * 3
    # in nine statements: the read (its research joined), the claim, the tree transaction's fence and writes
    assert len(captured.captured_queries) <= 9


def test_a_search_that_finds_nothing_fails_its_query(running, published, monkeypatch) -> None:
    query = SerpQuery.objects.create(research=running, depth=2, position=0, query="q", objective="o")
    monkeypatch.setattr("workers.pipeline.search.search_client.search", lambda text, owner_id: [])
    search.run_query(query.pk)
    query.refresh_from_db()
    assert query.status == QueryStatus.FAILED and "found nothing" in query.error
    assert not Website.objects.filter(query=query).exists()


def test_a_search_of_a_query_not_pending_or_of_a_stopped_research_does_nothing(running, monkeypatch) -> None:
    searched: list[str] = []
    monkeypatch.setattr("workers.pipeline.search.search_client.search", lambda text, _: searched.append(text) or [])
    done = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.DONE
    )
    search.run_query(done.pk)
    pending = SerpQuery.objects.create(research=running, depth=1, position=1, query="r", objective="o")
    Research.objects.filter(pk=running.pk).update(stop_reason="cancelled")
    search.run_query(pending.pk)
    search.run_query(10**9)  # no such query
    assert searched == []
    assert SerpQuery.objects.get(pk=pending.pk).status == QueryStatus.PENDING


def test_a_searching_query_leased_to_another_task_is_not_claimed(running, monkeypatch) -> None:
    searched: list[str] = []
    monkeypatch.setattr("workers.pipeline.search.search_client.search", lambda text, _: searched.append(text) or [])
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    assert search._claim(query.pk, "other-task ", "other-task host:1:a", None)
    assert not search._claim(query.pk, "this-task ", "this-task host:1:a", None)
    # its own task may take it up again (a retry under the same id, on another thread), keeping when it started
    started = SerpQuery.objects.get(pk=query.pk).started_at
    assert search._claim(query.pk, "other-task ", "other-task host:1:b", started)
    assert SerpQuery.objects.get(pk=query.pk).started_at == started
    assert searched == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
        min_size=1,
        max_size=5,
    )
)
def test_any_title_and_snippet_are_stored_as_the_engine_gave_them(running, texts) -> None:
    # the results' text reaches the database unchanged through the step's JSON, whatever characters it holds
    query = SerpQuery.objects.create(
        research=running, depth=1, position=SerpQuery.objects.count(), query="q", objective="o"
    )
    found = [
        SimpleNamespace(url=f"https://h.example/{k}", title=text, snippet=text[::-1]) for k, text in enumerate(texts)
    ]
    stored = search._insert_websites(search.Searching(query.pk, running.pk, "q", 0, 1, running.owner_id), 4, found)
    rows = Website.objects.filter(query=query).order_by("position").values_list("id", "position", "title", "snippet")
    assert [(pk, position) for pk, position, _, _ in rows] == [(pk, 4 + k) for k, (pk, _) in enumerate(stored)]
    assert [(title, snippet) for _, _, title, snippet in rows] == [(text, text[::-1]) for text in texts]
    assert all(website.status == WebsiteStatus.PENDING for website in Website.objects.filter(query=query))
