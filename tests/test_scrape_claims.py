"""A fetch's claim of its page: a page it inserts is leased by the insert itself (no statement of its own), and a
page inserted for a website that could not be claimed is left unleased, for the next website of its URL."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from research.models import Page, QueryStatus, Research, SerpQuery, Website, WebsiteStatus
from tests.support.factories import running_research
from workers.pipeline.locks import claim_owner
from workers.pipeline.scrape import Waiting, _claim_page

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


def website(research: Research, status: str) -> Website:
    query = SerpQuery.objects.create(
        research=research, depth=1, position=0, query="q", objective="o", status=QueryStatus.SCRAPING
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
