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
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, connections
from django.db.models import Q
from django.utils import timezone

from research.control.dispatch import QUEUED, WAITING
from research.models import LeasedRow, StepRow
from research.record import database

log = logging.getLogger(__name__)


class Heartbeat:
    """The rows this process's steps hold, and the thread that renews their leases."""

    def __init__(self) -> None:
        # (model, key, token): a row is renewed only while its `claimed_by` is the token (None: whoever holds it).
        self._held: Counter[tuple[type[LeasedRow], Any, str | None]] = Counter()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, model: type[LeasedRow], pk: Any, token: str | None = None) -> Iterator[None]:
        """Keep the row's lease fresh for as long as the block runs."""
        self.hold(model, pk, token)
        try:
            yield
        finally:
            self.release(model, pk, token)

    def hold(self, model: type[LeasedRow], pk: Any, token: str | None = None) -> None:
        """Start renewing the row's lease while it carries `token`, until as many `release` calls as `hold`
        calls."""
        with self._lock:
            self._held[(model, pk, token)] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
                self._thread.start()

    def release(self, model: type[LeasedRow], pk: Any, token: str | None = None) -> None:
        with self._lock:
            key = (model, pk, token)
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]

    def held(self) -> list[tuple[type[LeasedRow], Any, str | None]]:
        with self._lock:
            return list(self._held)

    def beat(self) -> int:
        """Renew every held lease now; returns how many rows were renewed.

        Only a lease still held (`claimed_at` set) is renewed. A step that gives its row up (a fetch with no host
        slot frees its page) may do so while a beat that read the held rows just before is in flight: renewed
        after that, the row looked leased again, and its retry waited a whole lease for a fetcher that had gone.

        Only a lease that still carries its holder's token is renewed: a row the sweeper handed to another delivery
        while this host was cut off is that delivery's, and renewing it would hide that delivery's death."""
        by_model: dict[type[LeasedRow], Q] = {}
        for model, pk, token in self.held():
            row = Q(pk=pk) if token is None else Q(pk=pk, claimed_by=token)
            by_model[model] = by_model[model] | row if model in by_model else row
        now, renewed = timezone.now(), 0
        for model, rows in by_model.items():
            renewed += model.objects.filter(rows, claimed_at__isnull=False).update(claimed_at=now)
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


# A message that a thread starts within this many seconds of the worker taking it from the queue reserves nothing:
# the step's own claim takes its row from the queue. One that waits longer (behind busy threads) has its row
# reserved then, with every other message that is due, in one statement per kind of row. Most messages start at
# once, so this saves a statement and a commit per step; a worker killed in the first second after taking a
# message leaves that message's row to the sweeper's check for messages the broker no longer holds.
RESERVE_AFTER = 0.5


def reservation_token(task_id: str) -> str:
    """What `claimed_by` says of a row reserved for a task by this process."""
    return f"{task_id} reserved by {socket.gethostname()}:{os.getpid()}"[:200]


def reserve_rows(model: type[StepRow], rows: list[tuple[Any, str]]) -> set[str]:
    """Reserve each (row key, task id) whose row is waiting: it becomes that task's, "<task id> reserved by
    <host:pid>" (the step's own claim accepts the row as its own: `claimed_by` starts with the task id). One
    statement; the task ids whose reservation held."""
    if not rows:
        return set()
    table, key = model._meta.db_table, model._meta.pk
    values, params = [], []
    for pk, task_id in rows:
        values.append("(%s, %s, %s)")
        params += [key.get_db_prep_value(pk, connection), task_id, reservation_token(task_id)]
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS row SET claimed_by = v.owner, claimed_at = %s "
            f"FROM (VALUES {', '.join(values)}) AS v(id, task, owner) "
            f"WHERE row.{key.column} = v.id AND row.claimed_by IN ({', '.join(['%s'] * len(WAITING))}) "
            "RETURNING v.task",
            [timezone.now(), *params, *WAITING],
        )
        return {task for (task,) in cursor.fetchall()}


class Reservations:
    """The messages this worker took from the queue, from when it receives them until their tasks end: due for a
    reservation (RESERVE_AFTER), in the statement that reserves them, or holding their row (renewed by the
    heartbeat until the task ends). Messages reach `received` on the consumer thread, tasks `started` and
    `ended` on the pool's threads, and reservations are made on a thread of their own."""

    def __init__(self, heartbeat: Heartbeat, background: bool = True) -> None:
        self._heartbeat, self._background = heartbeat, background
        self._lock = threading.Lock()
        self._due: dict[str, tuple[type[StepRow], Any, float]] = {}  # task id -> its row, when to reserve it
        self._reserving: dict[str, bool] = {}  # task id -> whether its task ended while its row was reserved
        self._held: dict[str, tuple[type[StepRow], Any, str]] = {}  # task id -> the row reserved for it, its token
        self._thread: threading.Thread | None = None

    def received(self, task_id: str, model: type[StepRow], pk: Any, now: float | None = None) -> None:
        with self._lock:
            self._due[task_id] = (model, pk, (time.monotonic() if now is None else now) + RESERVE_AFTER)
            if self._background and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="reservations", daemon=True)
                self._thread.start()

    def started(self, task_id: str) -> None:
        """The task's thread took the message up: its step claims the row itself, so it is never reserved now."""
        with self._lock:
            self._due.pop(task_id, None)

    def ended(self, task_id: str) -> tuple[type[StepRow], Any, str] | None:
        """The row reserved for the task, if one was, now the task's to release (and hand back if the step did
        not take it up)."""
        with self._lock:
            self._due.pop(task_id, None)
            if task_id in self._reserving:
                self._reserving[task_id] = True  # reserve_due hands the row back if its statement reserved it
            return self._held.pop(task_id, None)

    def pending(self) -> int:
        with self._lock:
            return len(self._due) + len(self._reserving)

    def reserve_due(self, now: float | None = None) -> int:
        """Reserve the rows of every message due; how many were reserved."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = {task_id: (model, pk) for task_id, (model, pk, at) in self._due.items() if at <= now}
            for task_id in due:
                del self._due[task_id]
                self._reserving[task_id] = False
        if not due:
            return 0
        by_model: dict[type[StepRow], list[tuple[Any, str]]] = {}
        for task_id, (model, pk) in due.items():
            by_model.setdefault(model, []).append((pk, task_id))
        reserved: set[str] = set()
        try:
            for model, rows in by_model.items():
                reserved |= reserve_rows(model, rows)
        except DatabaseError:
            connection.close()  # the next batch reconnects; these rows go unreserved
            log.warning("could not reserve the rows of %s messages", len(due), exc_info=True)
        finally:
            with self._lock:
                ended = {task_id for task_id in due if self._reserving.pop(task_id)}
                for task_id in reserved - ended:
                    self._held[task_id] = (*due[task_id], reservation_token(task_id))
                    self._heartbeat.hold(*self._held[task_id])
        for task_id in reserved & ended:
            # The task ended while its row was being reserved: hand the row back (a claim that replaced the
            # reservation meanwhile is left alone: `unreserve` only undoes a reservation).
            try:
                unreserve(*due[task_id], task_id)
            except DatabaseError:
                connection.close()
                log.warning("could not hand back the row of task %s", task_id, exc_info=True)
        return len(reserved)

    def _run(self) -> None:
        idle = 0.0
        while True:
            time.sleep(RESERVE_AFTER / 2)
            if not self.pending():
                idle += RESERVE_AFTER / 2
                if idle >= 10 * RESERVE_AFTER:
                    connections.close_all()  # this thread's; reopened by the next batch
                    idle = 0.0
                continue
            idle = 0.0
            self.reserve_due()


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
reservations = Reservations(_heartbeat)
holding = _heartbeat.holding
hold = _heartbeat.hold
release = _heartbeat.release
