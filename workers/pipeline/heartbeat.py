"""The heartbeat: while a step works on a row, its lease is renewed, so only a dead worker's lease lapses.

A lease (`claimed_at`) that a step takes when it starts would otherwise have to outlast the slowest model call, and
then a worker killed with `kill -9` would be noticed only that late. Instead each process renews, every quarter of
LEASE_SECONDS, the leases of the rows its running steps hold; a worker that dies stops renewing, its leases lapse
within LEASE_SECONDS, and the sweeper runs those steps again elsewhere.
"""

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections
from django.db.models import Model
from django.utils import timezone

log = logging.getLogger(__name__)


class Heartbeat:
    """The rows this process's steps hold, and the thread that renews their leases."""

    def __init__(self) -> None:
        self._held: Counter[tuple[type[Model], Any]] = Counter()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, model: type[Model], pk: Any) -> Iterator[None]:
        """Keep the row's lease fresh for as long as the block runs."""
        key = (model, pk)
        with self._lock:
            self._held[key] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held[key] -= 1
                if self._held[key] <= 0:
                    del self._held[key]

    def held(self) -> list[tuple[type[Model], Any]]:
        with self._lock:
            return list(self._held)

    def beat(self) -> int:
        """Renew every held lease now; returns how many rows were renewed."""
        by_model: dict[type[Model], list[Any]] = {}
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


_heartbeat = Heartbeat()
holding = _heartbeat.holding
