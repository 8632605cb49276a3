"""Tree transactions: the research row changes once, at the end; nothing lands in a research once it is over."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from research.control import lifecycle
from research.models import Event, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from research.record.events import record_event
from research.record.numbering import number
from tests.support.factories import running_research
from workers.errors import ResearchStopped
from workers.pipeline import progress, review
from workers.pipeline.tree_writes import tree_transaction
from workers.steps import sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


def query_with_websites(research: Research, position: int, websites: int) -> SerpQuery:
    query = SerpQuery.objects.create(
        research=research,
        depth=1,
        position=position,
        query=f"q{position}",
        objective="o",
        status=QueryStatus.SCRAPING,
        pending_websites=websites,
    )
    url = "https://example.com/{}/{}"
    Website.objects.bulk_create(
        Website(research=research, query=query, position=i, url=url.format(position, i), status=WebsiteStatus.ANALYZING)
        for i in range(websites)
    )
    return query


def test_events_and_counters_land_in_one_update_at_the_end(running, published) -> None:
    # given a research with one event already recorded and both its queries one website from done
    record_event(running.pk, "research_started")
    first, second = query_with_websites(running, 0, 1), query_with_websites(running, 1, 1)
    # when one tree transaction records events, dropped quotes and finishes both queries
    with tree_transaction(running.pk):
        record_event(running.pk, "analyzed_a_website", {"n": 1})
        progress.add_dropped_quotes(running.pk, 2)
        progress.website_finished(first.pk)
        record_event(running.pk, "analyzed_a_website", {"n": 2})
        progress.website_finished(second.pk)
        # nothing of it has reached the research row yet
        assert Research.objects.filter(pk=running.pk).values_list("last_event_seq", flat=True).get() == 1
    # then, once numbered (a push does it a moment after the commit), the events follow on without a gap, and every
    # counter changed once, by the sum
    assert number(running.pk) == 3
    running.refresh_from_db()
    events = list(Event.objects.filter(research=running).order_by("seq").values_list("seq", "type", "data"))
    assert events == [
        (1, "research_started", {}),
        (2, "analyzed_a_website", {"n": 1}),
        (3, "analyzed_a_website", {"n": 2}),
    ]
    assert running.last_event_seq == 3
    assert running.quotes_dropped == 2
    # and both queries went on to their reviews, which count them off
    assert running.pending_queries == 2
    assert published.count("workers.tasks.review_query_task") == 2
    for query in (first, second):
        review.review_query(query.pk)
    running.refresh_from_db()
    assert running.pending_queries == 0
    # and the research's last query counted off queued its report, once
    assert published.count("workers.tasks.write_report_task") == 1
    assert published.count("workers.tasks.plan_queries_task") == 0  # depth 1: no children to plan


def test_a_transaction_that_changes_nothing_leaves_the_research_row_alone(running) -> None:
    before = Research.objects.values_list("updated_at", "last_event_seq").get(pk=running.pk)
    with tree_transaction(running.pk):
        pass
    assert Research.objects.values_list("updated_at", "last_event_seq").get(pk=running.pk) == before


def test_a_step_that_ends_after_cancel_rolls_back_whole(running) -> None:
    # given a step that has written tree rows when the research is cancelled
    query = query_with_websites(running, 0, 2)
    website = Website.objects.filter(query=query).first()
    started, cancelled = threading.Event(), threading.Event()

    def cancel() -> None:
        started.wait(10)
        lifecycle.cancel_research(running.pk)
        cancelled.set()
        connection.close()

    canceller = threading.Thread(target=cancel)
    canceller.start()
    with pytest.raises(ResearchStopped):
        with tree_transaction(running.pk):
            Website.objects.filter(pk=website.pk).update(status=WebsiteStatus.ANALYZED)
            record_event(running.pk, "analyzed_a_website", {"website_id": website.pk})
            started.set()
            # the cancel waits for this website (stop_unfinished locks it) only after its status change committed
            assert cancelled.wait(0.5) is False
            with connection.cursor() as cursor:  # the status change is visible to a new statement
                cursor.execute("SELECT status FROM research_research WHERE id = %s", [running.pk])
                assert cursor.fetchone()[0] == ResearchStatus.CANCELLED
    canceller.join(10)
    assert cancelled.is_set()
    # then nothing of the step landed, and the cancel stopped every unfinished row and said so, last
    running.refresh_from_db()
    assert running.status == ResearchStatus.CANCELLED
    assert set(Website.objects.filter(query=query).values_list("status", flat=True)) == {WebsiteStatus.CANCELLED}
    assert SerpQuery.objects.get(pk=query.pk).status == QueryStatus.CANCELLED
    assert list(Event.objects.filter(research=running).values_list("type", flat=True)) == ["research_cancelled"]


def test_the_sweeper_stops_the_rows_a_dead_canceller_left(running, published, settings) -> None:
    # given a research whose status changed to cancelled, but whose worker died before stopping its rows
    settings.LEASE_SECONDS = 60
    query = query_with_websites(running, 0, 3)
    with transaction.atomic():
        ended = timezone.now() - timedelta(seconds=120)
        Research.objects.filter(pk=running.pk).update(status=ResearchStatus.CANCELLED, finished_at=ended)
    # when the sweeper runs
    done = sweep()
    # then
    assert done.get("stopped") == 1
    assert set(Website.objects.filter(query=query).values_list("status", flat=True)) == {WebsiteStatus.CANCELLED}
    assert SerpQuery.objects.get(pk=query.pk).status == QueryStatus.CANCELLED
    assert sweep().get("stopped") is None  # once
