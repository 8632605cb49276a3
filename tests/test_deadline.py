"""Calls bounded by a deadline run on reused daemon threads: results and errors come back, a hung call is given up
on, the number of threads stays bounded, idle ones end, and an alarm fires unless cancelled."""

import threading
import time

import pytest

from workers.clients import deadline
from workers.errors import DeadlineExceeded


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> deadline._AlarmClock:
    """An alarm clock of its own for the test."""
    own = deadline._AlarmClock()
    monkeypatch.setattr(deadline, "_clock", own)
    return own


@pytest.fixture
def runners(monkeypatch: pytest.MonkeyPatch) -> deadline._Runners:
    """A pool of its own for the test, limited to 3 threads."""
    pool = deadline._Runners(3)
    monkeypatch.setattr(deadline, "_runners", pool)
    monkeypatch.setattr(deadline, "MAX_THREADS", 3)
    return pool


def wait_until(condition, seconds: float = 5.0) -> bool:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_a_call_returns_its_value_and_raises_its_error(runners: deadline._Runners) -> None:
    assert deadline.call_within(lambda: 42, 5, "answer") == 42

    def fail() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        deadline.call_within(fail, 5, "failing")


def test_calls_one_after_another_reuse_one_thread(runners: deadline._Runners) -> None:
    names = {deadline.call_within(lambda: threading.current_thread().ident, 5, "who") for _ in range(50)}
    assert len(names) == 1
    assert runners.threads == 1


def test_a_hung_call_is_given_up_on_and_its_thread_comes_back_when_it_ends(runners: deadline._Runners) -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="took longer"):
        deadline.call_within(lambda: release.wait(10), 0.2, "hung")
    assert time.monotonic() - started < 2
    release.set()
    assert wait_until(lambda: runners._idle == 1)
    assert deadline.call_within(lambda: "again", 5, "after") == "again"
    assert runners.threads == 1


def test_no_more_threads_than_the_limit_while_calls_hang(runners: deadline._Runners) -> None:
    release = threading.Event()
    for _ in range(3):
        with pytest.raises(DeadlineExceeded, match="took longer"):
            deadline.call_within(lambda: release.wait(10), 0.05, "hung")
    with pytest.raises(DeadlineExceeded, match="not started"):
        deadline.call_within(lambda: 1, 5, "one too many")
    assert runners.threads == 3
    release.set()
    assert wait_until(lambda: runners._idle == 3)
    assert deadline.call_within(lambda: 7, 5, "freed") == 7
    assert runners.threads == 3


def test_concurrent_callers_share_the_runners(runners: deadline._Runners) -> None:
    results: list[int] = []
    lock = threading.Lock()

    def caller(n: int) -> None:
        for i in range(40):
            value = deadline.call_within(lambda i=i: n * 100 + i, 5, "shared")
            with lock:
                results.append(value)

    callers = [threading.Thread(target=caller, args=(n,)) for n in range(3)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(10)
    assert sorted(results) == sorted(n * 100 + i for n in range(3) for i in range(40))
    assert 1 <= runners.threads <= 3


def test_an_idle_runner_ends(runners: deadline._Runners, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "RUNNER_IDLE_SECONDS", 0.05)
    deadline.call_within(lambda: None, 5, "once")
    assert wait_until(lambda: runners.threads == 0)
    assert runners._idle == 0
    assert deadline.call_within(lambda: "new", 5, "later") == "new"


def test_an_alarm_fires_unless_cancelled(runners: deadline._Runners, clock: deadline._AlarmClock) -> None:
    rang = threading.Event()
    alarm = deadline.Alarm(0.05, rang.set)
    alarm.start()
    assert rang.wait(5)
    assert alarm.fired

    quiet = threading.Event()
    cancelled = deadline.Alarm(0.3, quiet.set)
    cancelled.start()
    cancelled.cancel()
    time.sleep(0.5)
    assert not quiet.is_set()
    assert not cancelled.fired


def test_an_alarm_is_armed_even_when_every_runner_is_busy(
    runners: deadline._Runners, clock: deadline._AlarmClock
) -> None:
    release = threading.Event()
    for _ in range(3):
        with pytest.raises(DeadlineExceeded):
            deadline.call_within(lambda: release.wait(10), 0.05, "hung")
    rang = threading.Event()
    deadline.Alarm(0.05, rang.set).start()
    try:
        assert rang.wait(5)
    finally:
        release.set()


def test_alarms_share_one_clock_thread_and_fire_in_due_order(
    runners: deadline._Runners, clock: deadline._AlarmClock
) -> None:
    fired: list[str] = []
    lock = threading.Lock()

    def note(name: str) -> None:
        with lock:
            fired.append(name)

    before = threading.active_count()
    late = deadline.Alarm(0.6, lambda: note("late"))
    late.start()
    # Armed after the late one and due sooner: the clock, asleep until the late one, is woken for it.
    soon = deadline.Alarm(0.1, lambda: note("soon"))
    soon.start()
    quiet = [deadline.Alarm(0.2, lambda: note("cancelled")) for _ in range(20)]
    for alarm in quiet:
        alarm.start()
    for alarm in quiet:
        alarm.cancel()
    # 22 alarms wait on one clock thread (and at most one runner fires them), not on a thread each.
    assert threading.active_count() <= before + 2
    assert wait_until(lambda: "soon" in fired, 2)
    assert "late" not in fired
    assert wait_until(lambda: "late" in fired, 3)
    assert fired == ["soon", "late"]
    assert soon.fired and late.fired and not any(alarm.fired for alarm in quiet)
    assert wait_until(lambda: clock.waiting == 0)


def test_a_cancelled_alarm_at_the_top_does_not_delay_the_next(
    runners: deadline._Runners, clock: deadline._AlarmClock
) -> None:
    first = deadline.Alarm(0.05, lambda: None)
    first.start()
    first.cancel()
    rang = threading.Event()
    started = time.monotonic()
    deadline.Alarm(0.1, rang.set).start()
    assert rang.wait(5)
    assert time.monotonic() - started < 1
    assert not first.fired
