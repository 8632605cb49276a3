"""Leases on the rows steps work on, and the transaction that takes a research's row first.

Most steps write the tree in tree_writes.tree_transaction, which takes the research row last. The steps that
decide a research's course (start, top-level and child planning, report, cancel and fail) take its row first
here, to serialise against each other; none of them then locks a website or a query that a tree transaction
may hold, so the two kinds cannot wait on each other in a cycle.
"""

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from research.models import Research

# `claimed_by` of a row handed on to the next step's task (by the step before it, or by the sweeper).
QUEUED = "queued"
SWEEPER = "sweeper"


def claim_owner(task_id: str | None) -> str:
    """The prefix of `claimed_by` that a task's retries share (Celery keeps the task id across them)."""
    return f"{task_id or uuid.uuid4().hex} "


def claimable(owner: str) -> Q:
    """Rows a task may lease: handed to it, already its own (a retry), or whose lease ran out (a dead worker).

    A second delivery of a task that is still running finds none of these and does nothing: no repeated model
    call or search, as duplicates must be pure no-ops (../shared/NOTES.md).
    """
    expired = timezone.now() - timedelta(seconds=settings.LEASE_SECONDS)
    return (
        Q(claimed_by__in=[QUEUED, SWEEPER])
        | Q(claimed_by__startswith=owner)
        | Q(claimed_at__isnull=True)
        | Q(claimed_at__lt=expired)
    )


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
                    # NO KEY UPDATE: rows inserted with a foreign key to the research (FOR KEY SHARE) do not wait.
                    f"SELECT 1 FROM {Research._meta.db_table} WHERE id = %s FOR NO KEY UPDATE",
                    [Research._meta.pk.get_db_prep_value(research_id, connection)],
                )
        yield
