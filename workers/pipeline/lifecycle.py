"""A research's life: start, cancel, fail critically (with an error output), and the time budget."""

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from research.events import record_event
from research.models import (
    ACTIVE_STATUSES,
    Document,
    DocumentKind,
    EventType,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.planning import total_queries
from workers.pipeline.locks import research_transaction, worker_name

log = logging.getLogger(__name__)

UNFINISHED_QUERIES = [QueryStatus.PENDING, QueryStatus.SEARCHING, QueryStatus.SCRAPING]
UNFINISHED_WEBSITES = [WebsiteStatus.PENDING, WebsiteStatus.SCRAPING, WebsiteStatus.ANALYZING]


def start_research(research_id: str) -> None:
    """Claim a queued research (queued → running) and queue the planning of its top-level queries."""
    from workers import tasks

    with transaction.atomic():
        research = Research.objects.select_for_update().filter(pk=research_id).first()
        if research is None or research.status != ResearchStatus.QUEUED:
            return  # deleted, cancelled, or a duplicate delivery: the first one did the work
        planned = total_queries(research.breadth, research.depth)
        Research.objects.filter(pk=research.pk).update(
            status=ResearchStatus.RUNNING,
            started_at=timezone.now(),
            pending_queries=planned,
            claimed_at=timezone.now(),
            claimed_by=worker_name(),
            attempts=0,  # the sweeper's re-queues of the start are over; the planning's count from zero
        )
        record_event(
            research.pk,
            EventType.RESEARCH_STARTED,
            {"breadth": research.breadth, "depth": research.depth, "queries_planned": planned},
        )
        transaction.on_commit(lambda: tasks.plan_queries_task.delay(research_id, None), robust=True)


def start_failed(research_id: Any, error: BaseException) -> None:
    """The research could not start (retries or sweeper attempts exhausted): it fails with an error output."""
    fail_research(
        research_id,
        reason="start_failed",
        what=f"The research could not start: {error}",
        impact="Nothing was researched.",
    )


def running_research(research_id: Any) -> Research | None:
    """The research if work on it should go on: running and within its time budget; else None.

    A research found past its budget is failed here, so the budget holds even when nothing else notices.
    """
    research = Research.objects.filter(pk=research_id).first()
    if research is None or research.status != ResearchStatus.RUNNING:
        return None
    if research.started_at and timezone.now() - research.started_at > timedelta(seconds=settings.RESEARCH_TIME_BUDGET):
        fail_research(
            research.pk,
            reason="time_budget",
            what=f"The research ran past its time budget of {settings.RESEARCH_TIME_BUDGET} seconds.",
            impact="Queries that had not finished were stopped; the report was not written.",
        )
        return None
    spent = research.prompt_tokens + research.completion_tokens
    if settings.RESEARCH_TOKEN_BUDGET and spent > settings.RESEARCH_TOKEN_BUDGET:
        fail_research(
            research.pk,
            reason="token_budget",
            what=f"The research used {spent} tokens, past its budget of {settings.RESEARCH_TOKEN_BUDGET}.",
            impact="Queries that had not finished were stopped; the report was not written.",
        )
        return None
    return research


def cancel_research(research_id: Any) -> bool:
    """Cancel an unfinished research: queued work finds it cancelled and stops. False if already finished."""
    cancellable = [*ACTIVE_STATUSES, ResearchStatus.DRAFT, ResearchStatus.AWAITING_ANSWERS]
    now = timezone.now()
    # The status alone first: from this commit on, no step's tree transaction can land (tree_writes.py).
    with research_transaction(research_id):
        if not Research.objects.filter(pk=research_id, status__in=cancellable).update(
            status=ResearchStatus.CANCELLED, finished_at=now
        ):
            return False
    stop_unfinished(research_id, now, EventType.RESEARCH_CANCELLED, {"by": "user"})
    return True


def fail_research(research_id: Any, reason: str, what: str, impact: str) -> bool:
    """End the research as failed with an error-output.md; False if it had already ended."""
    from workers.pipeline.error_output import build_error_output

    now = timezone.now()
    error = f"{what} {impact}"
    with research_transaction(research_id):
        if not Research.objects.filter(pk=research_id, status__in=ACTIVE_STATUSES).update(
            status=ResearchStatus.FAILED, finished_at=now, error=error[:4000]
        ):
            return False
        # Written before unfinished rows are stopped, so it shows the states the failure found them in.
        markdown = build_error_output(research_id, what, impact)
        Document.objects.update_or_create(
            research_id=research_id,
            kind=DocumentKind.ERROR_OUTPUT,
            defaults={"markdown": markdown, "stats": {"reason": reason}},
        )
    stop_unfinished(research_id, now, EventType.RESEARCH_FAILED, {"reason": reason, "error": error[:1000]})
    log.warning("research %s failed (%s): %s", research_id, reason, what)
    return True


def stop_unfinished(research_id: Any, now: Any, event_type: str | None = None, data: dict | None = None) -> None:
    """Mark an ended research's unfinished websites and queries cancelled, then record how it ended.

    Runs after the status change has committed, in the tree lock order (websites, queries, each in key order,
    then the research row for the event), so it cannot deadlock with a step that is finishing. The sweeper
    runs it again for a research whose worker died between the two transactions.
    """
    with transaction.atomic():
        websites = Website.objects.select_for_update().filter(research_id=research_id, status__in=UNFINISHED_WEBSITES)
        stopped = list(websites.order_by("pk").values_list("pk", flat=True))
        Website.objects.filter(pk__in=stopped, status__in=UNFINISHED_WEBSITES).update(
            status=WebsiteStatus.CANCELLED, finished_at=now
        )
        queries = SerpQuery.objects.select_for_update().filter(research_id=research_id, status__in=UNFINISHED_QUERIES)
        stopped = list(queries.order_by("pk").values_list("pk", flat=True))
        SerpQuery.objects.filter(pk__in=stopped, status__in=UNFINISHED_QUERIES).update(
            status=QueryStatus.CANCELLED, finished_at=now
        )
        if event_type:
            record_event(research_id, event_type, data)
