"""A late step changes nothing, for every kind of step.

A host cut off from the network goes on running its steps while their leases lapse; the sweeper hands their rows
to new deliveries, which do the work; when the network comes back, the first deliveries reach their writes. Here
each kind of step is held that way: its first delivery (on a thread of its own, as on another host) takes its
lease and stops just after; its lease is aged past LEASE_SECONDS; the real sweeper re-queues the row; the new
delivery runs to its end; then the first is let go. Its writes must all be rejected (LeaseLost, and every row of
the research the same before and after it), and the research must still finish with one report and exact counts.

The start step is not among them: its claim and its write are one transaction (queued → running), so there is no
moment at which it holds a lease without having written.
"""

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from celery import Task
from django.db import connection
from django.utils import timezone

from research.control import ask, dispatch, services
from research.live.push import _pusher
from research.models import (
    AnswerStatus,
    AskedQuestion,
    Document,
    DocumentKind,
    Event,
    EventType,
    Extract,
    FollowUpQuestion,
    MemoryItem,
    Page,
    ReportSection,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
)
from research.record import numbering
from workers import steps
from workers.errors import ResearchStopped
from workers.pipeline import fencing, scrape
from workers.pipeline.fencing import LeaseLost
from workers.pipeline.heartbeat import Heartbeat

pytestmark = pytest.mark.django_db(transaction=True)

LATE = "late-delivery"  # the task id of every first delivery held past its lease
LEASED = (Research, SerpQuery, Website, Page, ReportSection, AskedQuestion)


@dataclass
class Queue:
    """The messages the code under test publishes, kept in order and run here, one at a time, on this thread."""

    messages: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    ran: Counter = field(default_factory=Counter)
    analyze_apart: bool = False  # scrapes hand their websites to analysis steps of their own

    def publish(self, task: Task, args: Any) -> None:
        self.messages.append((task.name, tuple(args or ())))

    def run_until(self, wanted: Callable[[str, tuple[Any, ...]], bool]) -> tuple[str, tuple[Any, ...]]:
        """Run messages in order until the next one is `wanted`, which is taken off the queue, not run."""
        for _ in range(10_000):
            assert self.messages, "the research ran out of work before the step wanted"
            name, args = self.messages[0]
            if wanted(name, args):
                return self.messages.pop(0)
            self.run_next()
        raise AssertionError("the step wanted never came")

    def run_next(self) -> None:
        self.run(self.messages.pop(0))

    def run(self, message: tuple[str, tuple[Any, ...]]) -> None:
        name, args = message
        self.ran[name] += 1
        if self.analyze_apart and name == dispatch.SCRAPE.name:
            scrape.scrape_website(*args, task_id=f"run-{self.ran[name]}")
            return
        run_step(name, args, f"run-{self.ran[name]}")

    def run_all(self) -> None:
        while self.messages:
            self.run_next()


def run_step(name: str, args: tuple[Any, ...], task_id: str) -> None:
    """A delivery of the step, as its Celery task runs it: the step's function, ending quietly on a research that
    stopped."""
    step = steps.REGISTRY[name]
    try:
        if step.takes_task_id:
            step.run(*args, task_id=task_id)
        else:
            step.run(*args)
    except ResearchStopped:
        pass


class LateDelivery(threading.Thread):
    """The first delivery of a step, on a host about to be cut off: it stops once it holds its lease, until `go`."""

    def __init__(self, name: str, args: tuple[Any, ...], task_id: str) -> None:
        super().__init__(daemon=True)
        self.step_name, self.step_args, self.task_id = name, args, task_id
        self.holding, self._go = threading.Event(), threading.Event()
        self.leased = False  # whether the step took its lease (and was held there)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            run_step(self.step_name, self.step_args, self.task_id)
        except Exception as error:  # noqa: BLE001  # the test reads it
            self.error = error
        finally:
            self.holding.set()  # a step that never took its lease must not leave the test waiting
            connection.close()

    def held(self) -> None:
        """Called on this thread once the step holds its lease: wait there, past the lease, until let go."""
        self.leased = True
        self.holding.set()
        assert self._go.wait(60), "never let go"

    def go(self) -> None:
        self._go.set()
        self.join(60)
        assert not self.is_alive()


@pytest.fixture
def queue(published, monkeypatch) -> Iterator[Queue]:
    recorded = Queue()

    def publish(task: Task, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        recorded.publish(task, args)

    monkeypatch.setattr(Task, "apply_async", publish)
    yield recorded
    _pusher.wait_idle(timeout=10)  # the last steps' pushes read the database: before its tables are flushed


@pytest.fixture
def held_late(monkeypatch) -> Callable[..., LateDelivery]:
    """Makes a held delivery of a message: the first lease its thread takes holds it there. Its leases are never
    renewed, as a host cut off from the database renews none (a renewal racing the test's ageing of a lease would
    keep the row from the sweeper)."""
    holding, hold = fencing.holding, Heartbeat.hold

    @contextmanager
    def held_once(*leases: fencing.Lease) -> Iterator[None]:
        with holding(*leases):
            thread = threading.current_thread()
            if isinstance(thread, LateDelivery) and not thread.holding.is_set():
                thread.held()
            yield

    def hold_unless_held(self: Heartbeat, *row: Any) -> None:
        if not isinstance(threading.current_thread(), LateDelivery):
            hold(self, *row)

    monkeypatch.setattr(fencing, "holding", held_once)
    monkeypatch.setattr(Heartbeat, "hold", hold_unless_held)

    def start(name: str, args: tuple[Any, ...], task_id: str = LATE) -> LateDelivery:
        late = LateDelivery(name, args, task_id)
        late.start()
        assert late.holding.wait(30)
        assert late.leased, f"{name}{args} ended without taking its lease ({late.error!r})"
        return late

    return start


def lapse_and_sweep(research_id: Any) -> dict[str, int]:
    """The late delivery's leases lapse (its host stopped renewing them), and the sweeper runs; what it did."""
    long_ago = timezone.now() - timedelta(hours=1)
    for model in LEASED:
        model.objects.filter(claimed_by__startswith=f"{LATE} ").update(claimed_at=long_ago)
    done = steps.sweep()
    assert done, "the sweeper re-queued nothing"
    return done


def footprint(research_id: Any) -> dict[str, list[dict[str, Any]]]:
    """Every row of the research, whole (its events numbered first: their numbers come after their commit), but
    when a lease was last renewed: a held delivery's heartbeat may renew its own lease at any moment."""
    _pusher.wait_idle(timeout=10)
    numbering.number(research_id)
    rows = {}
    models = (Research, FollowUpQuestion, SerpQuery, Website, Page, Extract, Event, Document, ReportSection)
    for model in (*models, MemoryItem, AskedQuestion):
        key = "pk" if model is Research else "research_id"
        found = model.objects.filter(**{key: research_id}).order_by("pk").values()
        rows[model.__name__] = [{k: v for k, v in row.items() if k != "claimed_at"} for row in found]
    return rows


def named(step: dispatch.StepRef[Any], parent: bool | None = None) -> Callable[[str, tuple[Any, ...]], bool]:
    """Messages of `step` (for the planning: of a parent query's children, or of the top level)."""

    def wanted(name: str, args: tuple[Any, ...]) -> bool:
        if name != step.name:
            return False
        return parent is None or (args[1] is not None) == parent

    return wanted


KINDS = {
    "plan_top": (named(dispatch.PLAN, parent=False), "fixed"),
    "search": (named(dispatch.SEARCH), "fixed"),
    "scrape": (named(dispatch.SCRAPE), "fixed"),
    "analyze": (named(dispatch.ANALYZE), "fixed"),
    "review": (named(dispatch.REVIEW), "fixed"),
    "plan_children": (named(dispatch.PLAN, parent=True), "fixed"),
    "coverage": (named(dispatch.COVERAGE), "adaptive"),
    "report": (named(dispatch.REPORT), "fixed"),
    "section": (named(dispatch.SECTION), "fixed"),
    "assemble": (named(dispatch.ASSEMBLE), "fixed"),
}


def start(user: Any, queue: Queue, mode: str) -> Research:
    research = services.create_with_answers(user, "How do heat pumps cope with cold winters?", [("Where?", "Nordic")])
    services.start_research(research, None, breadth=2, depth=2, mode=mode)
    return research


@pytest.mark.parametrize("back", ["after the new delivery's store", "before the new delivery's store"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_step_held_past_its_lease_writes_nothing_when_it_comes_back(
    kind, back, user, research_model, queue, held_late
) -> None:
    wanted, mode = KINDS[kind]
    queue.analyze_apart = kind == "analyze"
    research = start(user, queue, mode)
    # given the step's first delivery, holding its lease on a host that is then cut off
    name, args = queue.run_until(wanted)
    late = held_late(name, args)
    # when its lease lapses, the sweeper hands its row to a new delivery, which does the work, or has only taken
    # the lease when the first comes back (its state has not moved on: only the lease tells the first it is late)
    swept = lapse_and_sweep(research.pk)
    again = queue.run_until(lambda n, a: n == name and a == args)
    second = held_late(*again, task_id="second-delivery") if back.startswith("before") else None
    if second is None:
        queue.run(again)
    before = footprint(research.pk)
    # and then the first delivery comes back and reaches its writes
    late.go()
    # then they were rejected: not one row of the research changed
    assert isinstance(late.error, LeaseLost), (swept, late.error)
    assert footprint(research.pk) == before
    # and the research finishes as an undisturbed one does: one report, every step's work counted once
    if second is not None:
        second.go()
        assert second.error is None
    queue.run_all()
    finished_once(research.pk)


def finished_once(research_id: Any) -> None:
    research = Research.objects.get(pk=research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert Document.objects.filter(research_id=research_id, kind=DocumentKind.REPORT).count() == 1
    seqs = list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    events = Counter(Event.objects.filter(research_id=research_id).values_list("type", flat=True))
    assert events[EventType.RESEARCH_STARTED] == events[EventType.REPORT_WRITING_SUCCESSFUL] == 1
    queries = SerpQuery.objects.filter(research_id=research_id)
    assert events[EventType.NEW_SERP_QUERY] == queries.count()
    assert events[EventType.GOT_WEBSITES] == queries.exclude(websites=None).count()
    analysed = Event.objects.filter(research_id=research_id, type=EventType.ANALYZED)
    by_website = Counter(event.data["website_id"] for event in analysed)
    assert by_website and max(by_website.values()) == 1
    assert research.pending_queries == 0
    extracts = Extract.objects.filter(research_id=research_id).values_list("website_id", "position")
    assert len(set(extracts)) == len(extracts)


def late_then_done_again(queue: Queue, held_late: Callable[..., LateDelivery], research_id: Any, step: Any) -> None:
    """The next message of `step` held past its lease, the sweeper's re-queue run to the end, then the first let
    go: it must end with LeaseLost, every row of the research as it was."""
    name, args = queue.run_until(named(step))
    late = held_late(name, args)
    lapse_and_sweep(research_id)
    queue.run_all()
    before = footprint(research_id)
    late.go()
    assert isinstance(late.error, LeaseLost)
    assert footprint(research_id) == before


def test_late_follow_up_questions_write_nothing(user, fake_llm, queue, held_late) -> None:
    research = services.create_draft(user, "How do heat pumps cope with cold winters?", 2)
    late_then_done_again(queue, held_late, research.pk, dispatch.FOLLOWUPS)
    assert FollowUpQuestion.objects.filter(research=research).count() == 2
    assert Research.objects.get(pk=research.pk).status == ResearchStatus.AWAITING_ANSWERS


def test_a_late_answer_writes_nothing(user, research_model, queue, held_late) -> None:
    research = start(user, queue, "fixed")
    queue.run_all()
    asked = ask.ask(Research.objects.get(pk=research.pk), "Which heat pumps work at minus twenty?")
    late_then_done_again(queue, held_late, research.pk, dispatch.ANSWER)
    answered = AskedQuestion.objects.get(pk=asked.pk)
    assert answered.status == AnswerStatus.ANSWERED and answered.answer
    written = Event.objects.filter(research_id=research.pk, type=EventType.ANSWER_WRITTEN)
    assert written.count() == 1
