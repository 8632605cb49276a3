"""The scrape step analyses its own website in the same task once the page is stored: no analysis message for it,
one for each other website waiting on the page; a run again after the store (a retry, a redelivery) analyses the
website without fetching again; and a step that gives up fails the website for what it was doing."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from devtools.fakes import FakeLLM, FakeWeb
from devtools.fakes.behaviours import ResearchModel
from research.control.dispatch import QUEUED
from research.models import (
    Event,
    EventType,
    Extract,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.support.factories import running_research, spend
from workers.errors import ResearchStopped
from workers.pipeline import scrape
from workers.pipeline.scrape import fetch_and_analyze, fetch_or_analysis_failed

pytestmark = pytest.mark.django_db(transaction=True)


def website(research: Research, url: str, position: int = 0, **fields: object) -> Website:
    query = SerpQuery.objects.create(
        research=research, depth=1, position=position, query=f"q{position}", objective="o", status=QueryStatus.SCRAPING
    )
    return Website.objects.create(research=research, query=query, position=0, url=url, **fields)


def test_the_scrape_step_analyses_its_own_website_and_queues_the_others_waiting_on_the_page(
    user, fakes, fake_web: FakeWeb, fake_llm: FakeLLM, published
) -> None:
    # given a website to fetch, and another website of the research waiting on the same page
    ResearchModel(fake_llm, facts_per_page=2).install()
    research = running_research(user, breadth=2, depth=1)
    url = fake_web.page_url("heat-pumps")
    page = Page.objects.create(research=research, url=url, status=PageStatus.FETCHING)
    fetching = website(research, url)
    waiting = website(research, url, position=1, status=WebsiteStatus.SCRAPING, page=page)
    # when the scrape step runs for the first
    with CaptureQueriesContext(connection) as queries:
        fetch_and_analyze(fetching.pk, task_id="task-1")
    # then it fetched the page once and analysed its own website itself, leased to it by the page's store: no read
    # and claim of the analysis step's own
    assert fake_web.count("/page/heat-pumps") == 1
    statements = [query["sql"] for query in queries.captured_queries]
    assert sum("FROM research_website w JOIN" in sql for sql in statements) == 1
    assert not [sql for sql in statements if "RETURNING (SELECT text" in sql]
    started = Event.objects.filter(research=research, type=EventType.ANALYZING).values_list("data", flat=True)
    assert [data["website_id"] for data in started] == [fetching.pk]
    assert Website.objects.get(pk=fetching.pk).status == WebsiteStatus.ANALYZED
    assert Extract.objects.filter(website=fetching).count() == 2
    assert fake_llm.count("website_analysis") == 1
    # and queued one analysis: the other website's, handed on for a worker to take up
    assert published == ["workers.tasks.analyze_website_task"]
    other = Website.objects.get(pk=waiting.pk)
    assert (other.status, other.claimed_by) == (WebsiteStatus.ANALYZING, QUEUED)


def test_a_scrape_step_run_again_after_its_page_was_stored_analyses_without_fetching(
    user, fakes, fake_web: FakeWeb, fake_llm: FakeLLM, published
) -> None:
    # given a scrape step that stored its page and handed its website on, then lost its worker before analysing
    ResearchModel(fake_llm, facts_per_page=1).install()
    research = running_research(user, breadth=2, depth=1)
    url = fake_web.page_url("storage")
    page = Page.objects.create(
        research=research, url=url, status=PageStatus.FETCHED, text=fake_web.page_html("storage"), title="Storage"
    )
    site = website(research, url, status=WebsiteStatus.ANALYZING, page=page, claimed_by=QUEUED)
    # when the step runs again (Celery's retry, or Redis delivering its message again)
    fetch_and_analyze(site.pk, task_id="task-1")
    # then the website is analysed, with no fetch and nothing queued
    assert Website.objects.get(pk=site.pk).status == WebsiteStatus.ANALYZED
    assert fake_web.count() == 0
    assert published == []


def test_a_scrape_step_that_gives_up_fails_its_website_for_what_it_was_doing(user, fakes, published) -> None:
    # given one website still to fetch and one whose page was stored and whose analysis was under way
    research = running_research(user, breadth=2, depth=1)
    page = Page.objects.create(research=research, url="https://b.example/", status=PageStatus.FETCHED, text="t")
    fetching = website(research, "https://a.example/")
    analysing = website(research, page.url, position=1, status=WebsiteStatus.ANALYZING, page=page)
    # when the step's retries run out for each
    fetch_or_analysis_failed(fetching.pk, RuntimeError("no route"))
    fetch_or_analysis_failed(analysing.pk, RuntimeError("model down"))
    # then each failed, the first as a scrape, the second as an analysis
    failed = dict(Website.objects.filter(research=research).values_list("pk", "failure_reason"))
    assert failed == {fetching.pk: "scrape_error", analysing.pk: "analysis_failed"}
    assert set(Website.objects.filter(research=research).values_list("status", flat=True)) == {WebsiteStatus.FAILED}


def test_the_analysis_is_admitted_on_the_state_the_page_store_read_with_no_budget_read_of_its_own(
    user, fakes, fake_web: FakeWeb, fake_llm: FakeLLM, published, monkeypatch
) -> None:
    # given a research with a token budget, and other steps that spend past it while this step fetches its page
    ResearchModel(fake_llm, facts_per_page=1).install()
    research = running_research(user, breadth=2, depth=1)
    Research.objects.filter(pk=research.pk).update(budget_tokens=1000)
    site = website(research, fake_web.page_url("heat-pumps"))
    fetch = scrape._fetch

    def fetch_while_others_spend(url: str) -> object:
        fetched = fetch(url)
        spend(research, 2000)
        return fetched

    monkeypatch.setattr(scrape, "_fetch", fetch_while_others_spend)
    # when the scrape step stores the page and takes up its analysis
    with CaptureQueriesContext(connection) as queries, pytest.raises(ResearchStopped):
        fetch_and_analyze(site.pk, task_id="task-1")
    # then the budget reached during the fetch stopped the research before the analysis's model request (the task
    # ends with nothing more to do), on the state the store's statement returned: no read of the budget's own
    statements = [query["sql"] for query in queries.captured_queries]
    assert not [sql for sql in statements if sql.startswith("SELECT research.status")]
    assert fake_llm.count("website_analysis") == 0
    assert Research.objects.get(pk=research.pk).stop_reason == "budget_tokens"
