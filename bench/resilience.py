"""Fairness and recovery on the bench stack: the two figures tests/test_faults.py holds, measured the same way.

- Fairness (`test_a_small_research_is_not_stuck_behind_a_large_one`): on one worker of 4 slots, another user's
  1x1 started while a 6x3 has 150+ steps waiting, against the same 1x1 alone; the test's bound: 3 × alone + 10 s,
  with the 6x3 still running when the 1x1 is done.
- Recovery (`test_kill_9_worker_with_production_leases_costs_about_a_minute`): a 3x3 on two workers of 6 slots
  with production leases (60 s, a sweep every 15 s, celery beat running the sweeper), one worker killed with
  SIGKILL while it works on it, against an undisturbed 3x3; the test's bound: undisturbed + 90 s, and the
  research complete and exact.

The latencies are the tests' (analysis 0.3 s for fairness; search 0.2 s and analysis 0.4 s for recovery; every
other call at once), so the figures compare with the tests'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench import engine
from bench.latency import Latencies
from devtools.processes import wait_until

# What a deployment runs with (the defaults of researchsite/settings.py), as the recovery test sets them.
PRODUCTION_LEASES = {"LEASE_SECONDS": "60", "SWEEP_INTERVAL": "15", "MAX_ATTEMPTS": "3", "QUEUE_GRACE_SECONDS": "600"}
FAIRNESS = Latencies(plan=0, search=0, page=0, analysis=0.3, report=0)
RECOVERY = Latencies(plan=0, search=0.2, page=0, analysis=0.4, report=0)
BACKLOG = 150


@dataclass
class Fairness:
    alone: float  # seconds, the 1x1 alone
    beside: float  # seconds, the 1x1 beside the 6x3's backlog
    backlog: int  # the 6x3's steps waiting when the 1x1 started
    large_running: bool  # the 6x3 was still running when the 1x1 was done

    @property
    def bound(self) -> float:
        return 3 * self.alone + 10

    @property
    def holds(self) -> bool:
        return self.large_running and self.beside <= self.bound


@dataclass
class Recovery:
    undisturbed: float  # seconds, a 3x3 on two workers
    killed: float  # seconds, a 3x3 with one of the two workers killed mid-run

    @property
    def bound(self) -> float:
        return self.undisturbed + 90

    @property
    def holds(self) -> bool:
        return self.killed <= self.bound


def _run(owner: Any, breadth: int, depth: int) -> tuple[str, Any]:
    research_id = engine.queue_research(owner)
    return research_id, engine.start(research_id, breadth, depth)


def _wall(research_id: str, queued_at: Any) -> float:
    from research.models import Research

    return (Research.objects.get(pk=research_id).finished_at - queued_at).total_seconds()


def _status(research_id: str) -> str:
    from research.models import Research

    return str(Research.objects.values_list("status", flat=True).get(pk=research_id))


def _check_exact(research_id: str, breadth: int, depth: int) -> None:
    """Completed, every query of the tree done, no unfinished website, one report: or fail loudly."""
    from research.models import Document, QueryStatus, Research, SerpQuery, Website, WebsiteStatus
    from research.record.planning import total_queries

    research = Research.objects.get(pk=research_id)
    queries = SerpQuery.objects.filter(research_id=research_id)
    unfinished = Website.objects.filter(
        research_id=research_id,
        status__in=[WebsiteStatus.PENDING, WebsiteStatus.SCRAPING, WebsiteStatus.ANALYZING],
    )
    problems = {
        "status": research.status if research.status != "completed" else None,
        "queries": queries.count() if queries.count() != total_queries(breadth, depth) else None,
        "undone queries": queries.exclude(status=QueryStatus.DONE).count() or None,
        "unfinished websites": unfinished.count() or None,
        "reports": Document.objects.filter(research_id=research_id, kind="report").count() != 1 or None,
    }
    problems = {key: value for key, value in problems.items() if value is not None}
    if problems:
        raise RuntimeError(f"research {research_id} ({breadth}x{depth}) is not complete and exact: {problems}")


def purge() -> None:
    """Drop the messages left in the bench's queues (a cancelled research's steps), so later parts start clean."""
    from researchsite.celery import app

    app.control.purge()


def fairness(stack: Any, user: Any, other: Any) -> Fairness:
    from research.control.dispatch import waiting_steps
    from research.control.lifecycle import cancel_research

    stack.fakes.prepare(FAIRNESS)
    with stack.workers(1, 4, "bench-fair-"):
        solo, queued = _run(other, 1, 1)
        engine.wait(solo, 120)
        _check_exact(solo, 1, 1)
        alone = _wall(solo, queued)
        large, _ = _run(user, 6, 3)
        try:
            wait_until(lambda: waiting_steps(large) >= BACKLOG, 180, f"a backlog of {BACKLOG} steps")
            backlog = waiting_steps(large)
            small, queued = _run(other, 1, 1)
            engine.wait(small, 300)
            large_running = _status(large) == "running"
            _check_exact(small, 1, 1)
            beside = _wall(small, queued)
        finally:
            cancel_research(large)
    purge()
    return Fairness(alone, beside, backlog, large_running)


def _kill_a_busy_worker(pool: Any, research_id: str) -> None:
    """SIGKILL a worker process that has a task in flight, once the research has pages in analysis."""
    from research.models import Website
    from researchsite.celery import app

    wait_until(
        lambda: Website.objects.filter(research_id=research_id, status="analyzing").count() >= 3,
        timeout=60,
        message="work in flight",
    )
    active = app.control.inspect(timeout=2).active() or {}
    busy = [
        i
        for i in range(len(pool.processes))
        if any(name.startswith(f"{pool.name}{i}-") and tasks for name, tasks in active.items())
    ]
    if not busy:
        raise RuntimeError(f"no worker had a task in flight: {active}")
    pool.kill(busy[0])


def recovery(stack: Any, user: Any) -> Recovery:
    stack.fakes.prepare(RECOVERY)
    with stack.workers(2, 6, "bench-kill-", env=PRODUCTION_LEASES) as pool, stack.beat(PRODUCTION_LEASES):
        first, queued = _run(user, 3, 3)
        engine.wait(first, 300)
        _check_exact(first, 3, 3)
        undisturbed = _wall(first, queued)
        second, queued = _run(user, 3, 3)
        _kill_a_busy_worker(pool, second)
        engine.wait(second, 400)
        _check_exact(second, 3, 3)
        killed = _wall(second, queued)
    purge()
    return Recovery(undisturbed, killed)
