"""Every write to a research's row: its status, its lease and its counters, each a conditional UPDATE.

A transition names the state it moves from in its WHERE clause (compare-and-set), so of two racing writers one
wins and the other learns it lost from the returned bool, without reading the row first. Callers hold the
research's transaction (`research.record.transactions.research_transaction`) where the change must commit with events
or follow-on steps. The counters that hot paths move in hand-written statements (a tree transaction's tally, the
event numbers, a branch counted off) are written here too, by the statements those paths run.
`tests/test_transitions.py` fails on a `Research.objects….update(`, or an SQL `UPDATE` of the research table,
anywhere else.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When
from django.utils import timezone

from research.control.dispatch import QUEUED, SWEEPER, WAITING
from research.models import Event, ReportSection, Research, ResearchStatus, SectionStatus
from research.record import database
from research.types import ResearchId


def _research(research_id: ResearchId, *conditions: Q, **fields: Any) -> Any:
    return Research.objects.filter(*conditions, pk=research_id, **fields)


# --- the research row's lease --------------------------------------------------------------------------------
# The step that holds the row (the top-level planning, the report, the coverage evaluation, the assembly) leases
# it like any tree row: `claimed_by` names its holder, or QUEUED while the next step waits in the queue.


def hand_on(research_id: ResearchId, **only_if: Any) -> bool:
    """The row's lease waits for the step queued next (the report, the evaluation, the assembly)."""
    return bool(_research(research_id, **only_if).update(claimed_at=timezone.now(), claimed_by=QUEUED))


def assembly_due(research_id: ResearchId) -> bool:
    """The report's last section landed: the research row, waiting for the assembly since the sections were
    planned (and not yet taken by it), is stamped as handed on now. False once the assembly has claimed it."""
    return bool(
        _research(research_id, status=ResearchStatus.REPORTING, claimed_by__in=WAITING).update(
            claimed_at=timezone.now(), claimed_by=QUEUED
        )
    )


def claim_assembly(research_id: ResearchId, claimable: Q, holder: str) -> bool:
    """Take the row's lease for the report's assembly, only once every section of its version is written.

    Checked in the same UPDATE: an assembly delivered early (a duplicate, a redelivery) that took the lease and
    then found a section unwritten would hold the row while the last section's `assembly_due` found it taken, and
    the report would wait a whole lease for the sweeper. Refused here, it leaves the row waiting, and the last
    section to land queues the assembly as usual.
    """
    unwritten = ReportSection.objects.filter(research_id=OuterRef("pk"), version=OuterRef("report_version")).exclude(
        status=SectionStatus.WRITTEN
    )
    return claim(research_id, claimable & Q(~Exists(unwritten)), holder, status=ResearchStatus.REPORTING)


def claim(research_id: ResearchId, claimable: Q, holder: str, **only_if: Any) -> bool:
    """Take the row's lease for a step (`claimable`: the lease is free, lapsed or this task's own)."""
    return bool(_research(research_id, claimable, **only_if).update(claimed_by=holder[:200], claimed_at=timezone.now()))


def renew(research_id: ResearchId, owner: str, holder: str, **only_if: Any) -> bool:
    """Renew the lease a task holds already (a retry of the same task takes its own claim up again, as `holder`:
    its writes are fenced on what this writes)."""
    return bool(
        _research(research_id, claimed_by__startswith=owner, **only_if).update(
            claimed_at=timezone.now(), claimed_by=holder[:200]
        )
    )


def reset_attempts(research_id: ResearchId) -> None:
    """The sweeper's re-queues of a step are over: the next step's count from zero."""
    _research(research_id).update(attempts=0)


# --- status ----------------------------------------------------------------------------------------------------


def questions_written(research_id: ResearchId) -> bool:
    """draft → awaiting_answers, once its follow-up questions are stored."""
    return bool(
        _research(research_id, status=ResearchStatus.DRAFT).update(
            status=ResearchStatus.AWAITING_ANSWERS,
            claimed_by="",
            # The sweeper's re-queues of this step are over; the start's count from zero.
            attempts=0,
        )
    )


def draft_failed(research_id: ResearchId, message: str) -> bool:
    """A draft whose questions could not be written fails with the reason."""
    return bool(
        _research(research_id, status=ResearchStatus.DRAFT).update(
            status=ResearchStatus.FAILED, error=message[:2000], finished_at=timezone.now(), claimed_by=""
        )
    )


def queue_start(research_id: ResearchId, **settings: Any) -> bool:
    """awaiting_answers → queued, with the settings it runs with (breadth, depth, budgets, mode, ...)."""
    return bool(
        _research(research_id, status=ResearchStatus.AWAITING_ANSWERS).update(
            status=ResearchStatus.QUEUED, claimed_at=timezone.now(), **settings
        )
    )


def start(research_id: ResearchId, planned: int) -> bool:
    """queued → running, every planned query pending, the lease handed on to the top-level planning."""
    now = timezone.now()
    return bool(
        _research(research_id, status=ResearchStatus.QUEUED).update(
            status=ResearchStatus.RUNNING,
            started_at=now,
            pending_queries=planned,
            claimed_at=now,
            claimed_by=QUEUED,
            attempts=0,  # the sweeper's re-queues of the start are over; the planning's count from zero
        )
    )


def await_review(research_id: ResearchId) -> bool:
    """running → awaiting_review, once the top-level queries are planned: nothing searches until the user approves
    the plan, and no step holds the row meanwhile; `claimed_at` keeps when the plan began to wait (a plan left
    unapproved for PLAN_REVIEW_MAX_AGE_HOURS is cancelled)."""
    return bool(
        _research(research_id, status=ResearchStatus.RUNNING, stop_reason="").update(
            status=ResearchStatus.AWAITING_REVIEW, claimed_at=timezone.now(), claimed_by="", attempts=0
        )
    )


def replan(research_id: ResearchId, planned: int) -> bool:
    """The user edited the plan under review: `planned` queries in the tree it now makes."""
    return bool(_research(research_id, status=ResearchStatus.AWAITING_REVIEW).update(pending_queries=planned))


def approve_plan(research_id: ResearchId) -> bool:
    """awaiting_review → running: the searches start, and its time budget counts from now."""
    return bool(
        _research(research_id, status=ResearchStatus.AWAITING_REVIEW).update(
            status=ResearchStatus.RUNNING, started_at=timezone.now()
        )
    )


def start_reporting(research_id: ResearchId, holder: str) -> bool:
    """running → reporting, once every query is counted off: one report version, claimed once."""
    return bool(
        _research(research_id, status=ResearchStatus.RUNNING, pending_queries__lte=0).update(
            status=ResearchStatus.REPORTING,
            claimed_at=timezone.now(),
            claimed_by=holder[:200],
            attempts=F("attempts") + 1,
        )
    )


def report_writer_lost(research_id: ResearchId, lease_cutoff: datetime, now: datetime) -> bool:
    """reporting → running, when the report's writer died before it planned the sections, so the report can be
    claimed again."""
    return bool(
        _research(research_id, status=ResearchStatus.REPORTING, claimed_at__lt=lease_cutoff).update(
            status=ResearchStatus.RUNNING, claimed_at=now, claimed_by=SWEEPER
        )
    )


def complete(research_id: ResearchId, title: str, unfinished: Collection[str], outcome: str) -> bool:
    """→ completed with its `outcome` (models.Outcome), from any of the `unfinished` statuses. The research takes
    the report's title unless its user named it."""
    return bool(
        _research(research_id, status__in=unfinished).update(
            status=ResearchStatus.COMPLETED,
            outcome=outcome,
            finished_at=timezone.now(),
            title=Case(When(title_from_user=True, then=F("title")), default=Value(title[:200])),
        )
    )


def cancel(research_id: ResearchId, now: datetime, cancellable: Collection[str]) -> bool:
    return bool(_research(research_id, status__in=cancellable).update(status=ResearchStatus.CANCELLED, finished_at=now))


def fail(research_id: ResearchId, now: datetime, error: str, active: Collection[str]) -> bool:
    return bool(
        _research(research_id, status__in=active).update(
            status=ResearchStatus.FAILED, finished_at=now, error=error[:4000]
        )
    )


def stop_on_budget(research_id: ResearchId, reason: str) -> bool:
    """Mark a running research stopped by a budget; a research whose every query is counted off already has its
    whole report coming, and is not stopped."""
    return bool(
        _research(research_id, status=ResearchStatus.RUNNING, stop_reason="", pending_queries__gt=0).update(
            partial=True, stop_reason=reason
        )
    )


def hand_stopped_tree_to_report(research_id: ResearchId) -> bool:
    """A stopped research's tree is over: nothing pending, the lease handed on to the report (once)."""
    return bool(
        _research(research_id, status=ResearchStatus.RUNNING, pending_queries__gt=0)
        .exclude(stop_reason="")
        .update(pending_queries=0, claimed_at=timezone.now(), claimed_by=QUEUED)
    )


def report_cancelled(research_id: ResearchId, reason: str) -> bool:
    """cancelled → running, to write the partial report of what it found (every query is settled already)."""
    return bool(
        _research(research_id, status=ResearchStatus.CANCELLED).update(
            status=ResearchStatus.RUNNING,
            partial=True,
            stop_reason=reason,
            pending_queries=0,
            finished_at=None,
            error="",
            attempts=0,
            claimed_at=timezone.now(),
            claimed_by=QUEUED,
        )
    )


def add_branch(research_id: ResearchId, queries: int) -> bool:
    """A branch retried while the research runs: its queries are pending again."""
    return bool(
        _research(research_id, status=ResearchStatus.RUNNING).update(pending_queries=F("pending_queries") + queries)
    )


def run_branch_again(research_id: ResearchId, queries: int, finished: Collection[str], next_version: bool) -> bool:
    """A finished research runs again for one retried branch (only its queries pending), and writes its next
    report version when it has a report already."""
    now = timezone.now()
    return bool(
        _research(research_id, status__in=finished).update(
            status=ResearchStatus.RUNNING,
            pending_queries=queries,
            finished_at=None,
            error="",
            attempts=0,
            # The time budget counts from the research's new run.
            started_at=now,
            claimed_at=None,
            claimed_by="",
            report_version=F("report_version") + int(next_version),
        )
    )


def run_again(
    research_id: ResearchId, queries: int, run_round: int, finished: Collection[str], next_version: bool
) -> bool:
    """A finished research runs again on its schedule: its top-level queries anew in round `run_round` (`queries`
    pending), its pages fetched anew, a fresh time budget and no stop of its last run, and its next report version
    when it has a report already."""
    return bool(
        _research(research_id, status__in=finished).update(
            status=ResearchStatus.RUNNING,
            pending_queries=queries,
            run_round=run_round,
            partial=False,
            stop_reason="",
            finished_at=None,
            error="",
            attempts=0,
            started_at=timezone.now(),
            claimed_at=None,
            claimed_by="",
            report_version=F("report_version") + int(next_version),
        )
    )


# --- what a step found, and its counters -----------------------------------------------------------------------


def evaluated(research_id: ResearchId, score: float) -> None:
    """The coverage evaluation found it good enough (or found nothing to add): its score, the lease handed on to
    the report."""
    _research(research_id).update(score=score, claimed_at=timezone.now(), claimed_by=QUEUED)


def add_gap_round(research_id: ResearchId, score: float, round_: int, queries: int) -> None:
    """The coverage evaluation added a round of gap-filling branches: `queries` more pending."""
    _research(research_id).update(
        score=score,
        gap_rounds=round_,
        pending_queries=F("pending_queries") + queries,
        attempts=0,
        claimed_at=timezone.now(),
        claimed_by="",
    )


def keep_outline(research_id: ResearchId, outline: dict[str, Any]) -> None:
    """What the report's assembly needs of its outline (title, summary, the writer's relevance verdict)."""
    _research(research_id).update(report_outline=outline)


def add_dropped_quotes(research_id: ResearchId, count: int) -> None:
    _research(research_id).update(quotes_dropped=F("quotes_dropped") + count)


def rename(research_id: ResearchId, title: str) -> None:
    """A title of its user's choosing: a report written later keeps it."""
    _research(research_id).update(title=title, title_from_user=True)


# --- counters of the hot paths, in hand-written statements ----------------------------------------------------

_TABLE = Research._meta.db_table


def _pk(research_id: ResearchId) -> Any:
    return Research._meta.pk.get_db_prep_value(research_id, connection)


def _returning(sql: str, params: list[Any]) -> Any:
    """The first column of the statement's first row, or None when it changed no row."""
    with database.prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def count_off(research_id: ResearchId, queries: int) -> int | None:
    """Count `queries` settled queries off; the queries still pending (None: no such research)."""
    return _returning(
        f"UPDATE {_TABLE} SET pending_queries = pending_queries - %s WHERE id = %s RETURNING pending_queries",
        [queries, _pk(research_id)],
    )


def count_off_running(research_id: ResearchId, queries: int) -> int | None:
    """Count `queries` nodes off a running research (a cancelled branch); the queries still pending, or None when
    it is not running."""
    return _returning(
        f"UPDATE {_TABLE} SET pending_queries = pending_queries - %s WHERE id = %s AND status = %s "
        "RETURNING pending_queries",
        [queries, _pk(research_id), ResearchStatus.RUNNING],
    )


def number_events(pk: Any, after: int) -> int | None:
    """Number the research's unnumbered events after `after` (its last number, read under its row's lock) in
    order of insertion, and count them on the row, in one statement: the last number (None: no such research)."""
    events = Event._meta.db_table
    return _returning(
        f"WITH todo AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM {events} "
        "WHERE research_id = %s AND seq IS NULL), "
        f"numbered AS (UPDATE {events} AS event SET seq = %s + todo.n FROM todo WHERE event.id = todo.id "
        "RETURNING 1) "
        f"UPDATE {_TABLE} SET last_event_seq = last_event_seq + (SELECT count(*) FROM numbered) "
        "WHERE id = %s RETURNING last_event_seq",
        [pk, after, pk],
    )


def tally_statement(research_pk: Any, quotes_dropped: int, finished: int, now: datetime) -> tuple[str, list[Any]]:
    """A tree transaction's tally, applied to the row (its statement and parameters, for the caller to run alone
    or after its events' insert): quotes dropped added, finished queries counted off and, by the last of them, the
    report's lease handed on (the sweeper re-queues a lost one). It returns the pending queries, the status and the
    stop reason."""
    sql = (
        f"UPDATE {_TABLE} SET quotes_dropped = quotes_dropped + %s, "
        "pending_queries = pending_queries - %s, "
        "claimed_at = CASE WHEN %s > 0 AND pending_queries - %s = 0 THEN %s ELSE claimed_at END, "
        "claimed_by = CASE WHEN %s > 0 AND pending_queries - %s = 0 THEN %s ELSE claimed_by END "
        "WHERE id = %s RETURNING pending_queries, status, stop_reason"
    )
    return sql, [quotes_dropped, finished, finished, finished, now, finished, finished, QUEUED, research_pk]
