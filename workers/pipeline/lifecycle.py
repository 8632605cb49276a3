"""A research's start, and whether its steps may go on (cancel and critical failure: research/control/lifecycle.py; the
budgets that stop it: research/control/budgets.py)."""

import logging
from typing import Any

from django.db import connection, transaction

from research.control import budgets, dispatch
from research.control.lifecycle import fail_research
from research.models import EventType, Research, ResearchStatus, StepRow
from research.record import database, transitions
from research.record.events import record_event
from research.record.planning import total_queries
from research.record.usage import BudgetState, research_with, spent_sql, state_of
from research.types import ResearchId

log = logging.getLogger(__name__)


def start_research(research_id: str) -> None:
    """Claim a queued research (queued → running) and queue the planning of its top-level queries."""
    with transaction.atomic():
        research = Research.objects.select_for_update().filter(pk=research_id).first()
        if research is None or research.status != ResearchStatus.QUEUED:
            return  # deleted, cancelled, or a duplicate delivery: the first one did the work
        assert research.breadth is not None and research.depth is not None  # set when it was queued
        planned = total_queries(research.breadth, research.depth)
        # The lease handed on to the planning of its top-level queries.
        transitions.start(research.pk, planned)
        record_event(
            research.pk,
            EventType.RESEARCH_STARTED,
            {"breadth": research.breadth, "depth": research.depth, "queries_planned": planned},
        )
        dispatch.PLAN.on_commit(research_id, None)


def start_failed(research_id: ResearchId, error: BaseException) -> None:
    """The research could not start (retries or sweeper attempts exhausted): it fails with an error output."""
    fail_research(
        research_id,
        reason="start_failed",
        what=f"The research could not start: {error}",
        impact="Nothing was researched.",
    )


def held_status(research_id: ResearchId) -> tuple[str, str] | None:
    """Inside a transaction: the research's status and stop reason (None if it is gone), its row held as tree
    transactions hold it (FOR KEY SHARE). Such holders share the row, so they land side by side; an
    ending (cancel, failure, a budget's stop) holds it exclusively, so it lands wholly before this transaction,
    whose read then sees it, or after its commit. No seq is handed out under it: the transaction's events go in
    unnumbered (`insert_events`) and are numbered after its commit."""
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT status, stop_reason FROM {Research._meta.db_table} WHERE id = %s FOR KEY SHARE",
            [Research._meta.pk.get_db_prep_value(research_id, connection)],
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1])


def running_research(research_id: ResearchId) -> Research | None:
    """The research if a new step of it should start: running, not stopped, within its budgets; else None. One
    read, with what the budgets read of its calls: `usage.state_of(research)` is the state the step's first model
    request may be admitted on (`charged_to`'s `known`).

    A research found past a budget is stopped here (research/control/budgets.py), so the budget holds between sweeps.
    """
    research = _with_spent(research_id)
    if research is None or not may_start(research_id, state_of(research)):
        return None
    return research


def _with_spent(research_id: ResearchId) -> Research | None:
    """The research with the sums `spent_sql` reads: a hand-written read of its columns made
    into an instance as the ORM makes one: the ORM compiled the read with its annotations for every planning,
    search and review."""
    return research_with(research_id, BudgetState._fields[6:], spent_sql("r"))


# What a step reads of its research, joined to its own row, to decide whether it may start (`may_start`): the
# research's columns, then what its model calls spent (summed from them).
_COLUMNS = BudgetState._fields[:6]


def step_row(model: type[StepRow], pk: Any, sql: str) -> tuple[Any, ...] | None:
    """The one row a step starts from, read by `sql` (its one parameter the row's key). The ORM built that query
    anew for every task, ordering by the model's default ordering (joins) to take its first row."""
    return database.read_row(model, pk, sql)


def state_sql(alias: str) -> str:
    """The columns of BudgetState, in order, of the research joined as `alias` (the sums of its calls where it has
    a token or dollar budget)."""
    return ", ".join([*(f"{alias}.{name}" for name in _COLUMNS), spent_sql(alias)])


def may_start(research_id: ResearchId, state: BudgetState) -> bool:
    """`running_research` for a step that read its research's budget columns with its own row in one query
    (`state_sql`): no second read, and no model instance."""
    if state.status != ResearchStatus.RUNNING or state.stop_reason:
        return False
    if budgets.reached(state) is not None:
        budgets.check(research_id)
        return False
    return True
