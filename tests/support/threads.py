"""Work done on another thread, on a database connection of its own, as another process would."""

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from research.control import lifecycle
from research.models import Research


def cancel_in_background(research_id: Any) -> tuple[threading.Thread, threading.Event]:
    """Cancel the research from a thread of its own, started; the thread, and an event set once the cancel has
    returned (a test can see that it waits)."""
    cancelled = threading.Event()

    def cancel() -> None:
        try:
            lifecycle.cancel_research(research_id)
            cancelled.set()
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel, daemon=True)
    canceller.start()
    return canceller, cancelled


class HeldTransaction(threading.Thread):
    """Runs `hold` in a transaction of its own, on a connection of its own, and keeps the transaction open until
    `release`, which commits it."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.held, self._release = threading.Event(), threading.Event()

    def hold(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.hold()
                self.held.set()
                self._release.wait(30)
        finally:
            connection.close()

    def release(self) -> None:
        self._release.set()
        self.join(10)


class RowHolder(HeldTransaction):
    """Holds one research row locked, `FOR NO KEY UPDATE` as a query's count-off or an event numbering does (or
    `FOR UPDATE` as an ending does)."""

    def __init__(self, research_id: Any, strength: str = "NO KEY UPDATE", status: str | None = None) -> None:
        """`status`: the status the holder gives the research before it commits (an ending in flight)."""
        super().__init__()
        self.research_id, self.strength, self.status = research_id, strength, status

    def hold(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {Research._meta.db_table} WHERE id = %s FOR {self.strength}",
                [Research._meta.pk.get_db_prep_value(self.research_id, connection)],
            )
        if self.status is not None:
            Research.objects.filter(pk=self.research_id).update(status=self.status)


def on_another_worker(step: Callable[..., object], *args: object) -> None:
    """Run a delivery of a step as another worker would: on a thread (and database connection) of its own, so it
    holds its own leases, not those of the step on this thread."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            step(*args)
        except Exception as error:  # noqa: BLE001  # re-raised on the test's thread
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
