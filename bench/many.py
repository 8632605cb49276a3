"""Many researches at once: a batch of researches of several users, all started together on the same workers.

`run_batch` creates the users' researches, starts them one after the other (users interleaved, as requests from
several browsers would arrive), waits for all of them and reads each back with `bench.engine.measure`. Meanwhile
it samples the bench database's PostgreSQL connections, and the caller meters CPU and counts statements and Redis
commands around it. A research that does not end `completed` fails the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench import engine
from bench.latency import Latencies


@dataclass
class BatchRun:
    """One batch, measured."""

    users: int
    breadth: int
    depth: int
    runs: list[Any]  # bench.engine.EngineRun, in start order
    owners: list[int]  # the owner (user index) of each run
    wall: float  # seconds, first start queued → last research finished
    start_spread: float  # seconds between the first and the last start
    share_cutoff: float  # seconds after the first start at which the first user had all its researches done
    shares: list[float] = field(default_factory=list)  # per user: share of the tasks done by `share_cutoff`
    tasks_by_cutoff: list[float] = field(default_factory=list)  # per user: tasks done by `share_cutoff` (estimate)

    @property
    def tasks(self) -> int:
        return sum(r.tasks for r in self.runs)

    def user_walls(self, user: int) -> list[float]:
        return [r.wall for r, owner in zip(self.runs, self.owners, strict=True) if owner == user]


def slot_seconds(run: Any, lat: Latencies) -> float:
    """Seconds of worker slots a research's calls take at the latencies (the report counted as its one latency): no
    scheduler runs a batch on `slots` slots in less than the batch's sum over `slots`."""
    return engine.latency_work(run, lat) + lat.report


def create_users(count: int) -> list[Any]:
    from django.contrib.auth import get_user_model

    model = get_user_model()
    return [
        model.objects.get_or_create(username=f"bench-many-{i}", defaults={"email": f"bench-many-{i}@example.com"})[0]
        for i in range(count)
    ]


def run_batch(users: list[Any], count: int, breadth: int, depth: int, latencies: Latencies, timeout: float) -> BatchRun:
    """Start `count` researches of (breadth, depth), shared round-robin by the users, all at once; wait for all."""
    from django.test import override_settings

    from research.models import Research

    owners = [i % len(users) for i in range(count)]  # interleaved: u0 u1 … u0 u1 …
    ids = [engine.queue_research(users[u]) for u in owners]
    # The per-user cap of active researches (3 by default) would refuse a user's fourth: lifted here, for the
    # starts only (it is checked where a research is started, in this process).
    with override_settings(MAX_ACTIVE_RESEARCH_PER_USER=max(owners.count(0), 1)):
        queued = [engine.start(research_id, breadth, depth) for research_id in ids]
    deadline = time.monotonic() + timeout
    for research_id in ids:
        engine.wait(research_id, max(1.0, deadline - time.monotonic()))
    runs = [
        engine.measure(research_id, at, breadth, depth, latencies, timeout=10)
        for research_id, at in zip(ids, queued, strict=True)
    ]
    failed = [(r.research_id, r.status) for r in runs if r.status != "completed"]
    if failed:
        errors = dict(Research.objects.filter(pk__in=[i for i, _ in failed]).values_list("pk", "error"))
        raise RuntimeError(f"{len(failed)} of {len(runs)} researches did not complete: {failed} {errors}")
    first = min(queued)
    rows = Research.objects.filter(pk__in=ids).values_list("pk", "finished_at")
    finished = {str(pk): at for pk, at in rows if at is not None}  # all of them: every research completed
    wall = (max(finished.values()) - first).total_seconds()
    batch = BatchRun(
        users=len(users),
        breadth=breadth,
        depth=depth,
        runs=runs,
        owners=owners,
        wall=wall,
        start_spread=(max(queued) - first).total_seconds(),
        share_cutoff=0.0,
    )
    _shares(batch, ids, finished, first)
    return batch


def _shares(batch: BatchRun, ids: list[str], finished: dict[str, datetime], first: datetime) -> None:
    """Each user's share of the work done while every user still had work: up to the moment the first user had
    all its researches finished. A research's tasks done by then are estimated from its events recorded by then
    (tasks × events so far / events in all): events are recorded by the steps as they finish."""
    from research.models import Event

    done_at = [
        max(finished[i] for i, owner in zip(ids, batch.owners, strict=True) if owner == user)
        for user in range(batch.users)
    ]
    cutoff = min(done_at)
    batch.share_cutoff = (cutoff - first).total_seconds()
    tasks = [0.0] * batch.users
    for run, owner in zip(batch.runs, batch.owners, strict=True):
        by_then = Event.objects.filter(research_id=run.research_id, created_at__lte=cutoff).count()
        tasks[owner] += run.tasks * by_then / run.events if run.events else 0.0
    total = sum(tasks)
    batch.tasks_by_cutoff = tasks
    batch.shares = [t / total if total else float("nan") for t in tasks]
