"""Fencing: a step's writes land only while it still holds the lease it claimed.

A step leases its row by writing its token (task id, host, process and thread) into `claimed_by`. On one host a
dead worker stops at once; on a fleet a host cut off from the network goes on running: its leases lapse, the
sweeper hands its rows to new deliveries (`claimed_by` becomes the sweeper's, then the new step's token), and when
the network comes back the old step reaches its writes late. Conditions on the row's state alone would let such a
late step land first whenever the new delivery had not stored its result yet: two runs of one step would each
write half of the result, or both would be counted.

So every write transaction a step opens while it holds leases (`holding`) calls `check` before it commits (first,
where the leased row is the first the transaction locks anyway): each leased row
still carries the step's token, and is locked until the commit, so no takeover lands between the check and the
commit. A takeover that came first makes the check raise `LeaseLost`: the transaction rolls back, nothing it wrote
or queued lands (messages and pushes are sent on commit only), and the task ends quietly. A write made by one
statement outside a transaction carries the token in its own condition instead.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection

from research.models import LeasedRow
from research.record import database
from workers.pipeline import heartbeat


class LeaseLost(Exception):
    """A lease the step held was taken over (the sweeper handed its row to another delivery): the step's
    transaction was rolled back, and the step stops."""


@dataclass(frozen=True)
class Lease:
    model: type[LeasedRow]
    pk: Any
    token: str  # the row's `claimed_by` as the step's claim wrote it


_step = threading.local()


def held() -> tuple[Lease, ...]:
    """The leases the step running on this thread holds."""
    return getattr(_step, "leases", ())


@contextmanager
def holding(*leases: Lease) -> Iterator[None]:
    """The step holds these leases for the block: the heartbeat renews them while they carry its token, and every
    write transaction it opens meanwhile checks them first (`check`)."""
    before = held()
    _step.leases = before + leases
    for lease in leases:
        heartbeat.hold(lease.model, lease.pk, lease.token)
    try:
        yield
    finally:
        for lease in leases:
            heartbeat.release(lease.model, lease.pk, lease.token)
        _step.leases = before


def check() -> None:
    """Inside a write transaction: every lease the running step holds still carries its token; each row is held
    (FOR NO KEY UPDATE, as an update would hold it) until the commit, so a takeover waits for this transaction and
    then finds its work done. LeaseLost where one was taken over."""
    for lease in held():
        with database.prepared_cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {lease.model._meta.db_table} WHERE {lease.model._meta.pk.column} = %s "
                "AND claimed_by = %s FOR NO KEY UPDATE",
                [lease.model._meta.pk.get_db_prep_value(lease.pk, connection), lease.token],
            )
            if cursor.fetchone() is None:
                raise LeaseLost(f"{lease.model.__name__} {lease.pk} is no longer leased to {lease.token}")
