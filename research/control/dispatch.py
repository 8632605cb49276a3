"""Queue a research step, now or once the current transaction commits.

Every step has an address here (a `StepRef`): the services and the pipeline queue the next step through it. A
step queued on commit is lost with a rolled-back transaction, as it must be, and a publish that fails after the
commit is left to the sweeper, which re-queues rows whose lease ran out (robust=True keeps such a failure from
raising into the code that committed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec

import redis
from celery import Task
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from research.models import QueryStatus, Research, ResearchMode, SerpQuery, Website, WebsiteStatus
from research.record import database
from research.types import ResearchId
from researchsite.celery import app

P = ParamSpec("P")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepRef(Generic[P]):
    """A step's address: the name of its Celery task and the arguments it takes (P). The services and the pipeline
    queue the next step through these, typed, instead of importing `workers.tasks`, which imports the pipeline:
    imports then go one way only. What runs at the address, the row it leases, its failure handler, its queue and
    how the sweeper finds it lapsed are declared once, in the step registry (workers/steps.py)."""

    name: str

    def now(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Publish the step now."""
        _positional_only(kwargs)
        queue(self.name, *args)

    def on_commit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Publish the step once the current transaction commits (at once outside a transaction)."""
        _positional_only(kwargs)
        queue_on_commit(self.name, *args)

    def at_priority(self, priority: int, *args: P.args, **kwargs: P.kwargs) -> None:
        """Publish the step now at `priority` (lower runs first): the sweeper re-queues a research's searches,
        fetches, analyses and sections at the priority its backlog gives, as `each_on_commit` first queued them."""
        _positional_only(kwargs)
        queue(self.name, *args, priority=priority)

    def each_on_commit(self: StepRef[[int]], ids: Iterable[int], research_id: ResearchId) -> None:
        """One step per row id of the research's tree, published on commit at the research's backlog priority."""
        queue_each_on_commit(self.name, ids, research_id)


def _positional_only(kwargs: dict[str, Any]) -> None:
    if kwargs:  # a step's message carries its arguments in order: its row's id first
        raise TypeError(f"a step takes positional arguments only, not {sorted(kwargs)}")


# The follow-up questions of a draft: written by a worker, never inside a web request (a model may take minutes).
FOLLOWUPS: StepRef[[str]] = StepRef("workers.tasks.generate_followups_task")
START: StepRef[[str]] = StepRef("workers.tasks.start_research_task")
# A research's top-level queries (parent None) or a finished query's children.
PLAN: StepRef[[str, int | None]] = StepRef("workers.tasks.plan_queries_task")
SEARCH: StepRef[[int]] = StepRef("workers.tasks.run_query_task")
SCRAPE: StepRef[[int]] = StepRef("workers.tasks.scrape_website_task")
ANALYZE: StepRef[[int]] = StepRef("workers.tasks.analyze_website_task")
REVIEW: StepRef[[int]] = StepRef("workers.tasks.review_query_task")
COVERAGE: StepRef[[str]] = StepRef("workers.tasks.evaluate_coverage_task")
REPORT: StepRef[[str]] = StepRef("workers.tasks.write_report_task")
# The report's sections, each a step of its own on the normal queue, and their assembly once all are written.
SECTION: StepRef[[int]] = StepRef("workers.tasks.write_section_task")
ASSEMBLE: StepRef[[str]] = StepRef("workers.tasks.assemble_report_task")
# A question asked of a completed research (its AskedQuestion row), answered from what the research stored.
ANSWER: StepRef[[int]] = StepRef("workers.tasks.answer_question_task")

# `claimed_by` of a row handed on to its step's task (by the step before it, or by the sweeper); with the empty
# value of a row never claimed, these mark a step waiting in the queue: no worker holds it yet.
QUEUED = "queued"
SWEEPER = "sweeper"
WAITING = ("", QUEUED, SWEEPER)

# Fair shares of one fleet: a research's steps get a priority (lower runs first) from how many of its steps
# already wait in the queue. A research with a long backlog yields to one with a short one, so a small research
# started while a large one runs is not stuck behind the large one's backlog, and the large one still gets every
# slot nobody else needs. (backlog below, priority); past the last, LOWEST_PRIORITY.
PRIORITY_BY_BACKLOG = ((8, 0), (32, 3), (128, 6))
LOWEST_PRIORITY = 9
# A search leads to a level of pages and, through them, to the next level's planning: it is on the tree's
# critical path, while most of the fetches and analyses queued before it are not (at a zero-overhead (5,5) on 64
# slots, each search below the second level waited about a second behind its own research's backlog). Searches go
# one priority step ahead of their research's backlog: all they take from the fairness between researches is a
# step, and they are a few in a hundred of a research's steps.
AHEAD_OF_BACKLOG = frozenset({SEARCH.name})


def queue(task_name: str, *args: Any, priority: int | None = None) -> None:
    """Publish the step now."""
    _task(task_name).apply_async(args, **_options(task_name, priority))


def _options(task_name: str, priority: int | None) -> dict[str, Any]:
    """The message's priority: as given, or a step ahead of it for the steps AHEAD_OF_BACKLOG."""
    if priority is None:
        return {}
    if task_name in AHEAD_OF_BACKLOG:
        levels = sorted({level for _, level in PRIORITY_BY_BACKLOG} | {LOWEST_PRIORITY})
        priority = max((level for level in levels if level < priority), default=min(priority, levels[0]))
    return {"priority": priority}


def queue_on_commit(task_name: str, *args: Any) -> None:
    """Publish the step once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: queue(task_name, *args), robust=True)


def tree_finished_step(research_id: ResearchId) -> StepRef[[str]]:
    """The step that follows the last query counted off: in adaptive mode, while gap-filling rounds remain, a
    research that no budget stopped and that no evaluation found good enough yet has its coverage evaluated
    first; otherwise the report. Every place that counts the last query off (and the sweeper) asks here."""
    row = (
        Research.objects.filter(pk=research_id)
        .values("mode", "stop_reason", "gap_rounds", "score", "quality_threshold")
        .first()
    )
    if row is None or row["mode"] != ResearchMode.ADAPTIVE or row["stop_reason"]:
        return REPORT
    if row["gap_rounds"] >= settings.ADAPTIVE_MAX_GAP_ROUNDS:
        return REPORT
    threshold = row["quality_threshold"] or settings.ADAPTIVE_QUALITY_THRESHOLD
    if row["score"] is not None and row["score"] >= threshold:
        return REPORT
    return COVERAGE


def queue_tree_finished_on_commit(research_id: ResearchId) -> None:
    """Queue, on commit, what follows the last query counted off (its lease, the research row's, handed on by
    the caller)."""
    tree_finished_step(research_id).on_commit(str(research_id))


def queue_each_on_commit(task_name: str, ids: Iterable[Any], research_id: ResearchId) -> None:
    """One step per id of the research's tree, published once the current transaction commits, at the priority
    the research's backlog gives (never better than its last batch's while steps queued before still wait)."""
    ids = list(ids)
    if not ids:
        return
    if transaction.get_connection().in_atomic_block:
        # Counted in the transaction that hands the steps on (its own steps are waiting in it already): one
        # statement more there, instead of a statement and a commit of its own after it.
        backlog = waiting_steps(research_id)
        transaction.on_commit(lambda: _publish_each(task_name, ids, research_id, backlog), robust=True)
    else:
        transaction.on_commit(lambda: _publish_each(task_name, ids, research_id), robust=True)


def _publish_each(task_name: str, ids: list[Any], research_id: ResearchId, backlog: int | None = None) -> None:
    if backlog is None:
        try:
            backlog = waiting_steps(research_id)
        except DatabaseError:
            # The steps are committed already: a connection that broke since must not lose their messages (the
            # sweeper would find them only after QUEUE_GRACE_SECONDS). They go at the lowest priority instead.
            connection.close()
            publish_batch(task_name, ids, LOWEST_PRIORITY)
            return
    publish_batch(task_name, ids, research_priority(research_id, backlog, len(ids)))


# A research's backlog rises and falls by the dozen as its steps hand work on (a (4,3) hovers about 32, a bound
# above), and a batch queued just below a bound went ahead of the research's own earlier steps queued just above
# it: on the (4,3) critical-path bench, a second-level page waited 6.9 s while third-level pages queued after it
# ran at once, and its query, on the tree's critical path, with it (a run 2 s longer, about one run in two). So a
# batch takes no better priority than the research's previous batch while steps queued before it still wait: one
# research's steps run in the order they were queued, and researches still yield to each other by backlog. The
# previous batch's priority is kept in Redis, shared by every worker (a key per research, one script call per
# batch); when Redis fails, the backlog alone decides.
PRIORITY_FLOOR_KEY = "dispatch:priority-floor:{research_id}"
PRIORITY_FLOOR_TTL = 3600
_FLOOR_SCRIPT = """
local priority = tonumber(ARGV[1])
if tonumber(ARGV[2]) > 0 then
    local floor = tonumber(redis.call('GET', KEYS[1]) or '-1')
    if floor > priority then priority = floor end
end
redis.call('SET', KEYS[1], priority, 'EX', ARGV[3])
return priority
"""
_floor_lock = threading.Lock()
_floor_scripts: dict[str, Any] = {}


def research_priority(research_id: ResearchId, backlog: int, batch: int) -> int:
    """The priority of a batch of `batch` steps of the research, `backlog` of its steps waiting with the batch's
    own counted: the backlog's, or the research's previous batch's when that runs later (a larger number) and
    steps queued before this batch still wait."""
    priority = step_priority(backlog)
    script = _floor_script()
    key = PRIORITY_FLOOR_KEY.format(research_id=research_id)
    try:
        return int(script(keys=[key], args=[priority, backlog - batch, PRIORITY_FLOOR_TTL]))
    except redis.RedisError:
        log.debug("the priority floor of research %s could not be read; the backlog decides", research_id)
        return priority


def _floor_script() -> Any:
    url = settings.REDIS_URL
    script = _floor_scripts.get(url)
    if script is None:
        with _floor_lock:
            script = _floor_scripts.get(url)
            if script is None:
                client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
                script = _floor_scripts[url] = client.register_script(_FLOOR_SCRIPT)
    return script


def publish_batch(task_name: str, ids: list[Any], priority: int | None = None) -> None:
    """One step per id, their messages sent to the broker together: one round trip on Redis (kombu's publish
    batch, a pipeline), not one per step. A batch whose sending failed may have delivered none, some or all of
    its messages: each is then published on its own, since a step delivered twice is claimed once, and one that
    fails again is left to the sweeper, as a single publish's failure is."""
    options = _options(task_name, priority)
    task = _task(task_name)
    try:
        with app.producer_or_acquire() as producer, producer.batch():
            for row_id in ids:
                task.apply_async((row_id,), producer=producer, **options)
    except Exception:
        log.warning("publishing %d %s steps together failed; publishing each", len(ids), task_name, exc_info=True)
        for row_id in ids:
            queue(task_name, row_id, priority=priority)


def waiting_steps(research_id: ResearchId) -> int:
    """The research's searches, scrapes and analyses handed on and not yet taken up by a worker."""
    # One statement (one round trip, one commit): this runs before every batch of steps a step publishes.
    waiting = ", ".join(["%s"] * len(WAITING))
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM {SerpQuery._meta.db_table} WHERE research_id = %s AND status = %s "
            f"AND claimed_by IN ({waiting})) + (SELECT count(*) FROM {Website._meta.db_table} WHERE research_id = %s "
            f"AND status IN (%s, %s) AND claimed_by IN ({waiting}))",
            [
                *(Research._meta.pk.get_db_prep_value(research_id, connection), QueryStatus.PENDING, *WAITING),
                *(Research._meta.pk.get_db_prep_value(research_id, connection), WebsiteStatus.PENDING),
                *(WebsiteStatus.ANALYZING, *WAITING),
            ],
        )
        return int(cursor.fetchone()[0])


def step_priority(backlog: int) -> int:
    for below, priority in PRIORITY_BY_BACKLOG:
        if backlog < below:
            return priority
    return LOWEST_PRIORITY


def _task(name: str) -> Task:
    if name not in app.tasks:
        # A web process has not imported the task modules yet: load what the app autodiscovers (workers.tasks).
        app.loader.import_default_modules()
    return app.tasks[name]
