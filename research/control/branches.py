"""Cancel or retry one branch of a running (or finished) research: a query and the subtree below it; or dig
deeper into a finished research with a branch of its own.

Both follow the tree's lock order (workers/pipeline/tree_writes.py): websites, then queries, each in key order,
and the research row last. Steps that write the tree lock in that order too, and the planning of children locks
its parent query before the research row, so a cancel cannot deadlock with them.

Counting: `Research.pending_queries` counts the planned tree's nodes not yet counted off, each exactly once (a
done query counts 1; a failed or cancelled one 1 and its whole unplanned subtree). A cancel counts off what of
the query's subtree was not counted yet; a retry puts the query's subtree back. A retried query plans its
children anew after its earlier ones (positions `retries * breadth + i`), so its children of earlier attempts
(the "generations" below) are history, already counted off, and never counted again.
"""

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from research.control import dispatch
from research.control.dispatch import QUEUED
from research.control.lifecycle import UNFINISHED_QUERIES, UNFINISHED_WEBSITES
from research.control.services import ServiceError, hold_active_slot, lock_owner
from research.models import (
    FINISHED_STATUSES,
    Document,
    DocumentKind,
    EventType,
    MemoryItem,
    MemoryKind,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import transitions
from research.record.events import record_event
from research.record.planning import descendants
from research.types import ResearchId

SETTLED = (QueryStatus.FAILED, QueryStatus.CANCELLED)
RETRYABLE = SETTLED
STOPPED = "stop"  # a review's decision (adaptive mode): the branch goes no deeper
# A locked subtree that grew meanwhile (children planned between the read and the lock) is read again.
MAX_SUBTREE_READS = 5


class QueryNotFound(ServiceError):
    """No such query in this research."""


class QueryConflict(ServiceError):
    """The query or research is not in a state that allows the change (already cancelled, not failed, ended)."""


def cancel_query(research: Research, query_id: int) -> list[int]:
    """Cancel the query and every unfinished query below it; returns the ids whose status changed, query first."""
    _query(research, query_id)
    for _ in range(MAX_SUBTREE_READS):
        result = _cancel(research.pk, query_id)
        if result is not None:
            return result
    raise QueryConflict("the branch keeps growing; try again", "query_id")


def _cancel(research_id: ResearchId, query_id: int) -> list[int] | None:
    research = Research.objects.only("breadth", "depth", "status").get(pk=research_id)
    if research.status != ResearchStatus.RUNNING:
        raise QueryConflict(f"research is {research.status}: only a running research's queries can be cancelled")
    breadth, depth = research.breadth or 1, research.depth or 1
    subtree = _subtree_ids(research_id, query_id)
    now = timezone.now()
    with transaction.atomic():
        # Lock order: websites, then queries, then the research row.
        list(
            Website.objects.select_for_update()
            .filter(query_id__in=subtree, status__in=UNFINISHED_WEBSITES)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        rows = list(SerpQuery.objects.select_for_update().filter(pk__in=subtree).order_by("pk"))
        if set(_subtree_ids(research_id, query_id)) != set(subtree):
            return None  # children were added before the lock: read the subtree again
        by_id = {row.pk: row for row in rows}
        root = by_id[query_id]
        if root.status == QueryStatus.CANCELLED:
            raise QueryConflict("query is already cancelled", "query_id")
        children = _current_children(by_id.values(), breadth)
        settled_before = _settled(root, children, breadth, depth)
        changed = [root.pk] + [
            row.pk
            for row in sorted(rows, key=lambda r: (r.depth, r.pk))
            if row.pk != root.pk and row.status in UNFINISHED_QUERIES
        ]
        Website.objects.filter(query_id__in=changed, status__in=UNFINISHED_WEBSITES).update(
            status=WebsiteStatus.CANCELLED, finished_at=now, claimed_at=None, claimed_by=""
        )
        SerpQuery.objects.filter(pk__in=changed).update(
            status=QueryStatus.CANCELLED, finished_at=now, claimed_at=None, claimed_by="", children_planned=True
        )
        # Done queries below it plan no more children; a planning already queued finds them planned and stops.
        SerpQuery.objects.filter(pk__in=subtree, status=QueryStatus.DONE, children_planned=False).update(
            children_planned=True, claimed_at=None, claimed_by=""
        )
        count = 1 + descendants(breadth, depth, root.depth) - settled_before
        if not _count_off(research_id, count):
            raise QueryConflict("research has ended: its queries can no longer be cancelled")
        record_event(
            research_id, EventType.QUERY_CANCELLED, {"query_id": root.pk, "query": root.query, "cancelled": changed}
        )
    return changed


def _count_off(research_id: ResearchId, count: int) -> bool:
    """Count `count` nodes off the running research (its row locked last); at zero, hand on the report."""
    pending = transitions.count_off_running(research_id, count)
    if pending is None:
        return False
    if count > 0 and pending == 0:
        # As the last counted-off query does (workers/pipeline/progress.py): the report's lease, then its task.
        transitions.hand_on(research_id)
        dispatch.queue_tree_finished_on_commit(research_id)
    return True


def retry_query(research: Research, query_id: int) -> SerpQuery:
    """Run a failed or cancelled query again: back to pending, its children planned anew once it is done.

    A finished research goes back to running and, when the branch is done, writes its next report version.
    """
    _query(research, query_id)
    now = timezone.now()
    with transaction.atomic():
        # Lock order: the owner (a finished research runs again: counted like a start), the query, the research row.
        lock_owner(research.owner_id)
        query = SerpQuery.objects.select_for_update().get(pk=query_id)
        if query.status not in RETRYABLE:
            raise QueryConflict(f"query is {query.status}: only a failed or cancelled query can be retried", "query_id")
        if _ancestor_settled(query):
            raise QueryConflict("a query above it was cancelled or failed: retry that one", "query_id")
        locked = Research.objects.select_for_update(no_key=True).get(pk=research.pk)
        if locked.stop_reason:
            raise QueryConflict(f"research was stopped ({locked.stop_reason}) and cannot run again")
        breadth, depth = locked.breadth or 1, locked.depth or 1
        added = 1 + descendants(breadth, depth, query.depth)
        if locked.status == ResearchStatus.RUNNING:
            transitions.add_branch(locked.pk, added)
        elif locked.status in FINISHED_STATUSES:
            hold_active_slot(locked.owner_id)
            # Nothing else of a finished research is pending: only this branch is counted.
            reported = Document.objects.filter(
                research_id=locked.pk, kind=DocumentKind.REPORT, version=locked.report_version
            ).exists()
            transitions.run_branch_again(locked.pk, added, list(FINISHED_STATUSES), next_version=reported)
        else:
            raise QueryConflict(f"research is {locked.status}: retry once it has run or ended")
        SerpQuery.objects.filter(pk=query.pk).update(
            status=QueryStatus.PENDING,
            retries=query.retries + 1,
            error="",
            pending_websites=0,
            children_planned=False,
            learnings=[],
            attempts=0,
            started_at=None,
            finished_at=None,
            claimed_at=now,
            claimed_by=QUEUED,  # handed on to its search
        )
        record_event(
            locked.pk,
            EventType.QUERY_RETRIED,
            {"query_id": query.pk, "query": query.query, "retries": query.retries + 1, "was": query.status},
        )
        dispatch.SEARCH.each_on_commit([query.pk], locked.pk)
    query.refresh_from_db()
    return query


# A branch a user adds to a finished research: its query and objective, at most this many characters.
MAX_BRANCH_QUERY_CHARS = 500
MAX_BRANCH_OBJECTIVE_CHARS = 2000


def deepen(research: Research, query: str, objective: str, source: dict[str, Any]) -> SerpQuery:
    """Dig deeper into a completed research: a new depth-1 branch (the next round) with the research's depth
    below it, by the same rule as every branch; the research runs again and writes its next report version.
    Pages it fetched already are read from what it stored (one fetch per URL per research). `source` says where
    the user started from (a free query, an open gap, a report section), for the event."""
    with transaction.atomic():
        lock_owner(research.owner_id)  # before the research row (see services.lock_owner)
        locked = Research.objects.select_for_update(no_key=True).get(pk=research.pk)
        if locked.status != ResearchStatus.COMPLETED:
            raise QueryConflict(f"research is {locked.status}: dig deeper once it has completed")
        if locked.stop_reason:
            raise QueryConflict(f"research was stopped ({locked.stop_reason}) and cannot run again")
        hold_active_slot(locked.owner_id)  # it runs again: counted like a start
        breadth, depth = locked.breadth or 1, locked.depth or 1
        top = SerpQuery.objects.filter(research_id=locked.pk, depth=1)
        last = top.aggregate(position=Max("position"), round=Max("round"))
        reported = Document.objects.filter(
            research_id=locked.pk, kind=DocumentKind.REPORT, version=locked.report_version
        ).exists()
        transitions.run_branch_again(
            locked.pk, 1 + descendants(breadth, depth, 1), [ResearchStatus.COMPLETED], next_version=reported
        )
        branch = SerpQuery.objects.create(
            research_id=locked.pk,
            depth=1,
            position=(last["position"] if last["position"] is not None else -1) + 1,
            # A user's branch counts as a round of its own, after the rounds the research added itself.
            round=max(last["round"] or 0, locked.gap_rounds or 0) + 1,
            query=query,
            objective=objective,
            claimed_at=timezone.now(),
            claimed_by=QUEUED,  # handed on to its search
        )
        record_event(
            locked.pk,
            EventType.BRANCH_ADDED,
            {"query_id": branch.pk, "query": query, "round": branch.round, **source},
        )
        dispatch.SEARCH.each_on_commit([branch.pk], locked.pk)
    return branch


def open_gap(research: Research, gap_id: int) -> str:
    """The text of one of the research's open gaps (its memory), for a branch that looks into it."""
    text = (
        MemoryItem.objects.filter(pk=gap_id, research_id=research.pk, kind=MemoryKind.GAP)
        .values_list("text", flat=True)
        .first()
    )
    if text is None:
        raise QueryNotFound("no such open gap in this research", "gap_id")
    return text


def _query(research: Research, query_id: int) -> SerpQuery:
    query = SerpQuery.objects.filter(pk=query_id, research_id=research.pk).first()
    if query is None:
        raise QueryNotFound("query not found", "query_id")
    return query


def _subtree_ids(research_id: ResearchId, query_id: int) -> list[int]:
    """The query and every query below it, of every generation."""
    children: dict[int | None, list[int]] = defaultdict(list)
    for pk, parent_id in SerpQuery.objects.filter(research_id=research_id).values_list("pk", "parent_id"):
        children[parent_id].append(pk)
    found, stack = [], [query_id]
    while stack:
        pk = stack.pop()
        found.append(pk)
        stack.extend(children.get(pk, []))
    return sorted(found)


def _current_children(rows: Iterable[SerpQuery], breadth: int) -> dict[int, list[SerpQuery]]:
    """Children of each query planned by its latest attempt (earlier attempts' children are history)."""
    by_id = {row.pk: row for row in rows}
    children: dict[int, list[SerpQuery]] = defaultdict(list)
    for row in by_id.values():
        parent = by_id.get(row.parent_id) if row.parent_id else None
        if parent is not None and row.position // breadth == parent.retries:
            children[parent.pk].append(row)
    return children


def _settled(node: SerpQuery, children: dict[int, list[SerpQuery]], breadth: int, depth: int) -> int:
    """How many of the node's subtree slots are already counted off."""
    if node.status in SETTLED or (node.status == QueryStatus.DONE and node.decision == STOPPED):
        # A failed or cancelled query, or a done one whose review stopped its branch: its subtree was counted off.
        return 1 + descendants(breadth, depth, node.depth)
    if node.status == QueryStatus.DONE:
        return 1 + sum(_settled(child, children, breadth, depth) for child in children.get(node.pk, []))
    return 0


def _ancestor_settled(query: SerpQuery) -> bool:
    parent_id = query.parent_id
    while parent_id is not None:
        parent = SerpQuery.objects.filter(pk=parent_id).only("status", "parent_id").first()
        if parent is None:
            return False
        if parent.status in SETTLED:
            return True
        parent_id = parent.parent_id
    return False
