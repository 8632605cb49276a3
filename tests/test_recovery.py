"""The sweeper, driven directly: stuck rows are re-queued once per lease, and failed after MAX_ATTEMPTS."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from research.models import Document, Event, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from tests.support.factories import running_research, spend
from workers.pipeline import recovery
from workers.pipeline.heartbeat import Heartbeat
from workers.pipeline.lifecycle import start_research
from workers.steps import sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=2)


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def test_stuck_rows_are_requeued_once_per_lease(running, published, settings) -> None:
    # given a query stuck searching (its worker died) and a website whose publish was lost
    settings.LEASE_SECONDS, settings.QUEUE_GRACE_SECONDS = 60, 90
    query = SerpQuery.objects.create(
        research=running,
        depth=1,
        position=0,
        query="q",
        objective="o",
        status=QueryStatus.SEARCHING,
        claimed_at=ago(120),
        claimed_by="dead:1:t",
    )
    fresh = SerpQuery.objects.create(
        research=running,
        depth=1,
        position=1,
        query="q2",
        objective="o",
        status=QueryStatus.SEARCHING,
        claimed_at=ago(5),
    )
    website = Website.objects.create(research=running, query=fresh, position=0, url="https://x.example/")
    Website.objects.filter(pk=website.pk).update(created_at=ago(120))
    # when
    first = sweep()
    second = sweep()
    # then
    assert first == {"query": 1, "scrape": 1}
    assert second == {}
    assert sorted(published) == ["workers.tasks.run_query_task", "workers.tasks.scrape_website_task"]
    query.refresh_from_db()
    assert (query.attempts, query.claimed_by) == (1, "sweeper")
    fresh.refresh_from_db()
    assert fresh.attempts == 0  # a live lease is left alone
    website.refresh_from_db()
    assert (website.attempts, website.claimed_by) == (0, "sweeper")  # waiting in the queue is no attempt


def test_row_stuck_past_max_attempts_fails_with_reason(running, published, settings) -> None:
    # given a website that has been re-queued MAX_ATTEMPTS times and is stuck again
    settings.LEASE_SECONDS, settings.MAX_ATTEMPTS = 60, 3
    query = SerpQuery.objects.create(
        research=running,
        depth=1,
        position=0,
        query="q",
        objective="o",
        status=QueryStatus.SCRAPING,
        pending_websites=1,
        claimed_at=timezone.now(),
    )
    website = Website.objects.create(
        research=running,
        query=query,
        position=0,
        url="https://x.example/",
        status=WebsiteStatus.SCRAPING,
        attempts=3,
        claimed_at=ago(120),
        claimed_by="dead:1:t",
    )
    # when
    done = sweep()
    # then the website failed (a minor failure) and its query went on to its review
    assert done == {"website_failed": 1}
    website.refresh_from_db()
    assert website.status == WebsiteStatus.FAILED and "abandoned after 3 attempts" in website.error
    query.refresh_from_db()
    assert query.status == QueryStatus.REVIEWING
    assert running.events.filter(type="website_failed").count() == 1


def test_search_stuck_past_max_attempts_is_critical(running, published, settings) -> None:
    settings.LEASE_SECONDS, settings.MAX_ATTEMPTS = 60, 2
    SerpQuery.objects.create(
        research=running,
        depth=1,
        position=0,
        query="q",
        objective="o",
        status=QueryStatus.SEARCHING,
        attempts=2,
        claimed_at=ago(120),
        claimed_by="dead:1:t",
    )
    assert sweep() == {"query_failed": 1}
    running.refresh_from_db()
    assert running.status == ResearchStatus.FAILED
    assert Document.objects.filter(research=running, kind="error_output").exists()


def test_draft_whose_questions_lapsed_is_requeued_and_failed_past_max_attempts(user, published, settings) -> None:
    # given drafts: one whose worker died writing its questions, one whose message was lost, one just handed on, and
    # one made a month ago before the questions were a step of their own (never handed on: not queued again, and
    # past DRAFT_MAX_AGE_HOURS, deleted)
    settings.LEASE_SECONDS, settings.QUEUE_GRACE_SECONDS, settings.MAX_ATTEMPTS = 60, 90, 2

    def draft(title: str, **lease) -> Research:
        return Research.objects.create(owner=user, prompt="p", title=title, num_questions=2, **lease)

    died = draft("died", claimed_at=ago(120), claimed_by="dead:1:t")
    lost = draft("lost", claimed_at=ago(120), claimed_by="queued")
    fresh = draft("fresh", claimed_at=ago(5), claimed_by="queued")
    old = draft("old")
    Research.objects.filter(pk=old.pk).update(created_at=ago(30 * 86400))
    # when
    first = sweep()
    second = sweep()
    # then the two lapsed ones are queued again, once each; a lapsed lease counts as an attempt, a lost message not
    assert (first, second) == ({"followups": 2, "drafts_expired": 1}, {})
    assert not Research.objects.filter(pk=old.pk).exists()
    assert published == ["workers.tasks.generate_followups_task"] * 2
    requeued = Research.objects.filter(pk__in=[died.pk, lost.pk]).order_by("title")
    assert [(r.claimed_by, r.attempts) for r in requeued] == [("sweeper", 1), ("sweeper", 0)]
    assert Research.objects.get(pk=fresh.pk).claimed_by == "queued"
    # when the step's worker dies again, and again past MAX_ATTEMPTS
    for expected in ({"followups": 1}, {"followups_failed": 1}):
        Research.objects.filter(pk=died.pk).update(claimed_at=ago(120), claimed_by="dead:2:t")
        assert sweep() == expected
    # then that draft fails with the reason; the others still wait for their questions
    died.refresh_from_db()
    assert died.status == ResearchStatus.FAILED and "no follow-up questions after 2 attempts" in died.error
    failed = Event.objects.get(research=died, type="research_failed")
    assert failed.data["reason"] == "followups_failed"
    assert set(Research.objects.exclude(pk=died.pk).values_list("status", flat=True)) == {ResearchStatus.DRAFT}


def test_lost_report_publish_and_stuck_report_are_retried(user, published, settings) -> None:
    settings.LEASE_SECONDS, settings.QUEUE_GRACE_SECONDS = 60, 60
    finished = Research.objects.create(
        owner=user,
        prompt="p",
        title="a",
        status=ResearchStatus.RUNNING,
        breadth=1,
        depth=1,
        pending_queries=0,
        started_at=timezone.now(),
        claimed_at=ago(120),
    )
    stuck = Research.objects.create(
        owner=user,
        prompt="p",
        title="b",
        status=ResearchStatus.REPORTING,
        breadth=1,
        depth=1,
        pending_queries=0,
        started_at=timezone.now(),
        claimed_at=ago(120),
        claimed_by="dead:1:t",
        attempts=1,
    )
    for research in (finished, stuck):
        SerpQuery.objects.create(
            research=research,
            depth=1,
            position=0,
            query="q",
            objective="o",
            status=QueryStatus.DONE,
            claimed_at=ago(120),
        )
    assert sweep() == {"report": 1, "report_retry": 1}
    assert published == ["workers.tasks.write_report_task"] * 2
    stuck.refresh_from_db()
    assert stuck.status == ResearchStatus.RUNNING
    assert finished.pk != stuck.pk


def test_research_past_token_budget_stops_with_its_report_handed_on(running, published) -> None:
    # given a running research past its token budget, with a query still searching
    Research.objects.filter(pk=running.pk).update(budget_tokens=1000)
    spend(running, 900, 200)
    query = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.SEARCHING
    )
    # when the sweeper runs, twice
    first = sweep()
    second = sweep()
    # then it stopped once: partial, the query cancelled, every query counted off, the report queued once
    assert first == {"budget_stop": 1}
    assert second == {}
    running.refresh_from_db()
    assert running.status == ResearchStatus.RUNNING
    assert (running.partial, running.stop_reason, running.pending_queries) == (True, "budget_tokens", 0)
    assert running.claimed_by == "queued"
    query.refresh_from_db()
    assert query.status == QueryStatus.CANCELLED
    assert published == ["workers.tasks.write_report_task"]
    event = Event.objects.get(research=running, type="budget_reached")
    assert event.data == {"reason": "budget_tokens", "limit": 1000, "spent": 1100}
    assert not Document.objects.filter(research=running).exists()


def test_a_budget_stop_whose_worker_died_half_way_is_finished_by_the_sweeper(running, published) -> None:
    # given a research marked stopped whose worker died before stopping its tree and handing the report on
    Research.objects.filter(pk=running.pk).update(partial=True, stop_reason="budget_seconds")
    website_query = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.SCRAPING
    )
    website = Website.objects.create(research=running, query=website_query, position=0, url="https://x.example/")
    # when
    assert sweep() == {"budget_stop": 1}
    # then
    running.refresh_from_db()
    assert running.pending_queries == 0 and running.status == ResearchStatus.RUNNING
    website.refresh_from_db()
    assert website.status == WebsiteStatus.CANCELLED
    assert published == ["workers.tasks.write_report_task"]


def test_a_research_within_its_budgets_is_left_running(running, published) -> None:
    Research.objects.filter(pk=running.pk).update(budget_tokens=1000, budget_usd="0.5000", budget_seconds=3600)
    spend(running, 500, cost_usd="0.1")
    assert "budget_stop" not in sweep()
    running.refresh_from_db()
    assert running.stop_reason == "" and not running.partial


def expire_and_sweep(model: type, pk: object) -> dict[str, int]:
    """One sweep after a worker took the row's step up and died: its lease was not renewed."""
    model.objects.filter(pk=pk).update(claimed_at=ago(120), claimed_by="dead:1:t")
    return sweep()


def wait_and_sweep(model: type, pk: object) -> dict[str, int]:
    """One sweep after the row's step waited in the queue past QUEUE_GRACE_SECONDS (its message may be lost)."""
    model.objects.filter(pk=pk).update(claimed_at=ago(120))
    return sweep()


def assert_failed_critically(research: Research, reason: str, says: str) -> None:
    research.refresh_from_db()
    assert research.status == ResearchStatus.FAILED
    assert says in research.error
    assert Document.objects.get(research=research, kind="error_output").stats["reason"] == reason
    assert research.events.filter(type="research_failed", data__reason=reason).count() == 1


def test_a_queued_research_is_published_again_but_never_failed(user, published, settings) -> None:
    # given a queued research whose start task waits in a long queue (or was lost)
    settings.QUEUE_GRACE_SECONDS, settings.MAX_ATTEMPTS = 60, 3
    research = Research.objects.create(
        owner=user, prompt="p", title="t", status=ResearchStatus.QUEUED, breadth=1, depth=1, claimed_at=ago(120)
    )
    # when the sweeper finds it still waiting, again and again
    done = [wait_and_sweep(Research, research.pk) for _ in range(5)]
    # then its start is published again each time, and queue time never counts as an attempt
    assert done == [{"start": 1}] * 5
    assert published == ["workers.tasks.start_research_task"] * 5
    research.refresh_from_db()
    assert (research.status, research.attempts) == (ResearchStatus.QUEUED, 0)


def test_steps_waiting_in_the_queue_never_fail(running, published, settings) -> None:
    # given a search and a website waiting in the queue for longer than any lease, many times over
    settings.LEASE_SECONDS, settings.QUEUE_GRACE_SECONDS, settings.MAX_ATTEMPTS = 5, 60, 1
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    website = Website.objects.create(research=running, query=query, position=0, url="https://x.example/")
    # when
    for _ in range(4):
        wait_and_sweep(SerpQuery, query.pk)
        wait_and_sweep(Website, website.pk)
    # then each was published again, and neither failed nor counted an attempt
    query.refresh_from_db()
    website.refresh_from_db()
    assert (query.status, query.attempts) == (QueryStatus.PENDING, 0)
    assert (website.status, website.attempts) == (WebsiteStatus.PENDING, 0)
    assert sorted(set(published)) == ["workers.tasks.run_query_task", "workers.tasks.scrape_website_task"]
    assert running.events.filter(type__in=["serp_query_failed", "website_failed"]).count() == 0


def test_top_level_planning_lost_past_max_attempts_fails_the_research(running, published, settings) -> None:
    # given a running research that never got its top-level queries
    settings.LEASE_SECONDS, settings.MAX_ATTEMPTS = 60, 3
    # when
    done = [expire_and_sweep(Research, running.pk) for _ in range(5)]
    # then
    assert done == [{"plan_top": 1}] * 3 + [{"plan_top_failed": 1}, {}]
    assert published == ["workers.tasks.plan_queries_task"] * 3
    assert_failed_critically(running, "planning_failed", "no top-level queries after 3 attempts")


def test_child_planning_lost_past_max_attempts_fails_the_research(running, published, settings) -> None:
    # given a finished top-level query whose children are never planned (the research is depth 2)
    settings.LEASE_SECONDS, settings.MAX_ATTEMPTS = 60, 3
    query = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="heat pumps", objective="o", status=QueryStatus.DONE
    )
    # when
    done = [expire_and_sweep(SerpQuery, query.pk) for _ in range(5)]
    # then
    assert done == [{"plan_children": 1}] * 3 + [{"plan_children_failed": 1}, {}]
    assert published == ["workers.tasks.plan_queries_task"] * 3
    assert_failed_critically(running, "planning_failed", "no queries under “heat pumps” after 3 attempts")


def test_report_publish_lost_past_max_attempts_fails_the_research(running, published, settings) -> None:
    # given a research whose every query is done, but whose report task never runs
    settings.LEASE_SECONDS, settings.MAX_ATTEMPTS = 60, 3
    Research.objects.filter(pk=running.pk).update(pending_queries=0)
    SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.DONE, children_planned=True
    )
    # when
    done = [expire_and_sweep(Research, running.pk) for _ in range(5)]
    # then
    assert done == [{"report": 1}] * 3 + [{"report_failed": 1}, {}]
    assert published == ["workers.tasks.write_report_task"] * 3
    assert_failed_critically(running, "report_failed", "no report after 3 attempts")


def test_a_research_that_starts_counts_its_planning_attempts_from_zero(user, published) -> None:
    # given a research the sweeper had to re-queue twice before a worker started it
    research = Research.objects.create(
        owner=user, prompt="p", title="t", status=ResearchStatus.QUEUED, breadth=1, depth=1, attempts=2
    )
    # when
    start_research(str(research.pk))
    # then its planning gets MAX_ATTEMPTS re-queues of its own
    research.refresh_from_db()
    assert (research.status, research.attempts) == (ResearchStatus.RUNNING, 0)
    assert published == ["workers.tasks.plan_queries_task"]


def test_heartbeat_renews_only_the_leases_held(running) -> None:
    # given two websites with old leases, one of them held by a running step
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    held, idle = (
        Website.objects.create(
            research=running, query=query, position=i, url=f"https://x{i}.example/", claimed_at=ago(50)
        )
        for i in range(2)
    )
    heartbeat = Heartbeat()
    # when the heartbeat beats while the step holds the first
    with heartbeat.holding(Website, held.pk):
        assert heartbeat.beat() == 1
    # then only the held lease is fresh, and nothing is held after the step
    held.refresh_from_db()
    idle.refresh_from_db()
    assert timezone.now() - held.claimed_at < timedelta(seconds=5)
    assert timezone.now() - idle.claimed_at > timedelta(seconds=45)
    assert heartbeat.held() == [] and heartbeat.beat() == 0


def test_heartbeat_never_renews_a_lease_handed_to_another_delivery(running) -> None:
    # given a website a step leased as "first", and a host that goes on beating for it
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    website = Website.objects.create(
        research=running,
        query=query,
        position=0,
        url="https://x.example/",
        claimed_by="first h:1:t",
        claimed_at=ago(50),
    )
    heartbeat = Heartbeat()
    with heartbeat.holding(Website, website.pk, "first h:1:t"):
        assert heartbeat.beat() == 1
        # when its lease lapsed meanwhile and the sweeper handed the row to another delivery
        Website.objects.filter(pk=website.pk).update(claimed_by="second h:2:t", claimed_at=ago(50))
        # then the first host's beats leave the new holder's lease alone: it lapses if that one dies too
        assert heartbeat.beat() == 0
    website.refresh_from_db()
    assert timezone.now() - website.claimed_at > timedelta(seconds=45)


def test_backlog_counts_only_steps_waiting_in_the_queue_and_sets_the_priority(running) -> None:
    from research.control.dispatch import step_priority, waiting_steps

    # given a pending search, a website waiting to be scraped, one handed on to analysis, and one a worker holds
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    rows = [("", WebsiteStatus.PENDING), ("queued", WebsiteStatus.ANALYZING), ("host:1:t", WebsiteStatus.ANALYZING)]
    for i, (claimed_by, status) in enumerate(rows):
        Website.objects.create(
            research=running,
            query=query,
            position=i,
            url=f"https://x{i}.example/",
            status=status,
            claimed_by=claimed_by,
        )
    # then the backlog is the three waiting steps, and a short backlog goes first, a long one last
    assert waiting_steps(running.pk) == 3
    assert [step_priority(n) for n in (0, 7, 8, 31, 32, 127, 128, 10_000)] == [0, 0, 3, 3, 6, 6, 9, 9]


def test_a_search_goes_one_priority_step_ahead_of_its_research_backlog(monkeypatch) -> None:
    from celery import Task

    from research.control import dispatch

    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(Task, "apply_async", lambda task, args=None, kwargs=None, **o: sent.append((task.name, o)))
    # when searches and scrapes are published at each backlog priority, alone and in a batch
    for priority in (0, 3, 6, 9):
        dispatch.SEARCH.at_priority(priority, 1)
        dispatch.SCRAPE.at_priority(priority, 1)
    dispatch.publish_batch(dispatch.SEARCH.name, [1, 2], priority=9)
    # then a search goes a step ahead (the top priority stays the top), a scrape at its research's priority
    searches = [options["priority"] for name, options in sent if name == dispatch.SEARCH.name]
    scrapes = [options["priority"] for name, options in sent if name == dispatch.SCRAPE.name]
    assert searches == [0, 0, 3, 6, 6, 6]
    assert scrapes == [0, 3, 6, 9]


def test_a_research_batch_takes_no_better_priority_than_its_last_while_earlier_steps_wait(
    user, running, monkeypatch
) -> None:
    from celery import Task

    from research.control import dispatch

    sent: list[tuple[str, int, object]] = []
    monkeypatch.setattr(
        Task, "apply_async", lambda task, args=None, kwargs=None, producer=None, **o: sent.append((task.name, *args, o))
    )
    other = running_research(user, breadth=1, depth=1)
    # the backlog each hand-on counts, its own steps included
    backlogs = iter([40, 20, 12, 7, 12, 5])
    monkeypatch.setattr(dispatch, "waiting_steps", lambda research_id: next(backlogs))
    # when the research hands on 7 scrapes with 40 waiting (priority 6), then 7 with 20 waiting (3 by the backlog)
    dispatch.SCRAPE.each_on_commit(range(1, 8), running.pk)
    dispatch.SCRAPE.each_on_commit(range(11, 18), running.pk)
    # and another research hands on 7 with 12 waiting (3), 5 of them before its batch
    dispatch.SCRAPE.each_on_commit(range(31, 38), other.pk)
    # and the first research hands on 7 with its queue otherwise empty, then 7 with 12 waiting, then 2 with 5
    dispatch.SCRAPE.each_on_commit(range(21, 28), running.pk)
    dispatch.SCRAPE.each_on_commit(range(41, 48), running.pk)
    dispatch.SCRAPE.each_on_commit(range(51, 53), running.pk)
    priorities = {row_id: options["priority"] for _, row_id, options in sent}
    # then its second batch stays at 6 behind the first, the other research keeps its own 3, an empty queue
    # resets the research to its backlog's 0, and a batch that says 0 behind one at 3 goes at 3
    assert [priorities[first] for first in (1, 11, 31, 21, 41, 51)] == [6, 6, 3, 0, 3, 3]
    assert {priorities[i] for i in range(1, 8)} == {6} and {priorities[i] for i in range(11, 18)} == {6}
    assert len(sent) == 7 * 5 + 2


def test_the_backlog_alone_sets_the_priority_when_redis_fails(running, settings) -> None:
    from research.control import dispatch

    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens: the script call fails
    assert dispatch.research_priority(running.pk, 40, 7) == 6
    assert dispatch.research_priority(running.pk, 20, 7) == 3


def test_the_sweeper_requeues_a_long_backlog_at_its_low_priority_and_a_short_one_first(
    user, running, settings, monkeypatch
) -> None:
    from celery import Task

    # given a large research with 130 websites waiting past the grace, and a small one with one lapsed search
    settings.QUEUE_GRACE_SECONDS = 4
    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(Task, "apply_async", lambda task, args=None, kwargs=None, **o: sent.append((task.name, o)))
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    Website.objects.bulk_create(
        Website(research=running, query=query, position=i, url=f"https://x{i}.example/", claimed_by="queued")
        for i in range(130)
    )
    Website.objects.filter(research=running).update(created_at=ago(10), claimed_at=ago(10))
    SerpQuery.objects.filter(pk=query.pk).update(status=QueryStatus.SCRAPING, claimed_at=ago(1))
    small = running_research(user, breadth=1, depth=1)
    SerpQuery.objects.create(
        research=small, depth=1, position=0, query="s", objective="o", claimed_by="queued", claimed_at=ago(10)
    )
    # when one sweep re-queues them
    done = sweep()
    # then the small research's search goes at the top priority and before the 130 scrapes, which go at the lowest
    assert done == {"query": 1, "scrape": 130}
    assert sent[0] == ("workers.tasks.run_query_task", {"priority": 0})
    assert {options["priority"] for name, options in sent[1:]} == {9}
    assert len(sent) == 131


def test_steps_handed_on_are_published_even_when_the_backlog_cannot_be_counted(running, monkeypatch) -> None:
    from celery import Task
    from django.db import OperationalError

    from research.control import dispatch

    # given a connection that breaks between the commit that hands steps on and their publish
    sent: list[tuple[str, object, object]] = []

    def record(task, args=None, kwargs=None, producer=None, **options):
        sent.append((task.name, args, options))

    monkeypatch.setattr(Task, "apply_async", record)

    def broken(research_id):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dispatch, "waiting_steps", broken)
    # when two scrapes are handed on outside a transaction
    dispatch.SCRAPE.each_on_commit([11, 12], running.pk)
    # then both are published, at the lowest priority, instead of waiting for the sweeper
    assert sent == [
        ("workers.tasks.scrape_website_task", (11,), {"priority": dispatch.LOWEST_PRIORITY}),
        ("workers.tasks.scrape_website_task", (12,), {"priority": dispatch.LOWEST_PRIORITY}),
    ]


def test_sweeps_sent_by_several_beats_take_turns(settings, redis_conn) -> None:
    # given two sweeps at once (a beat beside each group of workers sends one each)
    with recovery.sweeper_turn() as first, recovery.sweeper_turn() as second:
        # then only one of them sweeps
        assert first and not second
    # and the turn is free again once the sweep ends
    with recovery.sweeper_turn() as later:
        assert later
    # a sweeper cut off mid-sweep holds the turn no longer than a lease
    settings.LEASE_SECONDS = 1
    redis_conn.set(recovery.SWEEP_TURN_KEY, "a sweep cut off", px=settings.LEASE_SECONDS * 1000)
    with recovery.sweeper_turn() as meanwhile:
        assert not meanwhile
    time.sleep(1.2)
    with recovery.sweeper_turn() as after_a_lease:
        assert after_a_lease
