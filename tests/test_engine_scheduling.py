"""Scheduling on the real stack: no level barrier, exactly-once under duplicates, cancel, time budget, scale."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from research.control import dispatch
from research.models import Document, Event, ReportSection, Research, ResearchStatus, SerpQuery, Website
from research.record.planning import total_queries
from tests.support.e2e import settle, start_research, wait_finished

pytestmark = pytest.mark.django_db(transaction=True)


def test_child_of_fast_branch_starts_before_slow_sibling_finishes(api, workers, research_model, fake_searx) -> None:
    # given two top-level queries, one of which the search engine answers slowly
    research_model.top_names = ["slow branch", "fast branch"]
    fake_searx.delays = [("slow branch", 4.0)]
    # when
    research = wait_finished(start_research(api, 2, 2))
    # then
    assert research.status == ResearchStatus.COMPLETED, research.error
    slow = SerpQuery.objects.get(research=research, depth=1, query="slow branch")
    fast = SerpQuery.objects.get(research=research, depth=1, query="fast branch")
    fast_child = SerpQuery.objects.filter(parent=fast).order_by("created_at").first()
    assert fast_child is not None
    assert fast.finished_at < slow.finished_at
    assert fast_child.created_at < slow.finished_at


def deadlocks() -> int:
    """Deadlocks PostgreSQL has detected in this database (backends report theirs within a second or so of their
    next transaction, and the workers keep making transactions while a research runs)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.mark.timeout(600)
def test_duplicate_deliveries_change_nothing(api, workers, research_model, redis_conn) -> None:
    # given a running research whose every task we deliver again, over and over, while it runs
    deadlocks_before = deadlocks()
    research_id = start_research(api, 3, 2)
    while Research.objects.get(pk=research_id).status not in ("completed", "failed"):
        dispatch.START.now(research_id)
        dispatch.PLAN.now(research_id, None)
        dispatch.REPORT.now(research_id)
        dispatch.COVERAGE.now(research_id)
        for query_id in SerpQuery.objects.filter(research_id=research_id).values_list("pk", flat=True):
            dispatch.SEARCH.now(query_id)
            dispatch.PLAN.now(research_id, query_id)
            dispatch.REVIEW.now(query_id)
        for website_id in Website.objects.filter(research_id=research_id).values_list("pk", flat=True):
            dispatch.SCRAPE.now(website_id)
            dispatch.ANALYZE.now(website_id)
        for section_id in ReportSection.objects.filter(research_id=research_id).values_list("pk", flat=True):
            dispatch.SECTION.now(section_id)
            dispatch.ASSEMBLE.now(research_id)
        time.sleep(0.3)
    research = wait_finished(research_id)
    settle(redis_conn, timeout=300)  # let the duplicates drain before the tables are flushed
    # then
    assert research.status == ResearchStatus.COMPLETED, research.error
    # and its many concurrent transactions never waited on each other in a cycle (tree_writes.py lock order)
    assert deadlocks() == deadlocks_before
    assert SerpQuery.objects.filter(research=research).count() == total_queries(3, 2)
    assert Document.objects.filter(research=research, kind="report").count() == 1
    events = list(Event.objects.filter(research=research).order_by("seq").values_list("seq", "type"))
    assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
    types = [t for _, t in events]
    assert types.count("report_writing_start") == 1 and types.count("report_writing_successful") == 1
    # every section of the report written once
    sections = ReportSection.objects.filter(research=research).count()
    assert sections >= 1 and types.count("report_section_written") == sections
    assert types.count("research_started") == 1
    assert types.count("new_serp_query") == total_queries(3, 2)
    assert types.count("got_websites_from_serp_query") == total_queries(3, 2)
    websites = Website.objects.filter(research=research).count()
    assert types.count("analyzed_a_website") + types.count("website_failed") == websites


def test_cancel_stops_queued_work(api, workers, research_model, fake_searx) -> None:
    # given a research slowed down so that it is mid-way when cancelled
    fake_searx.delay = 0.5
    research_id = start_research(api, 3, 3)
    deadline = time.monotonic() + 30
    while not Website.objects.filter(research_id=research_id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    # when
    response = api.post(f"/api/research/{research_id}/cancel")
    # then
    assert response.status_code == 200
    time.sleep(3)
    research = Research.objects.get(pk=research_id)
    assert research.status == ResearchStatus.CANCELLED
    assert SerpQuery.objects.filter(research=research).count() < total_queries(3, 3)
    assert not SerpQuery.objects.filter(research=research, status__in=["pending", "searching", "scraping"]).exists()
    assert not Website.objects.filter(research=research, status__in=["pending", "scraping", "analyzing"]).exists()
    assert not Document.objects.filter(research=research).exists()
    cancelled_seq = Event.objects.get(research=research, type="research_cancelled").seq
    # nothing happened in it after the cancel: steps that were finishing rolled back (tree_writes.py)
    assert not Event.objects.filter(research=research, seq__gt=cancelled_seq).exists()


def test_time_budget_reached_before_anything_was_analysed_fails_research_with_error_output(
    api, workers, research_model, fake_searx
) -> None:
    # given a research that has (as far as the database says) been running for longer than its time budget
    # while its first searches are still under way
    fake_searx.delay = 0.5
    research_id = start_research(api, 2, 3)
    deadline = time.monotonic() + 30
    while not SerpQuery.objects.filter(research_id=research_id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    Research.objects.filter(pk=research_id).update(started_at=timezone.now() - timedelta(hours=3))
    # when
    research = wait_finished(research_id)
    # then the budget stopped it, and with no page analysed there is nothing to report: it fails, as it would
    # without a budget
    assert (research.partial, research.stop_reason) == (True, "budget_seconds")
    assert Event.objects.filter(research=research, type="budget_reached").count() == 1
    assert research.status == ResearchStatus.FAILED
    assert research.error.startswith("The research reached its time budget"), research.error
    output = Document.objects.get(research=research, kind="error_output")
    assert output.stats["reason"] == "nothing_analysed"
    assert "## Queries and their states" in output.markdown
    assert not Document.objects.filter(research=research, kind="report").exists()


@pytest.mark.slow
def test_breadth_5_depth_5_completes_with_110_queries(api, workers, research_model) -> None:
    research = wait_finished(start_research(api, 5, 5), timeout=600)
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert SerpQuery.objects.filter(research=research, status="done").count() == 110
    assert Document.objects.filter(research=research, kind="report").count() == 1
    assert Website.objects.filter(research=research).count() == 110 * 7
