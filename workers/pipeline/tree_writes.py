"""Transactions that write a research's tree (queries, websites, pages, extracts) and touch its row only at the end.

Such a transaction may change the research row: dropped quotes, the count of queries still pending. Taking that
row first would make all of one research's writes run one at a time (docs/performance.md, Finding 1). Instead,
what a transaction does to the research row is tallied (research/record/transactions.py) and applied by one statement at
its end, just before the commit. Most transactions change no counter: they only record events, which are inserted
unnumbered (research/record/events.py numbers them after the commit), and read the research row's status under a shared
lock, so they do not wait for each other.

Lock order, in every transaction that takes more than one row lock: page → websites → queries → research, and
rows of one kind in primary-key order. Tree transactions follow it by construction (the research row last).
Cancel, fail and a budget's stop (research/control/lifecycle.py, research/control/budgets.py) first change the
research's status alone, holding its row exclusively (FOR UPDATE, which waits for the tree transactions in
flight), then stop its unfinished websites and queries in that order; a tree transaction that reaches its end
after the status changed finds it here and rolls back (ResearchStopped), so nothing lands in a research once it is
over.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.utils import timezone

from research.control import dispatch
from research.live import push
from research.models import Event, Research, ResearchStatus
from research.record import database, transitions
from research.record.transactions import Tally, tallying
from research.types import ResearchId
from workers.errors import ResearchStopped
from workers.pipeline import fencing

# A tree may change while its research runs; the report step changes no tree rows.
WRITABLE = {ResearchStatus.RUNNING, ResearchStatus.REPORTING}


@contextmanager
def tree_transaction(research_id: ResearchId) -> Iterator[Tally]:
    """A transaction over one research's tree rows; the research row is updated once, at the end. Opened by a
    step that holds leases, it lands only while they are still the step's (workers/pipeline/fencing.py): its own
    row is the first the transaction locks, as the tree's lock order has it for every step's store."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            fencing.check()
        with tallying(research_id) as tally:
            yield tally
        _apply(tally)


def _apply(tally: Tally) -> None:
    if tally.is_empty():
        return  # nothing changed (a duplicate delivery, say): the research row is not touched at all
    now = timezone.now()
    finished = tally.queries_finished
    research_id = Research._meta.pk.get_db_prep_value(tally.research_id, connection)
    if finished or tally.quotes_dropped:
        # Counters move (a query counted off, quotes dropped): the row is written, and held to the commit.
        research, params = transitions.tally_statement(research_id, tally.quotes_dropped, finished, now)
    else:
        # Only events: the row is read, not written. FOR KEY SHARE, which other tree transactions share (it is what
        # their inserts take anyway) and which only an ending waits for (`lock_row(..., exclusive=True)`): so no
        # ending lands between this read and the commit.
        research = (
            f"SELECT pending_queries, status, stop_reason FROM {Research._meta.db_table} WHERE id = %s FOR KEY SHARE"
        )
        params = [research_id]
    with database.prepared_cursor() as cursor:
        if tally.events:
            # One round trip: the events inserted unnumbered (research/record/events.py numbers them after the commit).
            cursor.execute(
                f"WITH added AS (INSERT INTO {Event._meta.db_table} (research_id, seq, type, data, created_at) "
                "SELECT %s, NULL, event.value->>0, event.value->1, %s "
                "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS event ORDER BY event.ordinality) "
                f"{research}",
                [research_id, now, json.dumps(tally.events), *params],
            )
        else:
            cursor.execute(research, params)
        row = cursor.fetchone()
    if row is None:
        raise Research.DoesNotExist(tally.research_id)
    pending, status, stop_reason = row
    if status not in WRITABLE or stop_reason:
        # Cancelled, failed or stopped by a budget (and its unfinished rows stopped) while this step ran: nothing
        # of it may land, or a search would add websites that no step will ever take up.
        raise ResearchStopped(f"research {tally.research_id} is {status} {stop_reason}".strip())
    if tally.events:
        push.push_on_commit(tally.research_id)
    if finished and pending == 0:
        dispatch.queue_tree_finished_on_commit(tally.research_id)
