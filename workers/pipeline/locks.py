"""Leases on the rows steps work on: who holds one, and which rows a task may take.

A step leases its row (`claimed_at`, `claimed_by`) when it takes it up; the sweeper (recovery.py) re-queues a
row whose lease ran out.
"""

import os
import socket
import threading
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Model, Q
from django.utils import timezone

from research.control.dispatch import WAITING
from research.record import database


def claim_owner(task_id: str | None) -> str:
    """The prefix of `claimed_by` that a task's retries share (Celery keeps the task id across them)."""
    return f"{task_id or uuid.uuid4().hex} "


def claimable(owner: str) -> Q:
    """Rows a task may lease: waiting for it, already its own (a retry), or whose lease ran out (a dead worker).

    A second delivery of a task that is still running finds none of these and does nothing: no repeated model
    call or search: duplicates must be pure no-ops, or redeliveries snowball into repeated work.
    """
    expired = timezone.now() - timedelta(seconds=settings.LEASE_SECONDS)
    return (
        Q(claimed_by__in=WAITING)
        | Q(claimed_by__startswith=owner)
        | Q(claimed_at__isnull=True)
        | Q(claimed_at__lt=expired)
    )


def claimable_sql(owner: str) -> tuple[str, list[Any]]:
    """`claimable` as an SQL condition on the row's own columns, and its parameters, for raw statements."""
    expired = timezone.now() - timedelta(seconds=settings.LEASE_SECONDS)
    waiting = ", ".join(["%s"] * len(WAITING))
    return (
        f"(claimed_by IN ({waiting}) OR substr(claimed_by, 1, %s) = %s OR claimed_at IS NULL OR claimed_at < %s)",
        [*WAITING, len(owner), owner, expired],
    )


def take_lease(model: type[Model], pk: Any, owner: str, status: str | None = None) -> bool:
    """Lease the `model` row with key `pk` to this task (and worker) if it is `claimable` by `owner` and, with
    `status`, in that status; whether it was. On PostgreSQL one hand-written statement: the ORM compiled the lease's
    condition anew for every review and planning."""
    now, claimed_by = timezone.now(), lease_token(owner)
    condition, params = claimable_sql(owner)
    in_status, status_params = (" AND status = %s", [status]) if status is not None else ("", [])
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {model._meta.db_table} SET claimed_at = %s, claimed_by = %s "
            f"WHERE {model._meta.pk.column} = %s{in_status} AND {condition}",
            [now, claimed_by, model._meta.pk.get_db_prep_value(pk, connection), *status_params, *params],
        )
        return cursor.rowcount > 0


def lease_token(owner: str) -> str:
    """What a task's claim writes into `claimed_by`: its owner prefix and the worker, thread included. The step's
    writes are fenced on it (workers/pipeline/fencing.py), so a step computes it on the thread that claimed."""
    return (owner + worker_name())[:200]


def worker_name() -> str:
    """Who holds a lease: host, process and thread, enough to find the worker in logs and Flower."""
    return f"{settings.WORKER_HOST or socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"[:200]
