"""Celery tasks: thin wrappers that take a row id and hand off to a pipeline function.

Each task is safe to run twice or to be killed mid-way: the pipeline claims rows with conditional updates and
commits results and follow-on work together. Transient errors the clients could not ride out are retried here
with backoff; when retries run out, `on_failure` records what that means for the research.
"""

import logging
import threading
import time
from typing import Any

import kombu.exceptions
import redis.exceptions
from celery import Task, shared_task
from celery.signals import task_postrun, task_prerun, task_received
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection
from django.db.models import Model

from research.models import ReportSection, Research, SerpQuery, Website
from workers.errors import ResearchStopped, TransientError
from workers.pipeline import analyze, followups, heartbeat, lifecycle, plan, recovery, report, review, scrape, search

log = logging.getLogger(__name__)


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

    @property
    def max_retries(self) -> int:  # read at call time, so deployments (and tests) can tune it
        return settings.TASK_MAX_RETRIES

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        handler = FAILURE_HANDLERS.get(self.name)
        if handler is None or isinstance(exc, INFRASTRUCTURE_ERRORS):
            return  # infrastructure failed, not the step: the sweeper re-queues it once it is back
        try:
            handler(*args, exc)
        except ResearchStopped:
            pass  # the research ended meanwhile: nothing to record against it
        except Exception:
            log.exception("failure handler of %s failed", self.name)


@shared_task(base=ResearchTask, bind=True)
def generate_followups_task(self: Task, research_id: str) -> None:
    """Write and store a draft's follow-up questions, once."""
    followups.generate_followups(research_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def start_research_task(self: Task, research_id: str) -> None:
    """Move a queued research to running and queue the planning of its top-level queries."""
    lifecycle.start_research(research_id)


@shared_task(base=ResearchTask, bind=True)
def plan_queries_task(self: Task, research_id: str, parent_id: int | None) -> None:
    """Write the top-level queries (parent None) or a finished query's children."""
    plan.plan_queries(research_id, parent_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def run_query_task(self: Task, query_id: int) -> None:
    """Search one query and queue its websites."""
    search.run_query(query_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def scrape_website_task(self: Task, website_id: int) -> None:
    """Fetch one website's page (once per URL per research) and queue its analysis."""
    scrape.scrape_website(website_id)


@shared_task(base=ResearchTask, bind=True)
def analyze_website_task(self: Task, website_id: int) -> None:
    """Extract facts and verified quotes from one website for its query's objective."""
    analyze.analyze_website(website_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def review_query_task(self: Task, query_id: int) -> None:
    """Update the memory with a query's branch, evaluate it (adaptive mode), finish it and decide its children."""
    review.review_query(query_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def evaluate_coverage_task(self: Task, research_id: str) -> None:
    """Every branch stopped (adaptive mode): add a round of gap-filling branches, or hand on to the report."""
    review.evaluate_coverage(research_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def write_report_task(self: Task, research_id: str) -> None:
    """Write, verify and store the report, once."""
    report.write_report(research_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def write_section_task(self: Task, section_id: int) -> None:
    """Write, verify and store one section of the report, once; the last one queues the assembly."""
    report.write_section(section_id, task_id=self.request.id)


@shared_task(base=ResearchTask, bind=True)
def assemble_report_task(self: Task, research_id: str) -> None:
    """Every section written: assemble, verify and store the report, once, and complete the research."""
    report.assemble_report(research_id, task_id=self.request.id)


@shared_task(acks_late=True, ignore_result=True)
def sweep_task() -> dict[str, int]:
    """Re-queue work whose lease ran out (run by Celery beat every SWEEP_INTERVAL seconds)."""
    return recovery.sweep()


FAILURE_HANDLERS = {
    generate_followups_task.name: followups.followups_failed,
    start_research_task.name: lifecycle.start_failed,
    plan_queries_task.name: plan.planning_failed,
    run_query_task.name: search.search_failed,
    scrape_website_task.name: scrape.scrape_failed,
    analyze_website_task.name: analyze.analysis_failed,
    review_query_task.name: review.review_failed,
    evaluate_coverage_task.name: review.coverage_failed,
    write_report_task.name: report.report_failed,
    write_section_task.name: report.section_failed,
    assemble_report_task.name: report.report_failed,
}


# The row each step works on, from its task's arguments: a worker that receives the message reserves it.
STEP_ROWS = {
    generate_followups_task.name: lambda research_id: (Research, research_id),
    start_research_task.name: lambda research_id: (Research, research_id),
    plan_queries_task.name: lambda research_id, parent_id: (
        (SerpQuery, parent_id) if parent_id is not None else (Research, research_id)
    ),
    run_query_task.name: lambda query_id: (SerpQuery, query_id),
    scrape_website_task.name: lambda website_id: (Website, website_id),
    analyze_website_task.name: lambda website_id: (Website, website_id),
    review_query_task.name: lambda query_id: (SerpQuery, query_id),
    evaluate_coverage_task.name: lambda research_id: (Research, research_id),
    write_report_task.name: lambda research_id: (Research, research_id),
    write_section_task.name: lambda section_id: (ReportSection, section_id),
    assemble_report_task.name: lambda research_id: (Research, research_id),
}
_reserved: dict[str, tuple[type[Model], Any]] = {}


@task_received.connect
def reserve_step(request: Any = None, **kwargs: Any) -> None:
    """A message this worker took from the queue, started or not, holds its row's lease (heartbeat.reserve)."""
    row_of = STEP_ROWS.get(request.name)
    if row_of is None:
        return
    try:
        model, pk = row_of(*request.args)
        if heartbeat.reserve(model, pk, request.id):
            _reserved[request.id] = (model, pk)
    except DatabaseError:
        connection.close()  # the next message reconnects; the row stays waiting, for the sweeper
        log.warning("could not reserve the row of %s", request.name, exc_info=True)
    except (TypeError, ValueError):
        log.warning("message of %s with unexpected arguments %r", request.name, request.args)


# A connection this thread used without error this recently goes to its next task without a health check.
HEALTH_CHECK_IDLE = 1.0
_thread = threading.local()


@task_prerun.connect
def replace_broken_connection(**kwargs: Any) -> None:
    """Celery keeps a thread's connection across tasks (CELERY_DB_REUSE_MAX) and would hand one that broke (a
    database restart) to every later task of the thread: one that saw an error is replaced before the next task.

    close_old_connections also makes the next statement a health check (CONN_HEALTH_CHECKS: a `SELECT 1` round
    trip and commit); back to back, a task after one that ended less than HEALTH_CHECK_IDLE ago without error
    skips it: a connection broken in that second fails its statement, and the task is retried like any database
    hiccup, on a new connection."""
    heartbeat.step_started()
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
    reserved = _reserved.pop(task_id or "", None)
    took_up = heartbeat.step_took_up()
    if reserved is not None:
        heartbeat.release(*reserved)
        if took_up:
            return  # the step's claim replaced the reservation: there is nothing to hand back
        try:
            heartbeat.unreserve(*reserved, task_id or "")
        except DatabaseError:
            connection.close()  # the lease lapses instead, and the sweeper re-queues the row
            log.warning("could not hand back the row of task %s", task_id, exc_info=True)
