"""A website's analysis is stored by one statement that commits as it ends: the website analysed, its extracts and
event, its query counted down and, for the last of the query's websites, handed to its review; nothing where the
website was stored already or the research ended; through the tree transaction where a quote was dropped."""

import threading
from types import SimpleNamespace

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from research.control.dispatch import QUEUED
from research.models import (
    Event,
    EventType,
    Extract,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.support.factories import running_research
from workers.agents.website_analyzer import Finding
from workers.pipeline.analyze import Claimed, analyze_claimed

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCE = "Heat pumps kept working at minus twenty degrees in the Nordic field trial."
KEPT = Finding(fact="They work in the cold.", quote=SENTENCE)
DROPPED = Finding(fact="They are cheap.", quote="A sentence the page does not have.")


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


@pytest.fixture
def findings(monkeypatch) -> list[Finding]:
    """What the (patched) analysis engine answers for every page."""
    answer = [KEPT]
    engine = SimpleNamespace(analyze=lambda objective, query, url, title, text: list(answer))
    monkeypatch.setattr("workers.pipeline.analyze.engine_for", lambda name: engine)
    return answer


def analysing_query(research: Research, websites: int) -> tuple[SerpQuery, list[Website]]:
    """A query scraping `websites` websites, each analysing its own fetched page."""
    query = SerpQuery.objects.create(
        research=research,
        depth=1,
        position=0,
        query="q",
        objective="o",
        status=QueryStatus.SCRAPING,
        pending_websites=websites,
        claimed_by="searcher",
    )
    sites = []
    for n in range(websites):
        url = f"https://x.example/{n}"
        page = Page.objects.create(research=research, url=url, status=PageStatus.FETCHED, text=SENTENCE)
        sites.append(
            Website.objects.create(
                research=research, query=query, page=page, position=n, url=url, status=WebsiteStatus.ANALYZING
            )
        )
    return query, sites


def claimed(site: Website) -> Claimed:
    """The website's analysis as its claim hands it on: leased to the analysis, whose store is fenced on it."""
    Website.objects.filter(pk=site.pk).update(claimed_by="analyst host:1:thread")
    return Claimed(
        site.research_id, site.pk, site.query_id, site.url, "", "o", "q", "llm", None, SENTENCE, "analyst host:1:thread"
    )


def test_an_analysis_is_stored_by_one_statement_in_no_transaction_of_its_own(running, findings, published) -> None:
    query, (site, _) = analysing_query(running, 2)
    analysis = claimed(site)
    with CaptureQueriesContext(connection) as queries:
        analyze_claimed(analysis)
    # one round trip: no BEGIN, no COMMIT, no read of the research row before or after
    assert len(queries.captured_queries) == 1 and not connection.in_atomic_block
    site.refresh_from_db()
    assert site.status == WebsiteStatus.ANALYZED and site.finished_at is not None
    assert list(Extract.objects.filter(website=site).values_list("position", "fact", "quote")) == [
        (0, KEPT.fact, KEPT.quote)
    ]
    (event,) = Event.objects.filter(research=running)
    assert (event.type, event.data) == (
        EventType.ANALYZED,
        {"website_id": site.pk, "url": site.url, "facts": 1, "quotes_dropped": 0},
    )
    # the query waits for its other website
    query.refresh_from_db()
    assert (query.pending_websites, query.status, query.claimed_by) == (1, QueryStatus.SCRAPING, "searcher")
    assert published.count("workers.tasks.review_query_task") == 0


def test_the_last_website_of_a_query_hands_it_to_its_review(running, findings, published) -> None:
    query, sites = analysing_query(running, 2)
    SerpQuery.objects.filter(pk=query.pk).update(attempts=2)
    for site in sites:
        analyze_claimed(claimed(site))
    query.refresh_from_db()
    assert (query.pending_websites, query.status, query.claimed_by, query.attempts) == (
        0,
        QueryStatus.REVIEWING,
        QUEUED,
        0,
    )
    assert published.count("workers.tasks.review_query_task") == 1


def test_websites_of_one_query_stored_at_once_hand_it_on_once(running, findings, published) -> None:
    query, sites = analysing_query(running, 7)
    start, errors = threading.Barrier(len(sites)), []

    def store(site: Website) -> None:
        try:
            start.wait(5)
            analyze_claimed(claimed(site))
        except (DatabaseError, threading.BrokenBarrierError) as exc:  # a deadlock, a lock timeout
            errors.append(exc)
        finally:
            connection.close()  # this thread's own

    threads = [threading.Thread(target=store, args=(site,)) for site in sites]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    query.refresh_from_db()
    assert (query.pending_websites, query.status) == (0, QueryStatus.REVIEWING)
    assert published.count("workers.tasks.review_query_task") == 1
    assert set(Website.objects.filter(query=query).values_list("status", flat=True)) == {WebsiteStatus.ANALYZED}
    assert Extract.objects.filter(research=running).count() == 7
    assert Event.objects.filter(research=running, type=EventType.ANALYZED).count() == 7


def test_a_second_store_of_one_analysis_writes_nothing(running, findings, published) -> None:
    query, (site, _) = analysing_query(running, 2)
    analyze_claimed(claimed(site))
    analyze_claimed(claimed(site))  # a duplicate delivery that reached its end too
    assert Extract.objects.filter(website=site).count() == 1
    assert Event.objects.filter(research=running).count() == 1
    assert SerpQuery.objects.get(pk=query.pk).pending_websites == 1


@pytest.mark.parametrize(
    "ended", [{"status": ResearchStatus.CANCELLED}, {"stop_reason": "budget_tokens"}], ids=["cancelled", "stopped"]
)
def test_a_store_in_a_research_that_ended_writes_nothing(running, findings, published, ended) -> None:
    query, (site,) = analysing_query(running, 1)
    Research.objects.filter(pk=running.pk).update(**ended)
    analyze_claimed(claimed(site))
    site.refresh_from_db()
    assert site.status == WebsiteStatus.ANALYZING
    assert not Extract.objects.filter(research=running).exists() and not Event.objects.filter(research=running).exists()
    query.refresh_from_db()
    assert (query.pending_websites, query.status) == (1, QueryStatus.SCRAPING)
    assert published.count("workers.tasks.review_query_task") == 0


def test_a_dropped_quote_is_counted_on_the_research_through_the_tree_transaction(running, findings, published) -> None:
    findings.append(DROPPED)
    query, (site,) = analysing_query(running, 1)
    analyze_claimed(claimed(site))
    running.refresh_from_db()
    assert running.quotes_dropped == 1
    assert Extract.objects.filter(website=site).count() == 1
    (event,) = Event.objects.filter(research=running)
    assert event.data == {"website_id": site.pk, "url": site.url, "facts": 1, "quotes_dropped": 1}
    query.refresh_from_db()
    assert (query.pending_websites, query.status) == (0, QueryStatus.REVIEWING)
    assert published.count("workers.tasks.review_query_task") == 1
