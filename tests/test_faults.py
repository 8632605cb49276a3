"""Fault injection on real processes: killed workers, restarted or emptied Redis, restarted PostgreSQL, a
rate-limiting model, hostile pages, leaked secrets. Each test runs its own workers and beat (the sweeper) on a
private Redis, so restarting or flushing it disturbs nothing else."""

import bisect
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
import yaml
from django.conf import settings

from devtools.fakes import Canary
from devtools.processes import ROOT, free_port, log_folder, stop_group, wait_until
from devtools.servers import WorkerPool, celery_app_for, process_env
from research.control.dispatch import waiting_steps
from research.control.lifecycle import cancel_research
from research.live.snapshot import build_snapshot
from research.models import (
    Document,
    Event,
    QueryStatus,
    ReportSection,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record.planning import total_queries
from tests.support.e2e import WORKER_ENV, queue_research, queued_messages, wait_finished
from tests.support.private_services import Beat, PrivatePostgres, PrivateRedis, peak_rss_mb

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RECOVERY_ENV = {"LEASE_SECONDS": "4", "SWEEP_INTERVAL": "1", "MAX_ATTEMPTS": "5", "QUEUE_GRACE_SECONDS": "4"}
UNFINISHED_QUERY = [QueryStatus.PENDING, QueryStatus.SEARCHING, QueryStatus.SCRAPING]
UNFINISHED_WEBSITE = [WebsiteStatus.PENDING, WebsiteStatus.SCRAPING, WebsiteStatus.ANALYZING]


@dataclass
class Stack:
    redis: PrivateRedis
    pool: WorkerPool
    beat: Beat

    @property
    def app(self):
        return celery_app_for(self.redis.url)

    def start(self, owner, breadth: int, depth: int) -> str:
        """Queue a research the way the API does, on this stack's broker."""
        return queue_research(self.app, owner, breadth, depth)

    def undisturbed(self, owner, breadth: int, depth: int) -> str:
        """A research run to its end with nothing done to the stack: the time a disturbed one is held to."""
        research_id = self.start(owner, breadth, depth)
        wait_finished(research_id, timeout=300)
        assert_complete_and_exact(research_id, breadth, depth)
        return research_id

    def stop(self) -> None:
        self.beat.stop()
        self.pool.stop()
        self.redis.stop()


def make_stack(
    internet: dict[str, str], extra: dict[str, str] | None = None, workers: int = 2, concurrency: int = 6
) -> Stack:
    private = PrivateRedis().start()
    env = process_env({**WORKER_ENV, **internet, **RECOVERY_ENV, "REDIS_URL": private.url, **(extra or {})})
    pool = WorkerPool(env, count=workers, concurrency=concurrency, name=f"f{uuid.uuid4().hex[:4]}").start()
    return Stack(private, pool, Beat(env).start())


@pytest.fixture
def stack(internet, transactional_db, research_model) -> Iterator[Stack]:
    built = make_stack(internet)
    yield built
    built.stop()


def assert_complete_and_exact(research_id: str, breadth: int, depth: int) -> None:
    research = Research.objects.get(pk=research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert SerpQuery.objects.filter(research=research, status=QueryStatus.DONE).count() == total_queries(breadth, depth)
    assert SerpQuery.objects.filter(research=research).count() == total_queries(breadth, depth)
    assert Document.objects.filter(research=research, kind="report").count() == 1
    assert not SerpQuery.objects.filter(research=research, status__in=UNFINISHED_QUERY).exists()
    assert not Website.objects.filter(research=research, status__in=UNFINISHED_WEBSITE).exists()


def test_kill_9_worker_mid_research(stack, user, fake_llm, fake_searx) -> None:
    # given a research in full flight on two workers
    fake_llm.delays["website_analysis"] = 0.4
    fake_searx.delay = 0.2
    research_id = stack.start(user, 3, 2)
    # when one of them is killed with SIGKILL while working
    kill_a_busy_worker(stack, research_id)
    # then the other one and the sweeper finish the research exactly
    wait_finished(research_id, timeout=180)
    assert_complete_and_exact(research_id, 3, 2)
    assert Event.objects.filter(research_id=research_id, type="report_writing_start").count() == 1


def test_kill_9_worker_while_report_sections_are_written(stack, user, fake_llm) -> None:
    # given a research whose report sections take a while to write, on two workers
    fake_llm.delays["report_section"] = 2
    research_id = stack.start(user, 2, 2)
    # when a worker is killed while sections are being written
    kill_a_busy_worker(
        stack,
        research_id,
        ready=lambda: ReportSection.objects.filter(research_id=research_id, status="writing").exists(),
    )
    # then the research completes, with every section written exactly once and one report
    wait_finished(research_id, timeout=180)
    assert_complete_and_exact(research_id, 2, 2)
    sections = list(ReportSection.objects.filter(research_id=research_id).values_list("position", "status"))
    assert sections and all(status == "written" for _, status in sections)
    written = Event.objects.filter(research_id=research_id, type="report_section_written")
    assert sorted(written.values_list("data__position", flat=True)) == sorted(position for position, _ in sections)
    for kind in ("report_writing_start", "report_writing_successful"):
        assert Event.objects.filter(research_id=research_id, type=kind).count() == 1


def kill_a_busy_worker(stack: Stack, research_id: str, ready: Any = None) -> None:
    """SIGKILL a worker process that has a task of the research in flight."""
    wait_until(
        ready or (lambda: Website.objects.filter(research_id=research_id, status="analyzing").count() >= 3),
        timeout=60,
        message="work in flight",
    )
    # A worker answers the inspection when it gets to it, a second or two late under load: by then the tasks seen
    # in flight may have ended, so it asks again (a research has tasks in flight until it ends).
    for _ in range(5):
        active = stack.app.control.inspect(timeout=2).active() or {}
        busy = [
            i
            for i, _ in enumerate(stack.pool.processes)
            if any(name.startswith(f"{stack.pool.name}{i}-") and tasks for name, tasks in active.items())
        ]
        if busy:
            stack.pool.kill(busy[0])
            return
    raise AssertionError(f"no worker had a task in flight: {active}")


def run_time(research_id: str) -> float:
    research = Research.objects.get(pk=research_id)
    return (research.finished_at - research.created_at).total_seconds()


# What a deployment runs with: the defaults of researchsite/settings.py, not test-sized leases.
PRODUCTION_LEASES = {"LEASE_SECONDS": "60", "SWEEP_INTERVAL": "15", "MAX_ATTEMPTS": "3", "QUEUE_GRACE_SECONDS": "600"}


@contextmanager
def production_stack(
    internet: dict[str, str], fake_llm: Any, fake_searx: Any, workers: int = 2, concurrency: int = 6
) -> Iterator[Stack]:
    """A stack with a deployment's leases and sweep period, and the analysis and search latencies the tests of
    what a fault costs under them share."""
    stack = make_stack(internet, PRODUCTION_LEASES, workers=workers, concurrency=concurrency)
    try:
        fake_llm.delays["website_analysis"] = 0.4
        fake_searx.delay = 0.2
        yield stack
    finally:
        stack.stop()


@pytest.mark.timeout(900)
def test_kill_9_worker_with_production_leases_costs_about_a_minute(
    internet, transactional_db, research_model, user, fake_llm, fake_searx
) -> None:
    with production_stack(internet, fake_llm, fake_searx) as stack:
        # given the time a 3x3 takes undisturbed on this stack
        undisturbed = stack.undisturbed(user, 3, 3)
        # when a worker is killed in the middle of another 3x3
        research_id = stack.start(user, 3, 3)
        kill_a_busy_worker(stack, research_id)
        wait_finished(research_id, timeout=400)
        # then the heartbeat-less leases lapse, the sweeper runs the steps elsewhere, and the research is exact,
        # within 90 s of its undisturbed time (a lease of 60 s, a sweep every 15 s)
        assert_complete_and_exact(research_id, 3, 3)
        print(f"3x3 undisturbed {run_time(undisturbed):.1f} s, with a worker killed {run_time(research_id):.1f} s")
        assert run_time(research_id) <= run_time(undisturbed) + 90, (run_time(research_id), run_time(undisturbed))


def kill_database_connections() -> int:
    """Terminate every other connection to the test database (the workers', beat's, their heartbeats'): what a
    PostgreSQL restart, a failover or a pooler restart does to the app. Returns how many went."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_database_connections_killed_twice_cost_a_retry_not_a_lease(
    internet, transactional_db, research_model, user, fake_llm, fake_searx
) -> None:
    with production_stack(internet, fake_llm, fake_searx) as stack:
        # given the time a 3x3 takes undisturbed on this stack, with production leases
        undisturbed = stack.undisturbed(user, 3, 3)
        # when every database connection of the app is killed, twice, in the middle of another 3x3
        research_id = stack.start(user, 3, 3)
        analysed = Website.objects.filter(research_id=research_id, status="analyzed")
        killed = []
        for at in (4, 14):
            wait_until(lambda at=at: analysed.count() >= at, timeout=120, message=f"{at} websites analysed")
            killed.append(kill_database_connections())
        wait_finished(research_id, timeout=400)
        # then the steps that hit a dead connection ran again at once on fresh ones: the research is exact, within
        # 30 s of its undisturbed time (a lapsed lease alone would cost 60 s)
        assert_complete_and_exact(research_id, 3, 3)
        print(
            f"3x3 undisturbed {run_time(undisturbed):.1f} s, with {killed} connections killed "
            f"{run_time(research_id):.1f} s"
        )
        assert min(killed) > 0
        assert run_time(research_id) <= run_time(undisturbed) + 30, (run_time(research_id), run_time(undisturbed))


def test_redis_emptied_mid_research_loses_no_work(
    internet, transactional_db, research_model, user, fake_llm, fake_searx
) -> None:
    # one worker of 2 slots, so that steps wait on the broker
    with production_stack(internet, fake_llm, fake_searx, workers=1, concurrency=2) as stack:
        # given the time a 2x2 takes undisturbed on this stack, with production leases
        undisturbed = stack.undisturbed(user, 2, 2)
        # when Redis is emptied (a restart without persistence) in the middle of another 2x2, steps waiting on it
        research_id = stack.start(user, 2, 2)
        broker = redis.Redis.from_url(stack.redis.url)
        wait_until(lambda: queued_messages(broker) >= 3, timeout=120, message="3 steps waiting on the broker")
        lost = queued_messages(broker)
        broker.flushall()
        wait_finished(research_id, timeout=400)
        # then the sweeper finds the work whose messages went with it (two sweeps after the broker stands empty),
        # and the research is exact within 90 s of its undisturbed time
        assert_complete_and_exact(research_id, 2, 2)
        print(
            f"2x2 undisturbed {run_time(undisturbed):.1f} s, with Redis emptied of {lost} messages "
            f"{run_time(research_id):.1f} s"
        )
        assert run_time(research_id) <= run_time(undisturbed) + 90, (run_time(research_id), run_time(undisturbed))


def test_a_queue_longer_than_the_lease_fails_no_healthy_research(
    internet, transactional_db, research_model, user, fake_llm
) -> None:
    # given one worker with two threads, leases of 2 s and no second chance: every step waits far longer than
    # a lease in the queue behind the others
    stack = make_stack(
        internet,
        {"LEASE_SECONDS": "2", "SWEEP_INTERVAL": "1", "MAX_ATTEMPTS": "1", "QUEUE_GRACE_SECONDS": "600"},
        workers=1,
        concurrency=2,
    )
    try:
        fake_llm.delays["website_analysis"] = 0.1
        # when two researches run at once
        first, second = stack.start(user, 4, 2), stack.start(user, 2, 2)
        # then both complete exactly: queue time is no attempt, and live steps keep their leases by heartbeat
        for research_id, breadth in ((first, 4), (second, 2)):
            wait_finished(research_id, timeout=300)
            assert_complete_and_exact(research_id, breadth, 2)
        assert max(run_time(first), run_time(second)) > 2 * 2  # the backlog outlasted the leases
    finally:
        stack.stop()


@pytest.mark.timeout(600)
def test_a_small_research_is_not_stuck_behind_a_large_one(
    internet, transactional_db, research_model, user, other_user, fake_llm
) -> None:
    # given one worker of 4 slots, and the time a 1x1 takes on it alone
    stack = make_stack(internet, workers=1, concurrency=4)
    large = None
    try:
        fake_llm.delays["website_analysis"] = 0.3
        solo = stack.start(other_user, 1, 1)
        wait_finished(solo, timeout=120)
        # when another user's 1x1 starts while a 6x3 has a long backlog of steps
        large = stack.start(user, 6, 3)
        wait_until(lambda: waiting_steps(large) >= 150, timeout=120, message="a backlog of 150 steps")
        small = stack.start(other_user, 1, 1)
        wait_finished(small, timeout=300)
        # then the 1x1 finishes within 3 times its solo time + 10 s, while the 6x3 is still running
        print(f"1x1 alone {run_time(solo):.1f} s, beside a 6x3 {run_time(small):.1f} s")
        assert Research.objects.get(pk=small).status == ResearchStatus.COMPLETED
        assert Research.objects.get(pk=large).status == ResearchStatus.RUNNING
        assert run_time(small) <= 3 * run_time(solo) + 10, (run_time(small), run_time(solo))
    finally:
        if large is not None:
            cancel_research(large)
        stack.stop()


def test_redis_restart_mid_research(stack, user, fake_llm) -> None:
    fake_llm.delays["website_analysis"] = 0.3
    research_id = stack.start(user, 3, 2)
    wait_until(lambda: Website.objects.filter(research_id=research_id).count() >= 7, 60, "websites")
    # when Redis goes away with every queued and unacknowledged message in it, the research still running
    stack.redis.stop()
    assert Research.objects.get(pk=research_id).status == ResearchStatus.RUNNING
    time.sleep(2)
    stack.redis.start()
    # then
    wait_finished(research_id, timeout=180)
    assert_complete_and_exact(research_id, 3, 2)


def test_queued_messages_deleted_mid_research(stack, user, fake_llm) -> None:
    fake_llm.delays["website_analysis"] = 0.3
    research_id = stack.start(user, 3, 2)
    wait_until(lambda: Website.objects.filter(research_id=research_id).count() >= 7, 60, "websites")
    client = redis.Redis.from_url(stack.redis.url)
    deleted = client.delete("celery", "unacked", "unacked_index")
    assert deleted >= 1
    wait_finished(research_id, timeout=180)
    assert_complete_and_exact(research_id, 3, 2)


def test_postgres_restart_mid_research(internet, research_model, fake_llm) -> None:
    # given a whole private stack: its own PostgreSQL, Redis, workers and beat
    postgres = PrivatePostgres().start()
    private = PrivateRedis().start()
    env = process_env(
        {**WORKER_ENV, **internet, **RECOVERY_ENV, "REDIS_URL": private.url, "DATABASE_URL": postgres.url}
    )
    manage = [sys.executable, "manage.py"]
    pool = beat = None
    try:
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        subprocess.run(
            [*manage, "createsuperuser", "--noinput", "--username", "pg", "--email", "pg@example.com"],
            cwd=ROOT,
            env={**env, "DJANGO_SUPERUSER_PASSWORD": "pw-long-enough-42"},
            check=True,
        )
        pool = WorkerPool(env, count=2, concurrency=6, name="pg").start()
        beat = Beat(env).start()
        fake_llm.delays["website_analysis"] = 0.3
        research_id = subprocess.run(
            [*manage, "start_research", "--user", "pg", "--prompt", "Heat pumps", "--breadth", "3", "--depth", "2"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

        def count(sql: str) -> int:
            return postgres.query(sql, research_id)[0][0]

        wait_until(lambda: count("select count(*) from research_website where research_id = %s") >= 7, 60, "websites")
        # when PostgreSQL restarts under the workers, the research still running
        assert postgres.query("select status from research_research where id = %s", research_id)[0][0] == "running"
        postgres.restart()
        # then the research ends (completed, or failed with an error output) and nothing is left running
        wait_until(
            lambda: (
                postgres.query("select status from research_research where id = %s", research_id)[0][0]
                in ("completed", "failed")
            ),
            timeout=180,
            message="research to end",
        )
        status = postgres.query("select status from research_research where id = %s", research_id)[0][0]
        kind = "report" if status == "completed" else "error_output"
        assert count(f"select count(*) from research_document where research_id = %s and kind = '{kind}'") == 1
        assert (
            count(
                "select count(*) from research_serpquery where research_id = %s "
                "and status in ('pending', 'searching', 'scraping')"
            )
            == 0
        )
        assert (
            count(
                "select count(*) from research_website where research_id = %s "
                "and status in ('pending', 'scraping', 'analyzing')"
            )
            == 0
        )
        if status == "completed":
            assert count("select count(*) from research_serpquery where research_id = %s") == total_queries(3, 2)
    finally:
        for process in (beat, pool):
            if process is not None:
                process.stop()
        private.stop()
        postgres.stop()


def record_admissions(url: str, prefix: str, admitted: list[int], ready: threading.Event) -> None:
    """Every call the shared limiter admits, as the score (ms on the Redis clock) of its script's ZADD to a
    `prefix` key, seen through MONITOR; returns when that Redis goes away."""
    try:
        with redis.Redis.from_url(url).monitor() as monitor:
            ready.set()
            for command in monitor.listen():
                words = command["command"].split()
                if command["client_type"] == "lua" and words[:1] == ["ZADD"] and words[1].startswith(prefix):
                    admitted.append(int(float(words[2])))
    except (redis.RedisError, OSError):
        return


def test_rate_limiter_holds_across_workers_with_half_the_calls_429(
    internet, transactional_db, research_model, user, fake_llm
) -> None:
    # given two workers sharing a limit of 5 model calls a second, and a model answering 429 to every other call
    limit = 5
    built = make_stack(internet, {"LLM_RATE_LIMIT": str(limit), "LLM_MAX_RETRIES": "8"})
    admitted: list[int] = []
    ready = threading.Event()
    watcher = threading.Thread(target=record_admissions, args=(built.redis.url, "ratelimit:llm:", admitted, ready))
    watcher.start()
    try:
        assert ready.wait(10)
        fake_llm.fail_every(2, status=429, retry_after=0)
        # when
        research_id = built.start(user, 2, 2)
        wait_finished(research_id, timeout=240)
    finally:
        built.beat.stop()
        built.pool.stop()
        built.redis.stop()
        watcher.join(timeout=10)
    # then it completed, every call the model saw had been admitted by the one limiter in Redis (a per-process
    # limiter admits nothing there)...
    assert_complete_and_exact(research_id, 2, 2)
    times = sorted(r.time for r in fake_llm.requests if r.path.endswith("/chat/completions"))
    assert len(times) > 20
    assert len(admitted) == len(times)
    # ...and no window of the limiter (1000 ms on the Redis clock, which admissions are counted by) admitted more
    # than the limit: exact, as the limiter counts, with no allowance for scheduling.
    admitted.sort()
    busiest_window = max(bisect.bisect_right(admitted, start + 999) - i for i, start in enumerate(admitted))
    assert busiest_window <= limit, f"{busiest_window} calls admitted within one second"
    # At the model, arrivals lag admissions by up to a second on a loaded machine, so five seconds may see one
    # more window's worth: 30 at most (a limiter per process let 40 through).
    busiest = max(sum(1 for t in times[i:] if t - start < 5.0) for i, start in enumerate(times))
    assert busiest <= 6 * limit, f"{busiest} calls within five seconds"
    # Over the whole run: fixed one-second windows let at most `limit` through each, so a span of S seconds holds
    # at most limit × (S + 1) calls (the first and last windows may be cut by the span's ends).
    span = times[-1] - times[0]
    assert len(times) <= limit * (span + 1), f"{len(times)} calls in {span:.1f} s"


@pytest.fixture
def patient_stack(internet, transactional_db, research_model) -> Iterator[Stack]:
    """A stack whose fetches may take 10 s instead of the tests' usual 3: with three test processes on two cores,
    reading the gzip bomb to its size cap once took longer than 3 s, and it failed as a timeout instead of as too
    large. The page that drips for 30 s still runs out of time."""
    built = make_stack(internet, {"SCRAPE_DEADLINE": "10"})
    yield built
    built.stop()


def test_hostile_pages_cost_nothing(patient_stack, user, fake_web, fake_searx) -> None:
    stack = patient_stack
    with Canary() as canary:
        # given search results that are all hostile in a different way
        hostile = {
            "/drip?seconds=30": "timeout",
            "/huge?mb=50": "too_large",
            "/gzip-bomb": "too_large",
            "/redirect-loop": "too_many_redirects",
            f"/redirect?to=http://127.0.0.1:{canary.port}/": "blocked_address",
            "/pdf-bomb": "too_large",
            "/binary": "content_type",
        }
        fake_searx.results_for = lambda q: (
            [fake_web.url + path for path in hostile] if "1." in q else [fake_web.url + "/hostile"]
        )
        before = [peak_rss_mb(p.pid) for p in stack.pool.processes]
        # when
        research_id = stack.start(user, 2, 1)
        wait_finished(research_id, timeout=120)
        # then each hostile page failed for its own reason, and the injection page was analysed as plain text
        assert_complete_and_exact(research_id, 2, 1)
        websites = Website.objects.filter(research_id=research_id)
        reasons = {w.url.removeprefix(fake_web.url): (w.status, w.failure_reason) for w in websites}
        assert {path: reasons[path] for path in hostile} == {
            path: (WebsiteStatus.FAILED, reason) for path, reason in hostile.items()
        }, reasons
        assert reasons["/hostile"] == (WebsiteStatus.ANALYZED, "")  # its text is data, not instructions
        report = Document.objects.get(research_id=research_id, kind="report").markdown
        assert "evil.example" not in report and "<script" not in report
        # a 50 MB page and a 1 GB gzip bomb leave each worker's peak memory within 100 MB of where it started
        after = [peak_rss_mb(p.pid) for p in stack.pool.processes]
        growth = [a - b for a, b in zip(after, before, strict=True)]
        assert max(growth) < 100, f"worker peak memory grew by {growth} MB (from {before})"
        assert canary.hits == 0


def test_openai_key_never_leaks(internet, transactional_db, research_model, user, api, fake_llm) -> None:
    # given workers holding a recognisable key, logging at INFO
    key = f"sk-canary-{uuid.uuid4().hex}"
    built = make_stack(internet, {"OPENAI_API_KEY": key, "LOG_LEVEL": "INFO"})
    seen_in_broker: list[bytes] = []
    stop = threading.Event()
    client = redis.Redis.from_url(built.redis.url)

    def watch_broker() -> None:  # every message published or in flight, as Flower would show it
        while not stop.is_set():
            seen_in_broker.extend(client.lrange("celery", 0, -1))
            seen_in_broker.extend(client.hvals("unacked"))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_broker)
    watcher.start()
    try:
        research_id = built.start(user, 2, 2)
        wait_finished(research_id, timeout=120)
    finally:
        stop.set()
        watcher.join()
        built.beat.stop()
        built.pool.stop()
        built.redis.stop()
    # then the workers did hold the key: every model call carried it, so finding it nowhere below means something
    calls = [r for r in fake_llm.requests if r.path.endswith("/chat/completions")]
    assert calls
    assert all({k.lower(): v for k, v in r.headers.items()}.get("authorization") == f"Bearer {key}" for r in calls)
    # and the key is nowhere: task messages, logs, events, snapshots, documents
    assert seen_in_broker and all(key.encode() not in message for message in seen_in_broker)
    logs = [path.read_text(errors="replace") for path in log_folder().glob(f"worker-{built.pool.name}*.log")]
    assert len(logs) == built.pool.count
    for log in logs:
        # the logs grepped are INFO logs, with a line for every task received and finished
        assert any("INFO" in line and "workers.tasks." in line for line in log.splitlines()), log[-2000:]
        assert key not in log
    assert key not in (log_folder() / "beat.log").read_text(errors="replace")
    events = json.dumps(list(Event.objects.filter(research_id=research_id).values_list("data", flat=True)))
    assert key not in events
    assert key not in json.dumps(build_snapshot(research_id))
    assert key not in api.get(f"/api/research/{research_id}").content.decode()
    assert not Document.objects.filter(research_id=research_id, markdown__contains=key).exists()
    assert settings.OPENAI_API_KEY not in events  # the test process's own key, too


FLOWER_FORMS = ["docker-compose.yml", "Makefile", "README.md"]


def flower_script(form: str, port: int) -> str:
    """The flower command of docker-compose.yml, the Makefile or the README's native commands as its shell runs
    it, on a free loopback port."""
    if form == "docker-compose.yml":
        command = yaml.safe_load((ROOT / form).read_text())["services"]["flower"]["command"]
        assert command[:2] == ["sh", "-c"], command
        script = command[2]
    elif form == "README.md":
        readme = (ROOT / form).read_text().replace("\\\n", " ")
        line = re.search(r"^\.venv/bin/(celery -A researchsite flower .+?)\s+#", readme, re.MULTILINE)
        assert line, "no native flower command in the README"
        script = line.group(1)
    else:
        recipe = re.search(r"^flower:.*\n\t(.+)$", (ROOT / form).read_text(), re.MULTILINE)
        assert recipe, "no flower target in the Makefile"
        script = recipe.group(1).replace("$(VENV)/bin/", "")
    if form != "docker-compose.yml":
        # the native commands run on the host itself: loopback only, as compose publishes its port
        assert "--address=127.0.0.1 " in script, script
    script = script.replace("$$", "$")  # compose and make both escape the shell's $ as $$
    script, bound = re.subn(r"--address=\S+ --port=5555\b", f"--address=127.0.0.1 --port={port}", script)
    assert bound == 1, script
    return script


def flower_env(**extra: str) -> dict[str, str]:
    # The commands call `celery` by name, as the image's PATH finds it.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = process_env({"SECRET_KEY": "k" * 50, "PATH": path})
    env.pop("FLOWER_BASIC_AUTH", None)
    return {**env, **extra}


def run_shell(script: str, env: dict[str, str], output: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    # A session of its own, so that stop_group stops flower too, whether or not sh exec'd it (flower outlived its
    # shell once and kept running after the tests).
    return subprocess.Popen(
        ["sh", "-c", script], cwd=ROOT, env=env, stdout=output, stderr=output, start_new_session=True
    )


@pytest.mark.parametrize("form", FLOWER_FORMS)
def test_flower_requires_credentials(form: str) -> None:
    # given Flower started the way compose (or make) starts it, with FLOWER_BASIC_AUTH in the environment
    port = free_port()
    log_folder().mkdir(parents=True, exist_ok=True)
    with open(log_folder() / "flower.log", "ab") as log:
        flower = run_shell(flower_script(form, port), flower_env(FLOWER_BASIC_AUTH="ops:s3cret-pass"), log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                anonymous = requests.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except requests.ConnectionError:
                assert flower.poll() is None, f"flower exited; see {log_folder() / 'flower.log'}"
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        # then only the credentials from the environment get in
        assert anonymous.status_code == 401
        assert requests.get(f"http://127.0.0.1:{port}/", auth=("ops", "wrong"), timeout=5).status_code == 401
        assert requests.get(f"http://127.0.0.1:{port}/", auth=("ops", "s3cret-pass"), timeout=5).status_code == 200
    finally:
        stop_group(flower)


@pytest.mark.parametrize("form", FLOWER_FORMS)
@pytest.mark.parametrize("credentials", [None, ""])
def test_flower_refuses_to_start_without_credentials(form: str, credentials: str | None) -> None:
    # given FLOWER_BASIC_AUTH unset, or set but empty
    env = flower_env() if credentials is None else flower_env(FLOWER_BASIC_AUTH=credentials)
    # when
    flower = run_shell(flower_script(form, free_port()), env)
    try:
        _, stderr = flower.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        stop_group(flower)
        pytest.fail("flower started without credentials")
    # then the shell stopped before running celery, and said why
    assert flower.returncode != 0
    assert b"FLOWER_BASIC_AUTH" in stderr, stderr


@pytest.mark.parametrize("form", FLOWER_FORMS)
def test_flower_refuses_to_start_with_the_env_example_password(form: str) -> None:
    # given the credentials .env.example ships, whose password everyone knows
    example = re.search(r"^FLOWER_BASIC_AUTH=(.+)$", (ROOT / ".env.example").read_text(), re.MULTILINE)
    assert example, "FLOWER_BASIC_AUTH is not in .env.example"
    # when
    flower = run_shell(flower_script(form, free_port()), flower_env(FLOWER_BASIC_AUTH=example.group(1)))
    try:
        _, stderr = flower.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        stop_group(flower)
        pytest.fail("flower started with the placeholder password")
    # then the settings it loads refused it, naming the variable
    assert flower.returncode != 0
    assert b"ImproperlyConfigured" in stderr and b"FLOWER_BASIC_AUTH" in stderr, stderr[-2000:]
