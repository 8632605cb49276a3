"""A fetch's claim of its page: a page it inserts is leased by the insert itself (no statement of its own), a new
URL's claim is one statement, and a page inserted for a website that could not be claimed is left unleased, for
the next website of its URL."""

import threading

import psycopg
import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from research.models import (
    Event,
    EventType,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.support.databases import database_dsn
from tests.support.factories import running_research
from workers.errors import ResearchStopped
from workers.pipeline.locks import claim_owner
from workers.pipeline.scrape import Waiting, _claim_new_page, _claim_page

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


def website(research: Research, status: str, position: int = 0) -> Website:
    query = SerpQuery.objects.create(
        research=research, depth=1, position=position, query="q", objective="o", status=QueryStatus.SCRAPING
    )
    return Website.objects.create(research=research, query=query, position=0, url="https://x.example/", status=status)


def test_a_page_the_fetch_inserts_is_leased_by_its_insert(running) -> None:
    site = website(running, WebsiteStatus.PENDING)
    with CaptureQueriesContext(connection) as queries:
        page = _claim_page(running.pk, Waiting(site.pk, site.url, site.query_id), claim_owner("task-1"))
    assert page is not None
    stored = Page.objects.get(pk=page.pk)
    assert stored.claimed_at is not None and stored.claimed_at == page.claimed_at
    assert stored.claimed_by.startswith(claim_owner("task-1")) and stored.claimed_by == page.claimed_by
    assert not [q for q in queries.captured_queries if q["sql"].startswith('UPDATE "research_page"')]


def test_a_page_inserted_for_a_website_that_cannot_be_claimed_is_left_unleased(running) -> None:
    # given a website cancelled before its fetch started
    site = website(running, WebsiteStatus.CANCELLED)
    # when its (late) fetch claims its page
    assert _claim_page(running.pk, Waiting(site.pk, site.url, site.query_id), claim_owner("task-1")) is None
    # then the page it inserted holds no lease: the next website of the URL fetches it at once
    page = Page.objects.get(research=running, url=site.url)
    assert page.claimed_at is None and page.claimed_by == ""


def test_a_new_urls_claim_is_one_statement_that_leases_links_and_records(running) -> None:
    site = website(running, WebsiteStatus.PENDING)
    with CaptureQueriesContext(connection) as queries:
        page = _claim_page(running.pk, Waiting(site.pk, site.url, site.query_id), claim_owner("task-1"))
    # one round trip, in no transaction of its own: no BEGIN, no COMMIT
    assert len(queries.captured_queries) == 1 and not connection.in_atomic_block
    assert page is not None and page.status == PageStatus.FETCHING
    stored = Page.objects.get(pk=page.pk)
    assert (stored.research_id, stored.url, stored.status) == (running.pk, site.url, PageStatus.FETCHING)
    assert stored.claimed_by == page.claimed_by and stored.claimed_by.startswith(claim_owner("task-1"))
    site.refresh_from_db()
    assert (site.status, site.page_id) == (WebsiteStatus.SCRAPING, page.pk) and site.claimed_at is not None
    (event,) = Event.objects.filter(research=running)
    assert (event.type, event.data) == (EventType.SCRAPING, {"website_id": site.pk, "url": site.url})


def test_the_second_website_of_a_url_waits_on_the_first_ones_fetch(running) -> None:
    first, second = website(running, WebsiteStatus.PENDING), website(running, WebsiteStatus.PENDING, position=1)
    page = _claim_page(running.pk, Waiting(first.pk, first.url, first.query_id), claim_owner("task-1"))
    assert page is not None
    # the page exists, leased to the first fetch: the second website is linked to it and fetches nothing
    assert _claim_page(running.pk, Waiting(second.pk, second.url, second.query_id), claim_owner("task-2")) is None
    second.refresh_from_db()
    assert (second.status, second.page_id) == (WebsiteStatus.SCRAPING, page.pk)
    assert Page.objects.filter(research=running).count() == 1
    reused = Event.objects.get(research=running, data__website_id=second.pk)
    assert reused.data == {"website_id": second.pk, "url": second.url, "reused": True}


def test_a_claim_in_a_research_that_ended_writes_nothing(running) -> None:
    site = website(running, WebsiteStatus.PENDING)
    Research.objects.filter(pk=running.pk).update(status=ResearchStatus.CANCELLED)
    with pytest.raises(ResearchStopped):
        _claim_page(running.pk, Waiting(site.pk, site.url, site.query_id), claim_owner("task-1"))
    assert not Page.objects.filter(research=running).exists() and not Event.objects.filter(research=running).exists()
    site.refresh_from_db()
    assert (site.status, site.page_id) == (WebsiteStatus.PENDING, None)


def test_websites_of_one_url_claimed_at_once_share_one_page_and_one_fetch(running) -> None:
    sites = [website(running, WebsiteStatus.PENDING, position=n) for n in range(6)]
    start, pages, errors = threading.Barrier(len(sites)), [], []

    def claim(site: Website) -> None:
        try:
            start.wait(5)
            pages.append(_claim_page(running.pk, Waiting(site.pk, site.url, site.query_id), claim_owner(f"t{site.pk}")))
        except (DatabaseError, ResearchStopped, threading.BrokenBarrierError) as exc:  # a deadlock, a lock timeout
            errors.append(exc)
        finally:
            connection.close()  # this thread's own

    threads = [threading.Thread(target=claim, args=(site,)) for site in sites]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    fetchers = [page for page in pages if page is not None]
    (page,) = Page.objects.filter(research=running)
    assert len(fetchers) == 1 and fetchers[0].pk == page.pk
    assert set(Website.objects.filter(research=running).values_list("status", "page_id")) == {
        (WebsiteStatus.SCRAPING, page.pk)
    }
    assert Event.objects.filter(research=running, type=EventType.SCRAPING).count() == len(sites)


def test_a_duplicate_claim_of_a_linked_website_never_waits_on_its_page_while_holding_the_website(running) -> None:
    # given a website already linked to its page (its first delivery claimed it), and that page being stored by
    # another transaction (the fetch's store updates the page, then locks the page's websites)
    site = website(running, WebsiteStatus.PENDING)
    first = _claim_page(running.pk, Waiting(site.pk, site.url, site.query_id), claim_owner("task-1"))
    assert first is not None
    with psycopg.connect(**database_dsn()) as store:
        store.execute("UPDATE research_page SET title = 'stored' WHERE id = %s", [first.pk])
        # when a duplicate delivery of the same website's fetch claims again, with waits for a lock cut short
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            again = _claim_new_page(running.pk, Waiting(site.pk, site.url, site.query_id), "task-2", 0)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        store.rollback()
    # then it does nothing at once: it neither locked the website and then waited for the page (the store, next
    # locking the page's websites, would deadlock with it) nor took the website over
    assert again is None
    assert Website.objects.get(pk=site.pk).page_id == first.pk
