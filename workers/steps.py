"""The step registry: every step of a research, declared once.

A step is a Celery task that takes a row id, leases that row and hands off to one pipeline function. Its entry
says what runs (`run`), the row a worker reserves when it receives the message (`row`), what a failure that
retries could not mend means for the research (`failed`), the queue it goes to (`queue`) and how the sweeper
finds it lapsed (`lapsed`). `workers/tasks.py` makes the Celery tasks from this table, the task router and the
sweeper read it, and the rest of the code queues a step through its address in `research/control/dispatch.py`. Adding a
step is one address there, one entry here and its function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from research.control import dispatch
from research.models import AskedQuestion, ReportSection, Research, SerpQuery, StepRow, Website
from workers.pipeline import analyze, ask, followups, lifecycle, plan, recovery, report, review, scrape, search

# Short steps every research waits on (starting, planning, the report's outline and assembly) and the sweeper get
# a queue of their own: a backlog of thousands of fetches and analyses cannot hold them up.
CONTROL = "control"
WORK = "celery"


@dataclass(frozen=True)
class Step:
    ref: dispatch.StepRef[Any]
    run: Callable[..., object]  # what it returns is not used
    row: Callable[..., tuple[type[StepRow], Any]]
    failed: Callable[..., None] | None = None  # called with the step's arguments and the error
    queue: str = WORK
    lapsed: tuple[recovery.Finder, ...] = ()
    # Whether `run` takes the Celery task id (`task_id=`): a step that records who holds its row's lease does.
    takes_task_id: bool = True
    # One row per website (scrapes, analyses): a sweep may re-queue hundreds of them at once, so it does them last.
    per_website: bool = False

    @property
    def name(self) -> str:
        return self.ref.name


def _research(research_id: str) -> tuple[type[StepRow], Any]:
    return Research, research_id


def _query(query_id: int) -> tuple[type[StepRow], Any]:
    return SerpQuery, query_id


def _website(website_id: int) -> tuple[type[StepRow], Any]:
    return Website, website_id


def _planned_row(research_id: str, parent_id: int | None) -> tuple[type[StepRow], Any]:
    # The top-level planning leases the research; a query's children's planning, that query.
    return (SerpQuery, parent_id) if parent_id is not None else (Research, research_id)


STEPS: tuple[Step, ...] = (
    Step(
        dispatch.FOLLOWUPS,
        followups.generate_followups,
        _research,
        followups.followups_failed,
        CONTROL,
        (recovery.lapsed_followups,),
    ),
    Step(
        dispatch.START,
        lifecycle.start_research,
        _research,
        lifecycle.start_failed,
        CONTROL,
        (recovery.lapsed_starts,),
        takes_task_id=False,
    ),
    Step(
        dispatch.PLAN,
        plan.plan_queries,
        _planned_row,
        plan.planning_failed,
        CONTROL,
        (recovery.lapsed_top_planning, recovery.lapsed_child_planning),
    ),
    Step(dispatch.SEARCH, search.run_query, _query, search.search_failed, WORK, (recovery.lapsed_searches,)),
    Step(
        dispatch.SCRAPE,
        scrape.fetch_and_analyze,
        _website,
        scrape.fetch_or_analysis_failed,
        WORK,
        (recovery.lapsed_scrapes,),
        per_website=True,
    ),
    Step(
        dispatch.ANALYZE,
        analyze.analyze_website,
        _website,
        analyze.analysis_failed,
        WORK,
        (recovery.lapsed_analyses,),
        per_website=True,
    ),
    Step(dispatch.REVIEW, review.review_query, _query, review.review_failed, WORK, (recovery.lapsed_reviews,)),
    Step(
        dispatch.COVERAGE,
        review.evaluate_coverage,
        _research,
        review.coverage_failed,
        WORK,
        (recovery.lapsed_coverage,),
    ),
    Step(
        dispatch.REPORT,
        report.write_report,
        _research,
        report.report_failed,
        CONTROL,
        (recovery.lapsed_reports, recovery.stuck_reports),
    ),
    Step(
        dispatch.SECTION,
        report.write_section,
        lambda section_id: (ReportSection, section_id),
        report.section_failed,
        WORK,
        (recovery.lapsed_sections,),
    ),
    Step(
        dispatch.ASSEMBLE,
        report.assemble_report,
        _research,
        report.report_failed,
        CONTROL,
        (recovery.lapsed_assembly,),
    ),
    Step(
        dispatch.ANSWER,
        ask.answer_question,
        lambda question_id: (AskedQuestion, question_id),
        ask.answer_failed,
        WORK,
        (recovery.lapsed_answers,),
    ),
)

# Task name → step: the registry the tasks, the router and the sweeper read (`workers.tasks.register` adds to it).
REGISTRY: dict[str, Step] = {step.name: step for step in STEPS}
# Tasks that are no step (no row, no lease) and their queue: the sweeper itself.
OTHER_ROUTES = {"workers.tasks.sweep_task": CONTROL}


def route(name: str, args: Any = None, kwargs: Any = None, options: Any = None, task: Any = None, **kw: Any) -> Any:
    """Celery's task router (CELERY_TASK_ROUTES names it): each step's queue, from its entry."""
    step = REGISTRY.get(name)
    queue = step.queue if step else OTHER_ROUTES.get(name)
    return {"queue": queue} if queue else None


def sweep() -> dict[str, int]:
    """One sweep (workers/pipeline/recovery.py) over every step of the registry, in its order, but the per-website
    steps last. A research's searches, fetches, analyses and sections go back at its backlog's priority; its few
    planning, review and report steps at the top one, and first: they must not wait behind the hundreds of scrapes
    and analyses a sweep can re-queue for a large research."""
    ordered = sorted(REGISTRY.values(), key=lambda step: step.per_website)
    return recovery.sweep(find for step in ordered for find in step.lapsed)
