"""How a research ends early: cancelled by its owner, or failed critically with an error output.

Both first change the research's status alone, in a transaction that takes the research row first. From that
commit on, no step's tree transaction can land (it checks the status at its end and rolls back). Then the
unfinished websites and queries are stopped, in the tree's lock order, and the ending is recorded as an event.
"""

import logging
from collections.abc import Callable, Collection
from typing import Any

from django.db import transaction
from django.utils import timezone

from research.live.error_output import build_error_output
from research.models import (
    ACTIVE_STATUSES,
    Document,
    DocumentKind,
    EventType,
    QueryStatus,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import transitions
from research.record.events import record_event
from research.record.transactions import research_transaction
from research.text.storable import storable
from research.types import ResearchId

log = logging.getLogger(__name__)

UNFINISHED_QUERIES = [QueryStatus.PENDING, QueryStatus.SEARCHING, QueryStatus.SCRAPING, QueryStatus.REVIEWING]
UNFINISHED_WEBSITES = [WebsiteStatus.PENDING, WebsiteStatus.SCRAPING, WebsiteStatus.ANALYZING]
CANCELLABLE = [*ACTIVE_STATUSES, ResearchStatus.DRAFT, ResearchStatus.AWAITING_ANSWERS]


def cancel_research(research_id: ResearchId, by: str = "user", statuses: Collection[str] = CANCELLABLE) -> bool:
    """Cancel an unfinished research (in one of `statuses`): queued work finds it cancelled and stops. False if
    it was not in one of them. `by`: who cancelled it, for the event ("user", or "expiry" for a plan left waiting)."""
    now = timezone.now()
    with research_transaction(research_id, ending=True):
        if not transitions.cancel(research_id, now, statuses):
            return False
    stop_unfinished(research_id, now, EventType.RESEARCH_CANCELLED, {"by": by})
    return True


def fail_research(
    research_id: ResearchId, reason: str, what: str, impact: str, fence: Callable[[], None] | None = None
) -> bool:
    """End the research as failed with an error-output.md; False if it had already ended. `fence`: called first
    in the transaction, by a step that fails the research it holds the lease of (it raises where the lease was
    taken over, and nothing is written)."""
    now = timezone.now()
    what = storable(what)  # a message may quote what a page or a model sent; the failure must be recordable
    error = f"{what} {impact}"
    with research_transaction(research_id, ending=True):
        if fence is not None:
            fence()
        if not transitions.fail(research_id, now, error, ACTIVE_STATUSES):
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


def stop_unfinished(research_id: ResearchId, now: Any, event_type: str | None = None, data: dict | None = None) -> None:
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
