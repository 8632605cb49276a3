"""Many hosts: a host of workers cut off from the network mid-research (devtools/relay.py), its leases lapsing while
it still runs. The other host finishes the research while it is still cut off (nothing waits for it): exactly, its
events gap-free, one report, no event or finding twice. Then the host comes back and its steps finish late: the
research is left exactly as it was."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass

import pytest

from bench.partitions import footprint
from devtools.processes import wait_until
from devtools.relay import SimulatedHost
from devtools.servers import WorkerPool, celery_app_for, process_env
from research.models import (
    Document,
    Event,
    EventType,
    Extract,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record.planning import total_queries
from tests.support.e2e import WORKER_ENV, queue_research, wait_finished
from tests.support.private_services import Beat, PrivateRedis

LEASE = 4
# Test-sized leases: a lease lapses in LEASE seconds, the sweeper looks every second. A session idle in a
# transaction on the cut host is ended by PostgreSQL after a little more than a lease, so its row locks go with it.
PARTITION_ENV = {
    "LEASE_SECONDS": str(LEASE),
    "SWEEP_INTERVAL": "1",
    "MAX_ATTEMPTS": "5",
    "QUEUE_GRACE_SECONDS": str(LEASE),
    "DB_IDLE_IN_TRANSACTION_TIMEOUT": str(LEASE + 1),
}


@dataclass
class Fleet:
    redis: PrivateRedis
    host_b: SimulatedHost
    pools: list[WorkerPool]
    beats: list[Beat]

    def start(self, owner, breadth: int, depth: int) -> str:
        return queue_research(celery_app_for(self.redis.url), owner, breadth, depth)

    def wait_idle(self, host: str) -> None:
        """Until the host's workers run no task (its steps that were cut off have finished, late)."""
        app = celery_app_for(self.redis.url)

        def idle() -> bool:
            active = app.control.inspect(timeout=1).active() or {}
            theirs = [tasks for name, tasks in active.items() if name.endswith(f"@{host}")]
            return bool(theirs) and not any(theirs)

        wait_until(idle, timeout=90, message=f"{host}'s workers idle")

    def stop(self) -> list[str]:
        """Stop everything the fleet started; what is left of it afterwards (nothing, or the test fails)."""
        processes = [process for pool in self.pools for process in pool.processes]
        processes += [beat.process for beat in self.beats if beat.process is not None]
        processes += [self.redis.process] if self.redis.process is not None else []
        relays = (self.host_b.database, self.host_b.redis)
        self.host_b.restore()  # so that its workers can stop cleanly
        for beat in self.beats:
            beat.stop()
        for pool in self.pools:
            pool.stop()
        self.host_b.close()
        self.redis.stop()
        left = [f"process {process.args!r}" for process in processes if process.poll() is None]
        for relay in relays:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", relay.port), timeout=1):
                left.append(f"relay on port {relay.port} still accepting")
        alive = {thread.name for thread in threading.enumerate()}
        left += [f"thread relay-{relay.port}" for relay in relays if f"relay-{relay.port}" in alive]
        return left


def make_fleet(internet: dict[str, str], beat_on_b: bool) -> Fleet:
    """Two hosts of workers on one database and broker: host A direct, host B through relays the test cuts; a beat
    on host A, and with `beat_on_b` one on host B too (a beat beside each group of workers)."""
    redis = PrivateRedis().start()
    base = process_env({**WORKER_ENV, **internet, **PARTITION_ENV, "REDIS_URL": redis.url})
    host_b = SimulatedHost("host-b", base["DATABASE_URL"], redis.url)
    tag = uuid.uuid4().hex[:4]
    pools = [
        WorkerPool({**base, "WORKER_HOST": "host-a"}, count=1, concurrency=6, name=f"a{tag}").start(),
        WorkerPool(host_b.env(base), count=1, concurrency=6, name=f"b{tag}").start(),
    ]
    beats = [Beat({**base, "WORKER_HOST": "host-a"}).start()]
    if beat_on_b:
        beats.append(Beat(host_b.env(base)).start())
    return Fleet(redis, host_b, pools, beats)


def assert_exact_and_once(research_id: str, breadth: int, depth: int) -> None:
    """Complete with its exact totals, events numbered without a gap, one report, and nothing stored twice."""
    research = Research.objects.get(pk=research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    queries = SerpQuery.objects.filter(research=research)
    assert queries.count() == queries.filter(status=QueryStatus.DONE).count() == total_queries(breadth, depth)
    assert not Website.objects.filter(
        research=research, status__in=[WebsiteStatus.PENDING, WebsiteStatus.SCRAPING, WebsiteStatus.ANALYZING]
    ).exists()
    assert Document.objects.filter(research=research, kind="report").count() == 1
    seqs = list(Event.objects.filter(research=research).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, research.last_event_seq + 1)), "events are numbered without a gap"
    for once in (EventType.REPORT_WRITING_START, EventType.REPORT_WRITING_SUCCESSFUL, EventType.RESEARCH_STARTED):
        assert Event.objects.filter(research=research, type=once).count() == 1, once
    analysed = Counter(
        Event.objects.filter(research=research, type=EventType.ANALYZED).values_list("data__website_id", flat=True)
    )
    assert analysed and max(analysed.values()) == 1, "a website analysed twice"
    # findings only of analysed websites: a late analysis never lands beside the one redone
    with_findings = set(Extract.objects.filter(research=research).values_list("website_id", flat=True))
    done = set(Website.objects.filter(research=research, status=WebsiteStatus.ANALYZED).values_list("pk", flat=True))
    assert with_findings <= done
    assert with_findings <= set(analysed)


def run_time(research_id: str) -> float:
    research = Research.objects.get(pk=research_id)
    return (research.finished_at - research.created_at).total_seconds()


# How host B is cut off: from the database, from the broker, or both; and whether a beat runs on it too.
CUTS = {
    "whole host": (True, True, False),
    "broker only": (False, True, False),
    "database only": (True, False, False),
    "the host of a beat": (True, True, True),
}


@pytest.mark.parametrize("cut", list(CUTS))
def test_a_host_cut_off_for_longer_than_a_lease_changes_nothing_when_it_returns(
    cut, internet, transactional_db, research_model, user, fake_llm, fake_searx
) -> None:
    database, broker, beat_on_b = CUTS[cut]
    fake_llm.delays["website_analysis"] = 0.3
    fake_searx.delay = 0.1
    fleet = make_fleet(internet, beat_on_b)
    try:
        # given the time a 3x3 takes on the two hosts undisturbed
        undisturbed = fleet.start(user, 3, 3)
        wait_finished(undisturbed, timeout=300)
        assert_exact_and_once(undisturbed, 3, 3)
        # when host B is cut off while it holds work, and stays cut off
        research_id = fleet.start(user, 3, 3)
        wait_until(
            lambda: (
                Website.objects.filter(
                    research_id=research_id, status=WebsiteStatus.ANALYZING, claimed_by__contains="host-b:"
                ).count()
                >= 2
            ),
            timeout=120,
            message="host B analysing pages",
        )
        fleet.host_b.cut(database=database, redis=broker)
        cut_at = time.monotonic()
        # then host A finishes the research while host B is still cut off: its leases lapse and its work moves on
        wait_finished(research_id, timeout=180)
        cut_for = time.monotonic() - cut_at
        assert_exact_and_once(research_id, 3, 3)
        finished = footprint(research_id)
        # and what host B finishes once it is back changes nothing
        fleet.host_b.restore()
        fleet.wait_idle("host-b")
        assert footprint(research_id) == finished
        assert_exact_and_once(research_id, 3, 3)
        delay = run_time(research_id) - run_time(undisturbed)
        print(f"partition, {cut}: undisturbed {run_time(undisturbed):.1f} s, cut {cut_for:.1f} s, delay {delay:.1f} s")
    finally:
        left = fleet.stop()
    # and nothing the test started is left: no worker, beat or Redis process, no relay or its thread
    assert left == []
