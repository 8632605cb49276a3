"""One lock order for every transaction that writes a research's tree: the research row first.

Events take the research row anyway (for their seq), and steps also touch query, website and page rows; taking
the research row first in every transaction means no two of them can wait on each other in a cycle. The cost
is that one research's write transactions run one at a time, which is cheap: they are milliseconds long, and
all slow work (model calls, fetches) happens outside them.
"""

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from research.models import Research


def worker_name() -> str:
    """Who holds a lease: host, process and thread, enough to find the worker in logs and Flower."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"[:200]


@contextmanager
def research_transaction(research_id: Any) -> Iterator[None]:
    with transaction.atomic():
        # SQLite (embedded mode) has no row locks; its IMMEDIATE transactions already take the one write lock.
        if connection.features.has_select_for_update:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT 1 FROM {Research._meta.db_table} WHERE id = %s FOR UPDATE",
                    [Research._meta.pk.get_db_prep_value(research_id, connection)],
                )
        yield
