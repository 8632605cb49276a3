"""Review the plan: a research started with `review_plan` waits in `awaiting_review` once its top-level queries
are planned (workers/pipeline/plan.py); its user replaces them (1 to 2 × breadth queries), then approves, and the
searches start. Nothing searches before the approval, and its time budget counts from it."""

from dataclasses import dataclass

from django.utils import timezone

from research.control import dispatch
from research.control.dispatch import QUEUED
from research.control.services import InvalidInput, ServiceError
from research.models import EventType, Research, ResearchStatus, SerpQuery
from research.record import transitions
from research.record.events import record_event
from research.record.planning import descendants
from research.record.transactions import research_transaction

MAX_QUERY_CHARS = 500
MAX_OBJECTIVE_CHARS = 2000


class NotUnderReview(ServiceError):
    """The research is not waiting for its plan to be reviewed."""


@dataclass(frozen=True)
class PlannedQuery:
    query: str
    objective: str


def _locked_under_review(research: Research) -> Research:
    locked = Research.objects.get(pk=research.pk)
    if locked.status != ResearchStatus.AWAITING_REVIEW:
        raise NotUnderReview(f"research is {locked.status}: only a plan awaiting review can be changed")
    return locked


def edit_plan(research: Research, queries: list[PlannedQuery]) -> list[SerpQuery]:
    """Replace the top-level queries under review; returns the new ones, in order."""
    with research_transaction(research.pk):
        locked = _locked_under_review(research)
        breadth, depth = locked.breadth or 1, locked.depth or 1
        if not 1 <= len(queries) <= 2 * breadth:
            raise InvalidInput(f"must hold 1 to {2 * breadth} queries (twice the breadth)", "queries")
        # Nothing has run under them (no search before the approval): they are replaced whole.
        SerpQuery.objects.filter(research_id=locked.pk, depth=1).delete()
        created = SerpQuery.objects.bulk_create(
            SerpQuery(research_id=locked.pk, depth=1, position=index, query=item.query, objective=item.objective)
            for index, item in enumerate(queries)
        )
        transitions.replan(locked.pk, len(created) * (1 + descendants(breadth, depth, 1)))
    return created


def approve_plan(research: Research) -> None:
    """Run the reviewed plan: the research runs, each top-level query's search is queued."""
    with research_transaction(research.pk):
        locked = _locked_under_review(research)
        top = list(SerpQuery.objects.filter(research_id=locked.pk, depth=1).order_by("position"))
        transitions.approve_plan(locked.pk)
        # Handed on to their searches now: their time in the queue counts from the approval, not the planning.
        SerpQuery.objects.filter(pk__in=[q.pk for q in top]).update(claimed_at=timezone.now(), claimed_by=QUEUED)
        record_event(
            locked.pk,
            EventType.PLAN_APPROVED,
            {"queries": [{"query_id": q.pk, "query": q.query, "objective": q.objective} for q in top]},
        )
        dispatch.SEARCH.each_on_commit([q.pk for q in top], locked.pk)
