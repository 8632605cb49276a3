"""Celery tasks: one per step of the registry (workers/steps.py), each a thin wrapper that takes a row id and
hands off to its pipeline function.

Each task is safe to run twice or to be killed mid-way: the pipeline claims rows with conditional updates and
commits results and follow-on work together. Transient errors the clients could not ride out are retried here
with backoff; when retries run out, `on_failure` records what that means for the research.
"""

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import kombu.exceptions
import psycopg
import redis.exceptions
from celery import Task, shared_task
from celery.signals import task_postrun, task_prerun, task_received
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection

from research.control import schedules
from research.text import page_text
from researchsite.celery import app
from workers.errors import ResearchStopped, TransientError
from workers.pipeline import heartbeat, recovery, webhooks
from workers.pipeline.fencing import LeaseLost
from workers.steps import REGISTRY, Step, sweep

log = logging.getLogger(__name__)

page_text.load_extractor()  # at the worker's start, not in its first page's fetch


# A database, Redis or broker that restarts or drops a connection is a transient failure too: retry, and never
# fail the research for it.
INFRASTRUCTURE_ERRORS = (
    OperationalError,
    InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
)


class ResearchTask(Task):
    autoretry_for = (TransientError, *INFRASTRUCTURE_ERRORS)
    retry_backoff = 2
    retry_backoff_max = 60
    retry_jitter = True
    acks_late = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ResearchStopped as exc:
            log.info("%s: %s; nothing more to do", self.name, exc)
            return None
        except LeaseLost as exc:
            # Another delivery holds the step's row now (this one was cut off past its lease): it does the work.
            log.warning("%s: %s; its writes were rolled back", self.name, exc)
            return None

    @property
    def max_retries(self) -> int:  # type: ignore[override]  # read at call time, so deployments (and tests) can tune it
        return settings.TASK_MAX_RETRIES

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        step = REGISTRY.get(self.name)
        handler = step.failed if step else None
        if handler is None or isinstance(exc, INFRASTRUCTURE_ERRORS):
            return  # infrastructure failed, not the step: the sweeper re-queues it once it is back
        try:
            handler(*args, exc)
        except ResearchStopped:
            pass  # the research ended meanwhile: nothing to record against it
        except Exception:
            log.exception("failure handler of %s failed", self.name)


# A step whose database connection died under it (a restart, a failover, a killed backend) runs again on a fresh
# one, this many times, before Celery's retries with backoff take over: every thread's connection dies at once, so a
# retry handed to another thread would meet a dead connection too, and its lease would have to lapse. The first run
# again is at once; each later one waits twice as long as the one before (FRESH_CONNECTION_PAUSE, then 0.2 s, ...,
# 3.1 s in all), as such faults come in bursts: a restart refuses connections for a moment, and a failover or a
# pooler's restart can drop the new connections too.
FRESH_CONNECTION_RUNS = 5
FRESH_CONNECTION_PAUSE = 0.1


def connection_broken() -> bool:
    """Whether this thread's database connection is gone (as opposed to a statement that failed on a live one: a
    lock or statement timeout, which a retry with backoff suits)."""
    return connection.connection is None or not connection.is_usable()


# SQLSTATEs of a connection that died: its backend terminated (an administrator, a shutdown, a crash) or a
# connection exception (class 08). psycopg gives no SQLSTATE to the errors it raises itself when the socket closed.
_LOST = ("57P01", "57P02", "57P03")


def connection_lost(error: BaseException) -> bool:
    """Whether a step's database error is its connection dying under it: the connection is gone, or the error says
    so. The error decides where the step ended a transaction: Django, cleaning up after it, may already have opened
    a fresh connection, which answers."""
    cause = error.__cause__
    if isinstance(cause, psycopg.OperationalError):
        sqlstate = cause.sqlstate
        if sqlstate is None or sqlstate.startswith("08") or sqlstate in _LOST:
            return True
    return connection_broken()


def run_on_fresh_connections(call: Callable[[], object], name: str, task_id: str | None) -> None:
    """Run a step; where its database connection died under it, again on a fresh one (FRESH_CONNECTION_RUNS)."""
    for again in range(FRESH_CONNECTION_RUNS + 1):
        try:
            call()
            return
        except (OperationalError, InterfaceError) as error:
            # Steps are idempotent and a run again keeps the task id, so it takes its own claim up again.
            if again == FRESH_CONNECTION_RUNS or connection.in_atomic_block or not connection_lost(error):
                raise
            connection.close()
            log.warning(
                "%s[%s]: database connection lost; run %d of at most %d, again on a fresh one",
                name,
                task_id,
                again + 2,
                FRESH_CONNECTION_RUNS + 1,
            )
            if again:
                time.sleep(FRESH_CONNECTION_PAUSE * 2 ** (again - 1))


def register(step: Step) -> Task:
    """Make a step of the registry a Celery task of its name (adding the step to the registry if it is new)."""
    REGISTRY[step.name] = step

    def run(self: Task, *args: Any) -> None:
        if step.takes_task_id:
            run_on_fresh_connections(lambda: step.run(*args, task_id=self.request.id), step.name, self.request.id)
        else:
            run_on_fresh_connections(lambda: step.run(*args), step.name, self.request.id)

    run.__doc__ = step.run.__doc__
    return app.task(name=step.name, base=ResearchTask, bind=True)(run)


TASKS: dict[str, Task] = {name: register(step) for name, step in list(REGISTRY.items())}


@shared_task(acks_late=True, ignore_result=True)
def sweep_task() -> dict[str, int]:
    """Re-queue work whose lease ran out (run by Celery beat every SWEEP_INTERVAL seconds), unless another sweep
    holds the fleet's turn (beats on several hosts each send one)."""
    with recovery.sweeper_turn() as mine:
        return sweep() if mine else {"turn_taken": 1}


@shared_task(acks_late=True, ignore_result=True)
def run_schedules_task() -> dict[str, int]:
    """Start the runs of the schedules that are due, and call the webhooks of runs that have ended (run by Celery
    beat every SCHEDULE_TICK seconds; research/control/schedules.py says why a run is never started twice)."""
    # The versions landed are announced first: a run started before its version's call would hold it up a tick.
    delivered = webhooks.deliver_due()
    return {**delivered, **schedules.run_due()}


@task_received.connect
def reserve_step(request: Any = None, **kwargs: Any) -> None:
    """A message this worker took from the queue and has not started within heartbeat.RESERVE_AFTER holds its
    row's lease (heartbeat.Reservations)."""
    step = REGISTRY.get(request.name)
    if step is None:
        return
    try:
        model, pk = step.row(*request.args)
    except (TypeError, ValueError):
        log.warning("message of %s with unexpected arguments %r", request.name, request.args)
        return
    heartbeat.reservations.received(request.id, model, pk)


# A connection this thread used without error this recently goes to its next task without a health check.
HEALTH_CHECK_IDLE = 1.0
_thread = threading.local()


@task_prerun.connect
def replace_broken_connection(task_id: str | None = None, **kwargs: Any) -> None:
    """Celery keeps a thread's connection across tasks (CELERY_DB_REUSE_MAX) and would hand one that broke (a
    database restart) to every later task of the thread: one that saw an error is replaced before the next task.

    close_old_connections also makes the next statement a health check (CONN_HEALTH_CHECKS: a `SELECT 1` round
    trip and commit); back to back, a task after one that ended less than HEALTH_CHECK_IDLE ago without error
    skips it: a connection broken in that second fails its statement, and the task is retried like any database
    hiccup, on a new connection."""
    heartbeat.step_started()
    heartbeat.reservations.started(task_id or "")
    ended = getattr(_thread, "ended", None)
    if (
        ended is not None
        and time.monotonic() - ended < HEALTH_CHECK_IDLE
        and connection.connection is not None
        and not connection.errors_occurred
        and (connection.close_at is None or time.monotonic() < connection.close_at)
    ):
        return
    close_old_connections()


@task_postrun.connect
def release_step(task_id: str | None = None, **kwargs: Any) -> None:
    _thread.ended = time.monotonic()
    reserved = heartbeat.reservations.ended(task_id or "")
    took_up = heartbeat.step_took_up()
    if reserved is not None:
        model, pk, token = reserved
        heartbeat.release(model, pk, token)
        if took_up:
            return  # the step's claim replaced the reservation: there is nothing to hand back
        try:
            heartbeat.unreserve(model, pk, task_id or "")
        except DatabaseError:
            connection.close()  # the lease lapses instead, and the sweeper re-queues the row
            log.warning("could not hand back the row of task %s", task_id, exc_info=True)
