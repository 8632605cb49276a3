"""What-if worker: the engine with the changes docs/performance.md proposes, patched in memory, to measure them.

`BENCH_WHATIF=reuse,locklast python -m bench.whatif -A researchsite worker -P threads -c N ...` starts a normal
Celery worker after applying the named changes:

- `reuse`: `CELERY_DB_REUSE_MAX = 1000` in the Celery configuration. Before the fix (docs/performance.md, Finding
  2) researchsite/celery.py set it in the environment, where Celery's Django fixup never looks (it reads
  `app.conf`), so every task closed its database connection before and after it ran; the engine now sets it
  itself, and this only matters when measuring older commits.
- `locklast`: `research_transaction` no longer locks the research row up front, and the events a transaction
  records are written at its end, so the row lock (needed for gap-free seqs) is held from the seq update to the
  commit instead of for the whole transaction.

These measure the proposals; they are not the changes themselves, and `locklast` is not safe as patched here:
without the research row taken first, scrape and analysis transactions lock websites and queries in opposite
orders and PostgreSQL finds deadlocks (Finding 1 has the figures). Nothing but the benchmark uses this module.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()


def install() -> None:
    """Patch every pipeline module that imported `research_transaction` or `record_event` by name."""
    import importlib
    import pkgutil

    import workers.pipeline
    from research import events

    original = events.record_event

    def record_event(research_id: Any, event_type: str, data: dict[str, Any] | None = None) -> None:
        stack = getattr(_local, "stack", None)
        if not stack:
            original(research_id, event_type, data)
            return
        stack[-1].append((event_type, data or {}))

    @contextmanager
    def research_transaction(research_id: Any) -> Iterator[None]:
        from django.db import transaction

        with transaction.atomic():
            pending: list[tuple[str, dict[str, Any]]] = []
            _local.stack = [*getattr(_local, "stack", []), pending]
            try:
                yield
            finally:
                _local.stack = _local.stack[:-1]
            if pending:
                _write_events(research_id, pending)

    for info in pkgutil.iter_modules(workers.pipeline.__path__):
        module = importlib.import_module(f"workers.pipeline.{info.name}")
        if hasattr(module, "research_transaction"):
            module.research_transaction = research_transaction
        if getattr(module, "record_event", None) is original:
            module.record_event = record_event


def _write_events(research_id: Any, pending: list[tuple[str, dict[str, Any]]]) -> None:
    """Take the next len(pending) seqs (this locks the research row until commit) and insert the events."""
    from django.db import connection, transaction

    from research.events import _pusher
    from research.models import Event, Research

    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Research._meta.db_table} SET last_event_seq = last_event_seq + %s "
            "WHERE id = %s RETURNING last_event_seq",
            [len(pending), Research._meta.pk.get_db_prep_value(research_id, connection)],
        )
        last = cursor.fetchone()[0]
    first = last - len(pending) + 1
    Event.objects.bulk_create(
        Event(research_id=research_id, seq=first + i, type=event_type, data=data)
        for i, (event_type, data) in enumerate(pending)
    )
    transaction.on_commit(lambda: _pusher.mark(str(research_id)))


def main() -> None:
    import os

    import django
    from celery.__main__ import main as celery_main

    django.setup()
    import workers.tasks  # noqa: F401 - load the pipeline before patching it
    from researchsite.celery import app

    changes = set(filter(None, os.environ.get("BENCH_WHATIF", "").split(",")))
    if "reuse" in changes:
        app.conf.update(CELERY_DB_REUSE_MAX=1000)
    if "locklast" in changes:
        install()
    sys.argv = ["celery", *sys.argv[1:]]
    celery_main()


if __name__ == "__main__":
    main()
