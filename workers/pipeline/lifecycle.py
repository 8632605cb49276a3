"""A research's start, and the budgets that may end it (cancel and critical failure: research/lifecycle.py)."""

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from research import dispatch
from research.dispatch import QUEUED
from research.events import record_event
from research.lifecycle import fail_research
from research.models import EventType, Research, ResearchStatus
from research.planning import total_queries

log = logging.getLogger(__name__)


def start_research(research_id: str) -> None:
    """Claim a queued research (queued → running) and queue the planning of its top-level queries."""
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
            claimed_by=QUEUED,  # handed on to the planning of its top-level queries
            attempts=0,  # the sweeper's re-queues of the start are over; the planning's count from zero
        )
        record_event(
            research.pk,
            EventType.RESEARCH_STARTED,
            {"breadth": research.breadth, "depth": research.depth, "queries_planned": planned},
        )
        dispatch.queue_on_commit(dispatch.PLAN, research_id, None)


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
