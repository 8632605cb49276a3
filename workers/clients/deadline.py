"""Deadlines for blocking calls whose own timeouts do not cover their whole length.

Celery's task time limits do nothing under the threads pool the workers use, so every network call bounds itself.
Where a library's timeouts are per socket operation (a server that sends a byte now and then resets them) or
missing (`socket.getaddrinfo`, which resolves every name an HTTP library connects to, takes no timeout at all),
the call runs in a daemon thread and its caller stops waiting when the time is up. The abandoned thread ends when
the call returns (the per-operation timeouts the caller still passes end it soon after); being a daemon, it never
holds up a process's exit. At most MAX_THREADS such threads run at once per process, so a resolver that never
answers cannot make every fetch leave one more thread behind.

The threads are kept and reused (RUNNER_IDLE_SECONDS): a page's fetch runs a DNS lookup and a model call this way,
and a new thread for each cost 100-150 µs of CPU plus the wait for the new thread to be scheduled, which on a busy
process is up to the interpreter's switch interval. Even a kept thread costs two handoffs of the interpreter lock
per call, so what needs no thread does without one: an alarm (a fetch's watchdog) waits on the process's one alarm
clock, and the SSRF guard parses an IP address on the calling thread.
"""

import heapq
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from workers.errors import DeadlineExceeded

T = TypeVar("T")

MAX_THREADS = 256
# A runner with nothing to do for this long ends: a burst of calls leaves no crowd of idle threads behind.
RUNNER_IDLE_SECONDS = 60.0
# How late an alarm may fire: alarms due within this of each other are handled in one wake-up of the clock.
ALARM_SLACK = 0.05


class _Runners:
    """Daemon threads that run handed-in jobs, at most `limit` of them, reused while they are idle."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # alive, busy or idle
        self._idle = 0  # waiting for a job and not yet promised one

    @property
    def threads(self) -> int:
        return self._threads

    def submit(self, job: Callable[[], None]) -> bool:
        """Run `job` on an idle runner or a new one; False when `limit` runners are all busy."""
        with self._lock:
            if self._idle:
                self._idle -= 1  # promised this job: it will not time out meanwhile (see _serve)
                start = False
            elif self._threads < self.limit:
                self._threads += 1
                start = True
            else:
                return False
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._serve, name="deadline runner", daemon=True).start()
        return True

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=RUNNER_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    # No idle count left means every waiting runner has a job promised, this one included.
                    if self._idle:
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            try:
                job()
            finally:
                with self._lock:
                    self._idle += 1


_runners = _Runners(MAX_THREADS)


def _fresh_runners_after_fork() -> None:
    """A forked child has none of its parent's threads: it starts with no runners and no alarm clock."""
    global _runners, _clock
    _runners = _Runners(MAX_THREADS)
    _clock = _AlarmClock()


os.register_at_fork(after_in_child=_fresh_runners_after_fork)


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
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller (dropped if it gave up)
            outcome.append((False, exc))
        finally:
            done.set()

    if not _runners.submit(run):
        raise DeadlineExceeded(f"{what} not started: {MAX_THREADS} calls are still running past their deadlines")
    if not done.wait(max(0.0, seconds)):
        raise DeadlineExceeded(f"{what} took longer than {seconds:.1f}s")
    succeeded, value = outcome[0]
    if succeeded:
        return value
    raise value


class Alarm:
    """Calls `on_expire` once `seconds` have passed, unless cancelled first.

    Alarms wait on the process's one alarm clock (`_AlarmClock`), not on a thread each: arming and cancelling
    one wakes no other thread, where a runner per alarm cost two handoffs of the interpreter lock per fetch (a
    runner's handoff took 2-23 ms, median to p90, while the process was extracting pages)."""

    def __init__(self, seconds: float, on_expire: Callable[[], None]) -> None:
        self.due = time.monotonic() + max(0.0, seconds)
        self._on_expire = on_expire
        self.cancelled = False
        self._fired = False

    @property
    def fired(self) -> bool:
        return self._fired

    def start(self) -> None:
        _clock.arm(self)

    def cancel(self) -> None:
        self.cancelled = True  # left in the clock's heap, dropped when it reaches the top

    def fire(self) -> None:
        if self.cancelled:
            return
        self._fired = True
        self._on_expire()


class _AlarmClock:
    """One daemon thread per process that fires alarms when they are due.

    Alarms sit in a heap ordered by due time. The clock sleeps until the earliest is due (plus ALARM_SLACK, so
    that alarms due close together are handled in one wake-up) and is woken early only when an alarm due sooner
    than every other is armed. Cancelled alarms are dropped when they reach the top. The clock runs no alarm's
    `on_expire` itself: each runs on a runner (a thread of its own when none is free), so that a slow one cannot
    hold up the others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()  # ties broken by arming order: alarms themselves do not compare
        self._thread: threading.Thread | None = None

    def arm(self, alarm: Alarm) -> None:
        with self._lock:
            soonest = not self._heap or alarm.due < self._heap[0][0]
            heapq.heappush(self._heap, (alarm.due, next(self._order), alarm))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="alarm clock", daemon=True)
                self._thread.start()
            elif soonest:
                self._changed.notify()

    @property
    def waiting(self) -> int:
        """Alarms in the heap, cancelled ones not yet dropped included."""
        return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due: list[Alarm] = []
                while self._heap and (self._heap[0][2].cancelled or self._heap[0][0] <= now):
                    alarm = heapq.heappop(self._heap)[2]
                    if not alarm.cancelled:
                        due.append(alarm)
                if not due:
                    self._changed.wait(self._heap[0][0] - now + ALARM_SLACK if self._heap else None)
                    continue
            for alarm in due:
                if not _runners.submit(alarm.fire):
                    threading.Thread(target=alarm.fire, name="alarm", daemon=True).start()


_clock = _AlarmClock()
