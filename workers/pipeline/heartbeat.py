"""The heartbeat: while a step works on a row, its lease is renewed, so only a dead worker's lease lapses.

A lease (`claimed_at`) that a step takes when it starts would otherwise have to outlast the slowest model call, and
then a worker killed with `kill -9` would be noticed only that late. Instead each process renews, every quarter of
LEASE_SECONDS, the leases of the rows its running steps hold; a worker that dies stops renewing, its leases lapse
within LEASE_SECONDS, and the sweeper runs those steps again elsewhere.
"""

import logging
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, connections
from django.utils import timezone

from research.dispatch import QUEUED, WAITING
from research.models import LeasedRow, StepRow

log = logging.getLogger(__name__)


class Heartbeat:
    """The rows this process's steps hold, and the thread that renews their leases."""

    def __init__(self) -> None:
        self._held: Counter[tuple[type[LeasedRow], Any]] = Counter()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, model: type[LeasedRow], pk: Any) -> Iterator[None]:
        """Keep the row's lease fresh for as long as the block runs."""
        self.hold(model, pk)
        try:
            yield
        finally:
            self.release(model, pk)

    def hold(self, model: type[LeasedRow], pk: Any) -> None:
        """Start renewing the row's lease, until as many `release` calls as `hold` calls."""
        with self._lock:
            self._held[(model, pk)] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
                self._thread.start()

    def release(self, model: type[LeasedRow], pk: Any) -> None:
        with self._lock:
            key = (model, pk)
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]

    def held(self) -> list[tuple[type[LeasedRow], Any]]:
        with self._lock:
            return list(self._held)

    def beat(self) -> int:
        """Renew every held lease now; returns how many rows were renewed."""
        by_model: dict[type[LeasedRow], list[Any]] = {}
        for model, pk in self.held():
            by_model.setdefault(model, []).append(pk)
        now, renewed = timezone.now(), 0
        for model, pks in by_model.items():
            renewed += model.objects.filter(pk__in=pks).update(claimed_at=now)
        return renewed

    def _run(self) -> None:
        while True:
            threading.Event().wait(max(0.5, settings.LEASE_SECONDS / 4))
            if not self.held():
                connections.close_all()
                continue
            close_old_connections()
            try:
                self.beat()
            except Exception:  # a missed beat costs nothing while the next one comes before the lease lapses
                log.warning("lease heartbeat failed", exc_info=True)


def reserve(model: type[StepRow], pk: Any, task_id: str) -> bool:
    """A worker received the step's message: the row, if it is waiting, becomes this task's, and its lease is renewed
    until `release`. A worker that dies holding messages it had not started yet is then noticed like one that dies
    mid-step, within a lease, instead of after QUEUE_GRACE_SECONDS. The step's own claim accepts the row as its
    own: `claimed_by` starts with the task id."""
    owner = f"{task_id} reserved by {socket.gethostname()}:{os.getpid()}"[:200]
    # One statement, no ORM: this runs in the consumer thread for every message the worker takes.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {model._meta.db_table} SET claimed_by = %s, claimed_at = %s WHERE {model._meta.pk.column} = %s "
            f"AND claimed_by IN ({', '.join(['%s'] * len(WAITING))})",
            [owner, timezone.now(), model._meta.pk.get_db_prep_value(pk, connection), *WAITING],
        )
        if cursor.rowcount < 1:
            return False
    _heartbeat.hold(model, pk)
    return True


def unreserve(model: type[StepRow], pk: Any, task_id: str) -> None:
    """The step ended without taking up the row it reserved (a duplicate delivery that found nothing to do): the
    row waits again for the delivery it was handed on to, instead of staying held until its lease lapses."""
    model.objects.filter(pk=pk, claimed_by__startswith=f"{task_id} reserved by ").update(claimed_by=QUEUED)


# Whether the step running on this thread took up the row its task reserved (its claim replaced the reservation).
_step = threading.local()


def step_started() -> None:
    _step.took_up = False


def took_up() -> None:
    """The running step's claim of its task's row succeeded: the reservation is gone with it, so `unreserve`, a
    statement that would change nothing, is skipped when the task ends."""
    _step.took_up = True


def step_took_up() -> bool:
    """Whether the step on this thread took up its row; reset for the next task on the thread."""
    took, _step.took_up = getattr(_step, "took_up", False), False
    return took


_heartbeat = Heartbeat()
holding = _heartbeat.holding
hold = _heartbeat.hold
release = _heartbeat.release
