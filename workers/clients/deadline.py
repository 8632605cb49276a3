"""Deadlines for blocking calls whose own timeouts do not cover their whole length.

Celery's task time limits do nothing under the threads pool the workers use, so every network call bounds itself.
Where a library's timeouts are per socket operation (a server that sends a byte now and then resets them) or
missing (`socket.getaddrinfo`, which resolves every name an HTTP library connects to, takes no timeout at all),
the call runs in a daemon thread and its caller stops waiting when the time is up. The abandoned thread ends when
the call returns (the per-operation timeouts the caller still passes end it soon after); being a daemon, it never
holds up a process's exit. At most MAX_THREADS such threads run at once per process, so a resolver that never
answers cannot make every fetch leave one more thread behind.
"""

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from workers.errors import DeadlineExceeded

T = TypeVar("T")

MAX_THREADS = 256
_slots = threading.BoundedSemaphore(MAX_THREADS)


def expiry(seconds: float, deadline: float | None = None) -> float:
    """The `time.monotonic()` value `seconds` from now, or the caller's `deadline` if that comes first."""
    expires_at = time.monotonic() + seconds
    return expires_at if deadline is None else min(expires_at, deadline)


def time_left(expires_at: float, what: str) -> float:
    """Seconds until `expires_at` (a `time.monotonic()` value); DeadlineExceeded when none are left."""
    left = expires_at - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded(f"{what} did not finish by its deadline")
    return left


def call_within(call: Callable[[], T], seconds: float, what: str) -> T:
    """What `call()` returns or raises, or DeadlineExceeded once `seconds` have passed without either."""
    if not _slots.acquire(blocking=False):
        raise DeadlineExceeded(f"{what} not started: {MAX_THREADS} calls are still running past their deadlines")
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller (dropped if it gave up)
            outcome.append((False, exc))
        finally:
            _slots.release()
            done.set()

    threading.Thread(target=run, name=f"deadline {what}"[:60], daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        raise DeadlineExceeded(f"{what} took longer than {seconds:.1f}s")
    succeeded, value = outcome[0]
    if succeeded:
        return value
    raise value
