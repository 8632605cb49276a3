"""Two deliveries of one step: the second finds the lease held and makes no model call, search or fetch; a rerun
after the lease ran out pays for its call but stores nothing twice; the same task run again takes its work up."""

from types import SimpleNamespace

import pytest
from django.db import OperationalError

from devtools.fakes import FakeWeb
from research.control.dispatch import SWEEPER
from research.models import (
    Extract,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.support.factories import running_research
from tests.support.threads import on_another_worker
from workers.agents.query_generator import PlannedQuery
from workers.agents.website_analyzer import Finding
from workers.pipeline import scrape
from workers.pipeline.analyze import analyze_website
from workers.pipeline.fencing import LeaseLost
from workers.pipeline.plan import plan_queries
from workers.pipeline.scrape import scrape_website
from workers.pipeline.search import run_query

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCE = "Heat pumps kept working at minus twenty degrees in the Nordic field trial."


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


def ready_website(research: Research) -> Website:
    query = SerpQuery.objects.create(
        research=research,
        depth=1,
        position=0,
        query="q",
        objective="o",
        status=QueryStatus.SCRAPING,
        pending_websites=1,
    )
    page = Page.objects.create(research=research, url="https://x.example/", status=PageStatus.FETCHED, text=SENTENCE)
    SerpQuery.objects.filter(pk=query.pk).update(pending_websites=1)
    return Website.objects.create(
        research=research, query=query, page=page, position=0, url=page.url, status=WebsiteStatus.ANALYZING
    )


def test_analysis_run_again_after_its_lease_ran_out_stores_one_result(running, published, monkeypatch) -> None:
    # given a website ready for analysis, and a model call (10 + 5 tokens) so slow that its lease runs out and the
    # sweeper hands the website to a second delivery, which runs to the end meanwhile
    website = ready_website(running)
    calls: list[str] = []

    def analyze(objective: str, query: str, url: str, title: str, text: str) -> list[Finding]:
        calls.append(url)
        if len(calls) == 1:
            Website.objects.filter(pk=website.pk).update(claimed_by=SWEEPER)
            on_another_worker(analyze_website, website.pk)
        return [Finding(fact="They work in the cold.", quote=SENTENCE)]

    monkeypatch.setattr("workers.pipeline.analyze.engine_for", lambda name: SimpleNamespace(analyze=analyze))
    # when the first comes back, its store finds its lease taken over (its task ends on that)
    with pytest.raises(LeaseLost):
        analyze_website(website.pk)
    # then both paid for a model call, and one result was stored
    assert len(calls) == 2
    assert Extract.objects.filter(website=website).count() == 1


def test_second_delivery_during_an_analysis_does_nothing(running, published, monkeypatch) -> None:
    # given an analysis under way, and the same task delivered again (another worker) during its model call
    website = ready_website(running)
    calls: list[str] = []

    def analyze(objective: str, query: str, url: str, title: str, text: str) -> list[Finding]:
        calls.append(url)
        if len(calls) == 1:
            analyze_website(website.pk, task_id="another-delivery")
        return [Finding(fact="They work in the cold.", quote=SENTENCE)]

    monkeypatch.setattr("workers.pipeline.analyze.engine_for", lambda name: SimpleNamespace(analyze=analyze))
    # when
    analyze_website(website.pk, task_id="first-delivery")
    # then the second one made no model call; a retry of the first (same task id) may take it up again
    assert len(calls) == 1
    assert Extract.objects.filter(website=website).count() == 1


def test_second_delivery_during_a_search_does_nothing(running, published, monkeypatch) -> None:
    # given a search under way, and the same task delivered again during the search engine's answer
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    searches: list[str] = []

    def search(text: str, owner_id: int) -> list[SimpleNamespace]:
        searches.append(text)
        if len(searches) == 1:
            run_query(query.pk, task_id="another-delivery")
            run_query(query.pk, task_id=None)
        return [SimpleNamespace(url="https://x.example/", title="X", snippet="")]

    monkeypatch.setattr("workers.pipeline.search.search_client.search", search)
    # when
    run_query(query.pk, task_id="first-delivery")
    # then one search, one website, one scrape queued
    assert searches == ["q"]
    assert Website.objects.filter(query=query).count() == 1
    assert published == ["workers.tasks.scrape_website_task"]


def test_a_scrape_run_again_by_its_own_task_fetches_the_page_it_claimed(
    running, fakes, fake_web: FakeWeb, monkeypatch
) -> None:
    # given a website waiting for its page, and a page store that fails once on a lost database connection (the
    # task runs again at once on a fresh one, or Celery retries it under the same task id)
    url = fake_web.add_page("/cold-trial.html", f"<html><body><article><p>{SENTENCE}</p></article></body></html>")
    query = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.SCRAPING
    )
    website = Website.objects.create(research=running, query=query, position=0, url=url)
    store, failed = scrape._store_page, []

    def store_once(*args: object) -> scrape.Stored:
        if not failed:
            failed.append(True)
            raise OperationalError("server closed the connection unexpectedly")
        return store(*args)

    handed_on: list[list[int]] = []
    monkeypatch.setattr(scrape, "_store_page", store_once)
    monkeypatch.setattr(
        "research.control.dispatch.publish_batch", lambda name, ids, priority=None: handed_on.append(ids)
    )
    with pytest.raises(OperationalError):
        scrape_website(website.pk, task_id="first-delivery")
    # when another delivery comes meanwhile, and then the first task runs again
    scrape_website(website.pk, task_id="another-delivery")
    fetched_by_then = fake_web.count("/cold-trial.html")
    scrape_website(website.pk, task_id="first-delivery")
    # then the other delivery left the page to its fetcher, and the run again fetched and stored it, and moved the
    # website on to analysis, without waiting for the page's lease to lapse
    assert fetched_by_then == 1
    assert fake_web.count("/cold-trial.html") == 2
    assert Page.objects.get(research=running, url=url).status == PageStatus.FETCHED
    assert Website.objects.get(pk=website.pk).status == WebsiteStatus.ANALYZING
    assert handed_on == [[website.pk]]


def test_duplicate_planning_makes_one_model_call(running, published, monkeypatch) -> None:
    # given a research awaiting its top-level queries, and a second delivery of the planning during the model call
    calls: list[int] = []

    def plan(prompt: str, answers: list[tuple[str, str]], ancestors: list[object], count: int) -> list[PlannedQuery]:
        calls.append(count)
        if len(calls) == 1:
            plan_queries(str(running.pk), None)
        return [PlannedQuery(query=f"q{i}", objective="o") for i in range(count)]

    monkeypatch.setattr("workers.pipeline.plan.engine_for", lambda name: SimpleNamespace(plan_queries=plan))
    # when
    plan_queries(str(running.pk), None)
    # then the second delivery found the planning's lease held and made no model call at all
    assert calls == [2]
    assert SerpQuery.objects.filter(research=running).count() == 2
    assert published == ["workers.tasks.run_query_task"] * 2
