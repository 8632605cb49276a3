"""Helpers for end-to-end tests: the worker processes' environment, starting a research through the API, waiting
for the workers to finish it, and for the stack to settle before the tables are flushed."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from research.live.snapshot import build_snapshot
from research.models import FINISHED_STATUSES, EventType, FollowUpQuestion, Research, ResearchStatus
from tests.support.snapshot_schema import validate_snapshot

if TYPE_CHECKING:
    import redis

WORKER_ENV = {
    "SECRET_KEY": "test-secret-key-" + "k" * 40,
    "LOG_LEVEL": "WARNING",
    "SCRAPE_DEADLINE": "3",
    "LLM_TIMEOUT": "10",
    "LLM_MAX_RETRIES": "3",
    "SEARCH_MAX_RETRIES": "1",
    "TASK_MAX_RETRIES": "1",
    # The limiter stays in the path but does not throttle: the fake web is one host standing in for many, and
    # tests/test_faults.py tests the limits themselves.
    "LLM_RATE_LIMIT": "500",
    "SEARCH_RATE_LIMIT": "500",
    "SCRAPE_PER_HOST_CONCURRENCY": "32",
    # A step registered by a module of its own (tests/test_step_registry.py).
    "CELERY_IMPORTS": "tests.support.dummy_step",
}


def start_research(
    api, breadth: int, depth: int, prompt: str = "How do heat pumps perform in cold climates?", **options
) -> str:
    """Start a research through the API; `options` are further fields of the request (mode, budget, ...)."""
    response = api.post(
        "/api/research/start",
        data=json.dumps(
            {
                "prompt": prompt,
                "questions": [{"question": "Which climates?", "answer": "Nordic"}],
                "breadth": breadth,
                "depth": depth,
                **options,
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    return response.json()["research_id"]


def queue_research(app, owner, breadth: int, depth: int) -> str:
    """Queue a research the way the API does, on the broker of `app` (a Celery app: a private stack's)."""
    research = Research.objects.create(
        owner=owner,
        prompt="How do heat pumps perform in cold climates?",
        title="Heat pumps",
        status=ResearchStatus.QUEUED,
        breadth=breadth,
        depth=depth,
        num_questions=1,
        claimed_at=timezone.now(),
    )
    FollowUpQuestion.objects.create(research=research, position=0, question="Which climates?", answer="Nordic")
    app.send_task("workers.tasks.start_research_task", args=[str(research.pk)])
    return str(research.pk)


# A research that fails or is cancelled records its ending event a moment after its status, in the transaction
# that stops its unfinished rows (research/control/lifecycle.py stop_unfinished).
ENDING_EVENTS = {
    ResearchStatus.FAILED: EventType.RESEARCH_FAILED,
    ResearchStatus.CANCELLED: EventType.RESEARCH_CANCELLED,
}


def wait_finished(research_id: str, timeout: float = 120) -> Research:
    """Wait for the research to end, and for failed or cancelled ones their ending event; its final snapshot, as
    the engine left it, must match the published schema."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        research = Research.objects.get(pk=research_id)
        ending = ENDING_EVENTS.get(research.status)
        if research.status in FINISHED_STATUSES and (ending is None or research.events.filter(type=ending).exists()):
            validate_snapshot(build_snapshot(research_id))
            return research
        time.sleep(0.1)
    research = Research.objects.get(pk=research_id)
    raise AssertionError(f"research still {research.status} after {timeout}s (pending={research.pending_queries})")


def queued_messages(conn: redis.Redis) -> int:
    """Messages waiting in the Celery queues of this run's Redis db."""
    keys = [*conn.scan_iter("celery*"), *conn.scan_iter("control*")]
    return sum(conn.llen(key) for key in keys if conn.type(key) == b"list")


def settle(conn: redis.Redis, timeout: float = 30) -> None:
    """Wait until no task is queued or running and every research's events have been pushed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = queued_messages(conn) or conn.hlen("unacked")
        behind = [
            r
            for r, seq in Research.objects.values_list("pk", "last_event_seq")
            if seq and int(conn.get(f"push-seq:{r}") or 0) < seq
        ]
        if not busy and not behind:
            break
        time.sleep(0.1)
    time.sleep(2 * settings.PUSH_INTERVAL + 0.2)
