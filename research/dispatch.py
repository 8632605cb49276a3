"""Queue a research step by its Celery task name, now or once the current transaction commits.

The services and the pipeline name the next step here instead of importing `workers.tasks`, which imports the
pipeline: imports then go one way only. A step queued on commit is lost with a rolled-back transaction, as it
must be, and a publish that fails after the commit is left to the sweeper, which re-queues rows whose lease ran
out (robust=True keeps such a failure from raising into the code that committed).
"""

from collections.abc import Iterable
from typing import Any

from celery import Task
from django.db import transaction

from researchsite.celery import app

START = "workers.tasks.start_research_task"
PLAN = "workers.tasks.plan_queries_task"
SEARCH = "workers.tasks.run_query_task"
SCRAPE = "workers.tasks.scrape_website_task"
ANALYZE = "workers.tasks.analyze_website_task"
REPORT = "workers.tasks.write_report_task"


def queue(task_name: str, *args: Any) -> None:
    """Publish the step now."""
    _task(task_name).apply_async(args)


def queue_on_commit(task_name: str, *args: Any) -> None:
    """Publish the step once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: queue(task_name, *args), robust=True)


def queue_each_on_commit(task_name: str, ids: Iterable[Any]) -> None:
    """One step per id, published once the current transaction commits."""
    ids = list(ids)
    if ids:
        transaction.on_commit(lambda: [queue(task_name, row_id) for row_id in ids], robust=True)


def _task(name: str) -> Task:
    if name not in app.tasks:
        # A web process has not imported the task modules yet: load what the app autodiscovers (workers.tasks).
        app.loader.import_default_modules()
    return app.tasks[name]
