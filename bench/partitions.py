"""Hosts cut off: what a partition costs a research, at production leases (bench part `partitions`).

Two hosts of workers (one worker process of 6 threads each) share PostgreSQL and Redis; host B reaches both
through TCP relays that this part cuts (devtools/relay.py: a cut relay forwards nothing and closes nothing, as a
dead switch does). For each way of cutting B off (whole, from the broker only, from the database only, and the
host of one of two beats), a 3x3 runs undisturbed, then again with B cut off once it is analysing pages; B stays
cut off until host A has finished the research. Then B is let back, its late steps run to their end, and the
research must be unchanged by them. The figure is the delay against the undisturbed run, at the settings a
deployment runs with (60 s leases, a sweep every 15 s, 600 s queue grace). The latencies are the partition
tests' (searches 0.1 s, analyses 0.3 s), so the figures compare with theirs (tests/test_partitions.py, 4 s leases).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from bench import engine
from bench.latency import Latencies
from bench.resilience import PRODUCTION_LEASES, _check_exact, _run, _wall, purge
from devtools.processes import wait_until
from devtools.relay import SimulatedHost

LATENCIES = Latencies(plan=0, search=0.1, page=0, analysis=0.3, report=0)
LEASE = int(PRODUCTION_LEASES["LEASE_SECONDS"])
# How host B is cut off: from the database, from the broker, or both; and whether a beat runs on it too.
CUTS = {
    "whole host": (True, True, False),
    "broker only": (False, True, False),
    "database only": (True, False, False),
    "the host of one of two beats": (True, True, True),
}


@dataclass
class Partition:
    cut: str
    undisturbed: float  # seconds, the 3x3 on both hosts
    disturbed: float  # seconds, the 3x3 with host B cut off
    cut_for: float  # seconds host B stayed cut off (until host A had finished the research)
    unchanged: bool  # host B's late steps left the finished research as it was

    @property
    def delay(self) -> float:
        return self.disturbed - self.undisturbed

    @property
    def holds(self) -> bool:
        return self.unchanged and self.delay <= LEASE


def footprint(research_id: str) -> tuple:
    """Everything a late step could add to or change in a finished research."""
    from collections import Counter

    from research.models import Document, Event, Extract, ReportSection, Research, SerpQuery, Website

    research = Research.objects.get(pk=research_id)
    return (
        research.status,
        research.pending_queries,
        research.last_event_seq,
        research.report_version,
        Event.objects.filter(research=research).count(),
        Extract.objects.filter(research=research).count(),
        Document.objects.filter(research=research).count(),
        ReportSection.objects.filter(research=research).count(),
        sorted(Counter(Website.objects.filter(research=research).values_list("status", flat=True)).items()),
        sorted(Counter(SerpQuery.objects.filter(research=research).values_list("status", flat=True)).items()),
    )


def _analysing_on(research_id: str, host: str) -> bool:
    from research.models import Website

    return Website.objects.filter(research_id=research_id, status="analyzing", claimed_by__contains=f"{host}:").exists()


def _idle(host: str) -> bool:
    """Whether the host's workers answer and run no task (its late steps have ended)."""
    from researchsite.celery import app

    active = app.control.inspect(timeout=1).active() or {}
    theirs = [tasks for name, tasks in active.items() if name.endswith(f"@{host}")]
    return bool(theirs) and not any(theirs)


def cut_off(stack: Any, user: Any, cut: str) -> Partition:
    database, broker, beat_on_b = CUTS[cut]
    stack.fakes.prepare(LATENCIES)
    host_b = SimulatedHost("host-b", stack.database_url, stack.redis_url)
    try:
        with ExitStack() as running:
            running.enter_context(stack.workers(1, 6, "bench-a-", env={**PRODUCTION_LEASES, "WORKER_HOST": "host-a"}))
            running.enter_context(stack.workers(1, 6, "bench-b-", env=host_b.env(PRODUCTION_LEASES)))
            running.enter_context(stack.beat({**PRODUCTION_LEASES, "WORKER_HOST": "host-a"}))
            if beat_on_b:
                running.enter_context(stack.beat(host_b.env(PRODUCTION_LEASES)))
            running.callback(host_b.restore)  # before the workers stop: a cut host's worker cannot stop cleanly
            first, queued = _run(user, 3, 3)
            engine.wait(first, 300)
            _check_exact(first, 3, 3)
            undisturbed = _wall(first, queued)
            second, queued = _run(user, 3, 3)
            wait_until(lambda: _analysing_on(second, "host-b"), 120, "host B analysing pages", interval=0.05)
            host_b.cut(database=database, redis=broker)
            cut_at = time.monotonic()
            engine.wait(second, 15 * LEASE)
            cut_for = time.monotonic() - cut_at
            _check_exact(second, 3, 3)
            finished = footprint(second)
            host_b.restore()
            wait_until(lambda: _idle("host-b"), 2 * LEASE, "host B's late steps to end")
            return Partition(cut, undisturbed, _wall(second, queued), cut_for, footprint(second) == finished)
    finally:
        host_b.close()
        purge()
