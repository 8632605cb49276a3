"""Event seqs handed out after the commit: the numbering of a research's unnumbered events (research/record/events.py
says why and when), apart from the recording so that the pusher can number before it reads."""

from typing import Any

from django.db import connection, transaction

from research.models import Event, Research
from research.record import database, transitions
from research.types import ResearchId


def number(research_id: ResearchId, inserted: bool = False, lock_timeout_ms: int | None = None) -> int:
    """Give the research's unnumbered events, those this transaction can see, the next seqs in the order they were
    inserted; the research's last seq. Inside the caller's transaction, or one of its own. `inserted`: the caller's
    transaction has just inserted one, so there is something to number and no need to look first.
    `lock_timeout_ms` (outside a transaction only): in a transaction of its own whose lock waits end after that
    long (LockNotAvailable), so that a pusher steps aside from a table locked exclusively (a migration, a TRUNCATE)
    instead of holding the research row while it waits for the events table: a deadlock with a TRUNCATE."""
    if lock_timeout_ms is not None:
        with transaction.atomic():
            database.limit_lock_waits(lock_timeout_ms)
            return number(research_id, inserted)
    pk = Research._meta.pk.get_db_prep_value(research_id, connection)
    research, events = Research._meta.db_table, Event._meta.db_table
    if inserted:
        return _number(research_id, pk)
    with database.prepared_cursor() as cursor:
        # Most pushes find nothing left to number (a recorder numbered it): no lock then, no row written.
        cursor.execute(
            f"SELECT last_event_seq, EXISTS (SELECT 1 FROM {events} WHERE research_id = %s AND seq IS NULL) "
            f"FROM {research} WHERE id = %s",
            [pk, pk],
        )
        found = cursor.fetchone()
    if found is None:
        raise Research.DoesNotExist(research_id)
    if not found[1]:
        return int(found[0])
    return _number(research_id, pk)


def _number(research_id: ResearchId, pk: Any) -> int:
    with transaction.atomic():
        # First the row, in a statement of its own, so that the numbering's statement, which starts after the lock
        # is granted, sees every event the numberings before it numbered.
        with database.prepared_cursor() as cursor:
            cursor.execute(
                f"SELECT last_event_seq FROM {Research._meta.db_table} WHERE id = %s FOR NO KEY UPDATE", [pk]
            )
            row = cursor.fetchone()
        if row is None:
            raise Research.DoesNotExist(research_id)
        last = transitions.number_events(pk, row[0])
        return int(row[0] if last is None else last)


def unnumbered(older_than: Any) -> list[Any]:
    """Researches with events left unnumbered since before `older_than` (the process that would have numbered
    them before its push died)."""
    rows = Event.objects.filter(seq__isnull=True, created_at__lt=older_than).order_by()
    return list(rows.values_list("research_id", flat=True).distinct())
