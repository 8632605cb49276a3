"""Planning: the top-level queries of a research, or the children of a finished query."""

import logging
from contextlib import AbstractContextManager
from typing import Any

from django.db import transaction

from research.control import dispatch
from research.control.lifecycle import fail_research
from research.models import (
    EventType,
    FollowUpQuestion,
    QueryStatus,
    Research,
    ResearchMode,
    ResearchStatus,
    SerpQuery,
)
from research.record import database, transitions
from research.record.events import insert_events
from research.record.memory import open_gaps
from research.record.planning import children_per_query
from research.record.transactions import research_transaction
from research.record.usage import state_of
from workers.agents.common import distinct
from workers.agents.engines import engine_for
from workers.agents.query_generator import Ancestor
from workers.clients.llm import charged_to
from workers.pipeline import fencing
from workers.pipeline.fencing import Lease
from workers.pipeline.lifecycle import held_status, running_research
from workers.pipeline.locks import claim_owner, lease_token, take_lease

log = logging.getLogger(__name__)


def plan_queries(research_id: str, parent_id: int | None, task_id: str | None = None) -> None:
    """Write and store the queries under `parent_id` (None: the top level), then queue each one's search.

    The model call happens outside any transaction; the insert is conditional (a parent's `children_planned`
    flag, or no top-level query yet), so a duplicate delivery stores nothing and queues nothing.
    """
    research = running_research(research_id)
    if research is None:
        return
    assert research.breadth is not None and research.depth is not None  # set when it was queued
    parent = None
    if parent_id is not None:
        parent = database.read_instance(SerpQuery, parent_id)
        if parent is None or parent.research_id != research.pk:
            return
        if parent.children_planned or parent.status != QueryStatus.DONE:
            return
        if parent.depth >= research.depth:
            return  # a leaf: the tree ends at the research's depth
        count, depth = children_per_query(research.breadth, parent.depth), parent.depth + 1
    else:
        if SerpQuery.objects.filter(research_id=research.pk, parent__isnull=True).exists():
            return
        count, depth = research.breadth, 1

    # The planning's lease: on the parent query, or for the top level on the research row.
    lease_pk: Any  # the parent's id or the research's
    lease_model, lease_pk = (SerpQuery, parent.pk) if parent is not None else (Research, research.pk)
    owner = claim_owner(task_id)
    if not take_lease(lease_model, lease_pk, owner):
        return  # another delivery is planning these queries
    with fencing.holding(Lease(lease_model, lease_pk, lease_token(owner))):
        _plan(research, parent, count, depth)


def _plan(research: Research, parent: SerpQuery | None, count: int, depth: int) -> None:
    answers = FollowUpQuestion.answers_of(research.pk)
    # Adaptive mode only: fixed mode's planning call is what it always was.
    focus = planning_focus(research, parent)
    extra = {"focus": focus} if focus else {}
    # Admitted on the state `running_research` read, a claim ago.
    with charged_to(research.pk, known=state_of(research)):
        planned = engine_for(research.engine).plan_queries(research.prompt, answers, _ancestors(parent), count, **extra)

    with transaction.atomic():
        fencing.check()  # the lease's row first: the parent query, or the research for the top level
        offset = _lock_parent(parent, research.breadth or 1)
        if offset is None:
            return  # planned already, or its branch was cancelled (research/control/branches.py) during the model call
        _store(research, parent, planned, depth, offset)


def _lock_parent(parent: SerpQuery | None, breadth: int) -> int | None:
    """Lock the parent query before the research row (the tree's lock order, which a branch's cancel follows);
    return the first position of its children (a retried query plans after its earlier children), or None when
    it must plan none."""
    if parent is None:
        return 0
    # The parent's row alone: a read joining the research would lock the research row too (FOR UPDATE), and every
    # insert of the research's rows (FOR KEY SHARE) would wait for this planning.
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT retries FROM {SerpQuery._meta.db_table} WHERE id = %s AND NOT children_planned AND status = %s "
            "FOR UPDATE",
            [parent.pk, QueryStatus.DONE],
        )
        row = cursor.fetchone()
    return None if row is None else row[0] * breadth


def _store(research: Research, parent: SerpQuery | None, planned: list, depth: int, offset: int) -> None:
    parent_id = parent.pk if parent is not None else None
    # The top level takes the research row, which serialises two deliveries of it. Children are serialised by their
    # parent's `children_planned` flag, so their planning only reads the row (`held_status`), beside the tree's
    # other writes. Either way the events go in unnumbered, numbered after the commit.
    held: AbstractContextManager[Any] = research_transaction(research.pk) if parent is None else transaction.atomic()
    with held:
        # Cancelled, failed or stopped by a budget during the model call: its unfinished queries were stopped, so
        # add none (a stopped research's pending count is zero, and must stay so).
        if held_status(research.pk) != (ResearchStatus.RUNNING, ""):
            return
        if parent is not None:
            if not SerpQuery.objects.filter(pk=parent.pk, children_planned=False).update(children_planned=True):
                return
        elif SerpQuery.objects.filter(research_id=research.pk, parent__isnull=True).exists():
            return
        else:
            # The sweeper's re-queues of the planning are over; the report's count from zero.
            transitions.reset_attempts(research.pk)
        created = SerpQuery.objects.bulk_create(
            SerpQuery(
                research_id=research.pk,
                parent=parent,
                depth=depth,
                position=offset + index,
                query=item.query,
                objective=item.objective,
            )
            for index, item in enumerate(planned)
        )
        data = {"parent_id": parent_id, "depth": depth}
        events: list[tuple[str, dict[str, Any]]] = [
            (
                EventType.NEW_SERP_QUERY,
                {"query_id": query.pk, **data, "query": query.query, "objective": query.objective},
            )
            for query in created
        ]
        if parent is None and research.review_plan:
            # Its user reviews the top-level queries first: their searches are queued when the plan is approved.
            transitions.await_review(research.pk)
            insert_events(research.pk, [*events, (EventType.PLAN_READY, {"queries": len(created)})])
            return
        insert_events(research.pk, events)
        dispatch.SEARCH.each_on_commit([query.pk for query in created], research.pk)


def planning_focus(research: Research, parent: SerpQuery | None) -> list[str]:
    """What an adaptive branch's children must cover: the research memory's open gaps first (what no branch has
    answered yet), then the gaps and directions the evaluator named for the parent. None in fixed mode."""
    if research.mode != ResearchMode.ADAPTIVE or parent is None:
        return []
    items = [
        *open_gaps(research.pk),
        *(parent.gaps or []),
        *(parent.directions or []),
    ]
    return distinct([" ".join(str(item).split()) for item in items if str(item).strip()])


def planning_failed(research_id: str, parent_id: int | None, error: BaseException) -> None:
    """Queries could not be planned (retries or sweeper attempts exhausted): critical, as the tree cannot grow."""
    fail_research(
        research_id,
        reason="planning_failed",
        what=f"Search queries could not be planned: {error}",
        impact="The research stopped; the queries, pages and extracts found so far are kept below.",
    )


def _ancestors(parent: SerpQuery | None) -> list[Ancestor]:
    """The whole chain from the top-level query down to `parent`, each with its learnings."""
    if parent is None:
        return []
    chain = [Ancestor(parent.query, parent.objective, list(parent.learnings or []))]
    if parent.parent_id is None:
        return chain
    # The rest of the chain in one statement, not one read per level.
    table = SerpQuery._meta.db_table
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE chain (id, parent_id, depth, query, objective, learnings) AS ("
            f"SELECT id, parent_id, depth, query, objective, learnings FROM {table} WHERE id = %s UNION ALL "
            f"SELECT q.id, q.parent_id, q.depth, q.query, q.objective, q.learnings FROM {table} q "
            "JOIN chain ON q.id = chain.parent_id) SELECT query, objective, learnings FROM chain ORDER BY depth DESC",
            [parent.parent_id],
        )
        rows = cursor.fetchall()
    for query, objective, learnings in rows:
        chain.append(Ancestor(query, objective, list(database.json_value(learnings) or [])))
    return list(reversed(chain))
