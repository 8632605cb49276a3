"""Transactions that write a research's tree (queries, websites, pages, extracts) and touch its row only at the end.

Every such transaction also changes the research row: the seqs of the events it records, token counts, dropped
quotes, the count of queries still pending. Taking that row first would make all of one research's writes run
one at a time (docs/performance.md, Finding 1). Instead, what a transaction does to the research row is tallied
(research/transactions.py) and applied by one `UPDATE ... RETURNING` at its end, just before the commit, and the
events are inserted with the seqs it returns, in the same statement on PostgreSQL: the row is locked from that
statement to the commit, and seqs stay gap-free and in commit order. (SQLite, the embedded mode, has one writer
at a time anyway.)

Lock order, in every transaction that takes more than one row lock: page → websites → queries → research, and
rows of one kind in primary-key order. Tree transactions follow it by construction (the research row last).
Cancel and fail (research/lifecycle.py) first change the research's status alone, then stop its unfinished
websites and queries in that order; a tree transaction that reaches its end after the status changed finds it
here and rolls back (ResearchStopped), so nothing lands in a research once it is over.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from research import database, dispatch, events, push
from research.dispatch import QUEUED
from research.models import Event, Research, ResearchStatus
from research.transactions import Tally, tallying
from research.types import ResearchId
from workers.errors import ResearchStopped

# A tree may change while its research runs; the report step changes no tree rows.
WRITABLE = {ResearchStatus.RUNNING, ResearchStatus.REPORTING}


@contextmanager
def tree_transaction(research_id: ResearchId) -> Iterator[Tally]:
    """A transaction over one research's tree rows; the research row is updated once, at the end."""
    with transaction.atomic():
        with tallying(research_id) as tally:
            yield tally
        _apply(tally)


def _apply(tally: Tally) -> None:
    if tally.is_empty():
        return  # nothing changed (a duplicate delivery, say): the research row is not touched at all
    now = timezone.now()
    finished = tally.queries_finished
    update = (
        f"UPDATE {Research._meta.db_table} SET last_event_seq = last_event_seq + %s, "
        "quotes_dropped = quotes_dropped + %s, pending_queries = pending_queries - %s, "
        # The report is handed on when the last query is counted off (the sweeper re-queues a lost one).
        "claimed_at = CASE WHEN %s > 0 AND pending_queries - %s = 0 THEN %s ELSE claimed_at END, "
        "claimed_by = CASE WHEN %s > 0 AND pending_queries - %s = 0 THEN %s ELSE claimed_by END "
        "WHERE id = %s RETURNING last_event_seq, pending_queries, status, stop_reason"
    )
    research_id = Research._meta.pk.get_db_prep_value(tally.research_id, connection)
    counts: list[Any] = [tally.quotes_dropped, finished]
    counts += [finished, finished, now, finished, finished, QUEUED]
    params = [len(tally.events), *counts, research_id]
    with connection.cursor() as cursor:
        if tally.events and database.one_statement_writes():
            # One round trip while the row is locked: the seqs are taken and the events inserted in one statement.
            event_table = Event._meta.db_table
            cursor.execute(
                f"WITH research AS ({update}) , added AS (INSERT INTO {event_table} "
                "(research_id, seq, type, data, created_at) "
                "SELECT %s, research.last_event_seq - %s + event.ordinality, event.value->>0, event.value->1, %s "
                "FROM research, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS event) "
                "SELECT last_event_seq, pending_queries, status, stop_reason FROM research",
                [*params, research_id, len(tally.events), now, json.dumps(tally.events)],
            )
            inserted = True
        else:
            cursor.execute(update, params)
            inserted = False
        row = cursor.fetchone()
    if row is None:
        raise Research.DoesNotExist(tally.research_id)
    last_seq, pending, status, stop_reason = row
    if status not in WRITABLE or stop_reason:
        # Cancelled, failed or stopped by a budget (and its unfinished rows stopped) while this step ran: nothing
        # of it may land, or a search would add websites that no step will ever take up.
        raise ResearchStopped(f"research {tally.research_id} is {status} {stop_reason}".strip())
    if inserted:
        push.push_on_commit(tally.research_id)
    else:
        events.insert_events(tally.research_id, tally.events, last_seq)
    if finished and pending == 0:
        dispatch.queue_tree_finished_on_commit(tally.research_id)
