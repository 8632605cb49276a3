"""Record an event with the research's next gap-free seq; its push follows once the transaction commits.

Inside a tree transaction (research/transactions.py) the event is only added to the open tally, which gives it
its seq and inserts it at the end of that transaction. Either way the push is scheduled on commit
(research/push.py), so a rolled-back event is never pushed.
"""

from typing import Any

from django.db import connection, transaction

from research import push
from research.models import Event, Research
from research.transactions import open_tally
from research.types import ResearchId


def record_event(research_id: ResearchId, event_type: str, data: dict[str, Any] | None = None) -> Event | None:
    """Save the event now with the next seq, or add it to the open tally (then None is returned)."""
    tally = open_tally(research_id)
    if tally is not None:
        tally.events.append((event_type, data or {}))
        return None
    with transaction.atomic():
        # The UPDATE locks the research row until commit, so concurrent recorders queue up here and each gets
        # the next number; a rolled-back transaction rolls its number back too, so seqs have no gaps.
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {Research._meta.db_table} SET last_event_seq = last_event_seq + 1 "
                "WHERE id = %s RETURNING last_event_seq",
                [Research._meta.pk.get_db_prep_value(research_id, connection)],
            )
            row = cursor.fetchone()
        if row is None:
            raise Research.DoesNotExist(research_id)
        event = Event.objects.create(research_id=research_id, seq=row[0], type=event_type, data=data or {})
        push.push_on_commit(research_id)
    return event


def insert_events(research_id: ResearchId, recorded: list[tuple[str, dict[str, Any]]], last_seq: int) -> None:
    """Insert a tally's events with the seqs ending at `last_seq`, which the caller took on the research row."""
    if not recorded:
        return
    first = last_seq - len(recorded) + 1
    Event.objects.bulk_create(
        Event(research_id=research_id, seq=first + index, type=event_type, data=data)
        for index, (event_type, data) in enumerate(recorded)
    )
    push.push_on_commit(research_id)
