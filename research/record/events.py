"""Record events, and give them their research's gap-free seqs.

An event is inserted with no seq, by the transaction of the step that records it, which therefore touches no
research row: the tree's writes of one research (hundreds a second on a fleet) would otherwise queue on that row's
lock for their seqs. `number` gives the unnumbered events of a research their seqs afterwards, in one short
transaction that takes the research row: the events its commit had made visible, in the order they were inserted,
after every seq handed out before. Seqs are therefore gap-free and handed out in commit order of the numbering,
so a reader that has seen seq N never finds a smaller one appear later. Numbering happens:

- where an event is recorded with `record_event` outside a tree transaction (the steering steps, the endings): at
  once, in the same transaction, after the events committed before it (so `research_cancelled` follows everything
  that landed). The frequent steps that only read the research row (a report section, a memory update, a branch's
  planning) use `insert_events` instead, and leave theirs to the next push;
- before each push (research/live/push.py), a moment after the commits it pushes;
- by the sweeper, for events a dead process left unnumbered.

Readers ask for `seq > N`, which unnumbered events never match.
"""

import json
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from research.live import push
from research.models import Event, Research
from research.record import database
from research.record.numbering import number
from research.record.transactions import open_tally
from research.types import ResearchId


def record_event(research_id: ResearchId, event_type: str, data: dict[str, Any] | None = None) -> None:
    """Record the event now (numbered with those committed before it), or add it to the open tally."""
    tally = open_tally(research_id)
    if tally is not None:
        tally.events.append((event_type, data or {}))
        return
    with transaction.atomic():
        Event.objects.create(research_id=research_id, seq=None, type=event_type, data=data or {})
        number(research_id, inserted=True)
        push.push_on_commit(research_id)


def insert_events(research_id: ResearchId, recorded: list[tuple[str, dict[str, Any]]]) -> None:
    """Insert a tree transaction's events, unnumbered (numbered after the commit)."""
    if not recorded:
        return
    # Hand-written: the ORM's bulk insert compiled its statement anew for each of a report's hundreds of sections.
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Event._meta.db_table} (research_id, seq, type, data, created_at) "
            "SELECT %s, NULL, event.value->>0, event.value->1, %s "
            "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS event ORDER BY event.ordinality",
            [Research._meta.pk.get_db_prep_value(research_id, connection), timezone.now(), json.dumps(recorded)],
        )
    push.push_on_commit(research_id)
