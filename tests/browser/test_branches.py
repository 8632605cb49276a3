"""Cancel and retry of one query from the live log, in the browser against daphne: the buttons call the API and
the live snapshot updates them."""

import time

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from research.models import Document, DocumentKind, Event, MemoryKind, QueryStatus, Research, SerpQuery, Website
from research.record.events import record_event
from tests.support.factories import running_research
from tests.support.logins import sign_in
from tests.support.seed import seed_research
from workers.pipeline.citations import report_title
from workers.pipeline.memory import NewItem, store

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def seed(user) -> tuple[Research, SerpQuery, SerpQuery]:
    research = running_research(user, 2, 1)
    research.title = "Heat pumps in Nordic winters"
    research.save()
    done = SerpQuery.objects.create(
        research=research, depth=1, position=0, query="heat pump efficiency", objective="o", status=QueryStatus.DONE
    )
    pending = SerpQuery.objects.create(
        research=research, depth=1, position=1, query="cold climate tests", objective="o", status=QueryStatus.SCRAPING
    )
    Website.objects.create(research=research, query=pending, position=0, url="https://a.example/x", status="scraping")
    # Another branch still searching (no task of it is queued), so that a cancel does not end the tree: the test
    # session's workers, when another test started them, would otherwise write this research's report.
    SerpQuery.objects.create(
        research=research, depth=1, position=2, query="field trials", objective="o", status=QueryStatus.SEARCHING
    )
    Research.objects.filter(pk=research.pk).update(pending_queries=2)
    return research, done, pending


def test_cancel_then_retry_a_query_from_the_live_log(daphne, open_page, user, no_queued_steps) -> None:
    research, done, running = seed(user)
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    card = page.locator(f"li.q[data-query-id='{running.pk}']")
    finished = page.locator(f"li.q[data-query-id='{done.pk}']")
    # an unfinished query offers Cancel, a done one neither button
    expect(card.locator(".q-cancel")).to_be_visible()
    expect(card.locator(".q-retry")).to_be_hidden()
    expect(finished.locator(".q-cancel")).to_be_hidden()
    expect(finished.locator(".q-retry")).to_be_hidden()
    # when the running query is cancelled
    card.locator(".q-cancel").click()
    # then the live log shows it cancelled, with the event, and offers Retry instead
    expect(card.locator(".badge").first).to_have_text("Cancelled")
    expect(page.locator("#events li.event[data-type=query_cancelled]")).to_have_count(1)
    expect(card.locator(".q-cancel")).to_be_hidden()
    expect(card.locator(".q-retry")).to_be_visible()
    assert SerpQuery.objects.get(pk=running.pk).status == QueryStatus.CANCELLED
    # when it is retried
    card.locator(".q-retry").click()
    # then it runs again (a worker of the test session may already be searching it) and may be cancelled again
    expect(card.locator(".badge").first).not_to_have_text("Cancelled")
    expect(page.locator("#events li.event[data-type=query_retried]")).to_have_count(1)
    expect(card.locator(".q-retry")).to_be_hidden()
    query = SerpQuery.objects.get(pk=running.pk)
    assert query.retries == 1 and query.status != QueryStatus.CANCELLED
    assert Event.objects.filter(research=research, type__in=["query_cancelled", "query_retried"]).count() == 2
    assert not watched.errors


def test_retry_after_completion_keeps_the_report_the_memory_and_both_versions(
    daphne, open_page, user, no_queued_steps
) -> None:
    # given alice's completed research with its report, its memory, and a query that failed
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    website = Website.objects.filter(research=research, status="analyzed").first()
    store(research.pk, website.query_id, [NewItem(MemoryKind.INSIGHT, "Output falls by a third.", [website.pk])], [])
    failed = SerpQuery.objects.filter(research=research, depth=2).first()
    SerpQuery.objects.filter(pk=failed.pk).update(status=QueryStatus.FAILED, error="search failed")
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#report-body h1")).to_have_text("Heat pumps in Nordic winters")
    # when she retries the failed query, from the live log
    page.click("#tab-log")
    page.locator(f"li.q[data-query-id='{failed.pk}'] .q-retry").click()
    expect(page.locator("#events li.event[data-type=query_retried]")).to_have_count(1)
    assert Research.objects.get(pk=research.pk).report_version == 2
    # and the research writes its second report: the session's workers do when they are up (another test started
    # them); else it is stored here as they store it, and its event pushed
    if not wait_for(lambda: Document.objects.filter(research=research, version=2).exists(), seconds=5):
        Document.objects.get_or_create(
            research=research, kind=DocumentKind.REPORT, version=2, defaults={"markdown": "# Second look\n\nNew.\n"}
        )
        Research.objects.filter(pk=research.pk).update(status="completed", finished_at=timezone.now())
        record_event(research.pk, "report_writing_successful", {"citations": 0, "sources_cited": 0})
    second = report_title(Document.objects.get(research=research, version=2).markdown)
    # then the page shows the new report, offers the first version, and keeps its memory; no script failed
    expect(page.locator("#report-body h1")).to_have_text(second, timeout=30_000)
    earlier = page.locator("#report-versions a")
    expect(earlier).to_have_text(["version 1"])
    assert earlier.get_attribute("href") == f"/api/research/{research.pk}/report.md?version=1"
    expect(page.locator("#memory .memory-insights li")).to_have_count(1)
    expect(page.locator("#memory")).to_be_visible()
    assert watched.errors == []
