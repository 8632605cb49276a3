"""The sweeper: re-queues steps whose lease ran out, so a killed worker or a lost message costs a retry only.

Every step leases its row (`claimed_at`, `attempts`) when it starts. A step that shows no progress for
LEASE_SECONDS — its worker was killed, its message was lost with Redis, its publish never happened — is
re-queued here. Taking the new lease is a conditional UPDATE, so concurrent sweeps publish a row once per
lease, and tasks skip rows that are done, so work already stored is never redone. A row still unfinished after
MAX_ATTEMPTS claims is failed with the reason, as its kind of failure demands (docs/reliability.md).

Each step of the registry (workers/steps.py) names the functions here that find it lapsed (`lapsed_*`); the
housekeeping that belongs to no step runs first. Each records what it did in the sweep's counts, by kind.
"""

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import redis
from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from research.control import budgets, dispatch, services
from research.control.dispatch import SWEEPER, WAITING
from research.control.lifecycle import UNFINISHED_QUERIES, UNFINISHED_WEBSITES, cancel_research, stop_unfinished
from research.models import (
    AnswerStatus,
    AskedQuestion,
    Document,
    DocumentKind,
    FollowUpQuestion,
    PageStatus,
    QueryStatus,
    ReportSection,
    Research,
    ResearchStatus,
    SectionStatus,
    SerpQuery,
    StepRow,
    Website,
    WebsiteStatus,
)
from research.record import numbering, transitions
from workers.errors import ResearchStopped
from workers.pipeline import analyze, ask, followups, lifecycle, plan, report, review, scrape, search

log = logging.getLogger(__name__)

ENDED = [ResearchStatus.CANCELLED, ResearchStatus.FAILED, ResearchStatus.COMPLETED]


@dataclass
class Sweep:
    now: datetime
    lease_cutoff: datetime  # a worker's lease renewed before this has lapsed: the worker is dead
    queue_cutoff: datetime  # a step waiting in the queue since before this may have lost its message
    # A step waiting since before this while the broker holds no message at all has lost its message (Redis emptied,
    # or a publish that failed after its commit)
    idle_cutoff: datetime
    done: Counter
    broker_idle: bool = False
    priorities: dict[Any, int] = field(default_factory=dict)

    def priority(self, research_id: Any) -> int:
        """The priority a research's backlog gives its tree steps, counted once per sweep. A re-queued step goes
        back at the priority it was first queued at: at the top priority, the hundreds of steps a large research
        has waiting past QUEUE_GRACE_SECONDS would all run before a small research's few."""
        if research_id not in self.priorities:
            self.priorities[research_id] = dispatch.step_priority(dispatch.waiting_steps(research_id))
        return self.priorities[research_id]

    def due(self) -> Q:
        """Rows whose step must run again: held by a worker that stopped renewing its lease, or waiting in the
        queue for longer than QUEUE_GRACE_SECONDS (its message may have been lost), or for longer than
        IDLE_BROKER_GRACE while the broker holds no message at all (then it was lost: Redis emptied by a restart, a
        worker killed between its commit and its publish)."""
        waiting = Q(claimed_by__in=WAITING)
        queued_since = Q(claimed_at__lt=self.queue_cutoff) | Q(
            claimed_at__isnull=True, created_at__lt=self.queue_cutoff
        )
        if self.broker_idle:
            queued_since |= Q(claimed_at__lt=self.idle_cutoff) | Q(
                claimed_at__isnull=True, created_at__lt=self.idle_cutoff
            )
        return (~waiting & Q(claimed_at__lt=self.lease_cutoff)) | (waiting & queued_since)

    def retry_or_fail(
        self,
        row: StepRow,
        kind: str,
        fail: Callable[[RuntimeError], Any],
        requeue: Callable[[], Any],
        reason: str,
        failed_kind: str = "",
        **conditions: Any,
    ) -> None:
        """Queue the row's step again. A lapsed lease counts as an attempt (a worker took the step up and died
        on it), and a row claimed MAX_ATTEMPTS times fails instead; time spent waiting in the queue never counts."""
        held = row.claimed_by not in WAITING
        if held and row.attempts >= settings.MAX_ATTEMPTS:
            with suppress(ResearchStopped):  # the research ended meanwhile
                fail(RuntimeError(reason))
            self.done[failed_kind or f"{kind}_failed"] += 1
        elif self.take_lease(type(row), row.pk, count_attempt=held, **conditions):
            requeue()
            self.done[kind] += 1

    def take_lease(self, model: type[StepRow], pk: Any, count_attempt: bool = True, **conditions: Any) -> bool:
        """Hand a due row to a new delivery of its step; True if this sweep got it (and so must queue it)."""
        return bool(
            model.objects.filter(self.due(), pk=pk, **conditions).update(
                claimed_at=self.now, claimed_by=SWEEPER, attempts=F("attempts") + int(count_attempt)
            )
        )


Finder = Callable[[Sweep], None]


def sweep(finders: Iterable[Finder]) -> dict[str, int]:
    """One pass over all unfinished work: the housekeeping, then each step's `finders` (from the step registry);
    returns what it did, by kind."""
    now = timezone.now()
    state = Sweep(
        now,
        now - timedelta(seconds=settings.LEASE_SECONDS),
        now - timedelta(seconds=settings.QUEUE_GRACE_SECONDS),
        now - timedelta(seconds=idle_broker_grace()),
        Counter(),
        broker_idle(),
    )
    for find in (*HOUSEKEEPING, *finders):
        find(state)
    if state.done:
        log.warning("sweep re-queued or failed: %s", dict(state.done))
    return dict(state.done)


# The fleet's one turn to sweep: a Redis key holding the sweep's token, which lapses after a lease.
SWEEP_TURN_KEY = "sweep-turn"
_RELEASE_TURN = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


@contextmanager
def sweeper_turn() -> Iterator[bool]:
    """Whether this sweep holds the fleet's one turn, for as long as it runs. A deployment runs celery beat beside
    each group of workers, so that a host cut off from the network does not stop the sweeps; the sweeps they send
    then take turns: one that finds another running does nothing. A sweeper cut off mid-sweep holds the turn no
    longer than a lease. (Two sweeps at once would still re-queue each row once: every re-queue is a conditional
    update; the turn keeps them from doing the same reads twice.) Without Redis there is no turn to take, and the
    sweep goes on: it is safe alone."""
    token = uuid.uuid4().hex
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    try:
        mine = bool(client.set(SWEEP_TURN_KEY, token, nx=True, px=settings.LEASE_SECONDS * 1000))
        held = mine
    except redis.RedisError:
        mine, held = True, False
    try:
        yield mine
    finally:
        if held:
            with suppress(redis.RedisError):
                client.eval(_RELEASE_TURN, 1, SWEEP_TURN_KEY, token)
        client.close()


def idle_broker_grace() -> float:
    """How long a step may wait, with no message on the broker, before its message counts as lost: two sweeps (a
    worker takes a message off the broker and reserves its row within milliseconds; a duplicate is a no-op, so this
    need not be long), at least 5 s, at most a lease."""
    return min(settings.LEASE_SECONDS, max(2 * settings.SWEEP_INTERVAL, 5))


def broker_idle() -> bool:
    """Whether no message waits in the broker's queues (Redis only; another broker counts as busy)."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return False
    try:
        client = redis.Redis.from_url(url, socket_timeout=5)
        for queue in ("celery", "control"):  # with their priority lists, named after them
            for key in client.scan_iter(match=f"{queue}*"):
                if client.type(key) == b"list" and client.llen(key):
                    return False
        return True
    except redis.RedisError:
        return False


def _stop_ended(state: Sweep) -> None:
    """A research that ended while its worker died before stopping its unfinished rows."""
    unfinished_rows = Q(Exists(Website.objects.filter(research=OuterRef("pk"), status__in=UNFINISHED_WEBSITES))) | Q(
        Exists(SerpQuery.objects.filter(research=OuterRef("pk"), status__in=UNFINISHED_QUERIES))
    )
    ended = Research.objects.filter(unfinished_rows, status__in=ENDED, finished_at__lt=state.lease_cutoff)
    for research_id in ended.values_list("pk", flat=True):
        stop_unfinished(research_id, state.now)
        state.done["stopped"] += 1


def _unnumbered_events(state: Sweep) -> None:
    """Events committed by a process that died before its push numbered them (research/record/events.py)."""
    # A push numbers them within PUSH_INTERVAL of their commit; numbering twice is harmless (nothing is left).
    for research_id in numbering.unnumbered(older_than=state.now - timedelta(seconds=5)):
        numbering.number(research_id)
        state.done["events_numbered"] += 1


def _check_budgets(state: Sweep) -> None:
    """Stop a research past its budget even when no step of it runs (its time budget, mostly), and finish the
    stop of one whose worker died half-way through it."""
    for research_id in budgets.half_stopped():
        budgets.finish_stop(research_id)
        state.done["budget_stop"] += 1
    for research_id in Research.objects.filter(status=ResearchStatus.RUNNING, stop_reason="").values_list(
        "pk", flat=True
    ):
        if budgets.check(research_id):
            state.done["budget_stop"] += 1


def lapsed_followups(state: Sweep) -> None:
    """A draft whose follow-up questions' worker died or whose message was lost: queued again; past MAX_ATTEMPTS
    it fails, as a model that cannot write them does. Drafts made before the questions became a step of their own
    were never handed on (no `claimed_at`): they are left as they are."""
    drafts = Research.objects.filter(state.due(), status=ResearchStatus.DRAFT, claimed_at__isnull=False).exclude(
        Exists(FollowUpQuestion.objects.filter(research=OuterRef("pk")))
    )
    for research in drafts:
        state.retry_or_fail(
            research,
            "followups",
            partial(followups.followups_failed, research.pk),
            partial(dispatch.FOLLOWUPS.now, str(research.pk)),
            f"no follow-up questions after {research.attempts} attempts",
            status=ResearchStatus.DRAFT,
        )


def _expired_drafts(state: Sweep) -> None:
    """Drafts never started, older than DRAFT_MAX_AGE_HOURS: deleted, so the library keeps what was researched."""
    deleted = services.expire_drafts(timedelta(hours=settings.DRAFT_MAX_AGE_HOURS))
    if deleted:
        state.done["drafts_expired"] += deleted


def _expired_reviews(state: Sweep) -> None:
    """A plan left waiting for its review for PLAN_REVIEW_MAX_AGE_HOURS: the research is cancelled (by "expiry"),
    so it no longer counts against its user's active researches; what it planned stays readable."""
    cutoff = state.now - timedelta(hours=settings.PLAN_REVIEW_MAX_AGE_HOURS)
    stale = Research.objects.filter(status=ResearchStatus.AWAITING_REVIEW).filter(
        Q(claimed_at__lt=cutoff) | Q(claimed_at__isnull=True, updated_at__lt=cutoff)
    )
    for research_id in stale.values_list("pk", flat=True):
        if cancel_research(research_id, by="expiry", statuses=[ResearchStatus.AWAITING_REVIEW]):
            state.done["review_expired"] += 1


def lapsed_starts(state: Sweep) -> None:
    """A research waiting for a worker to start it: queued again, never failed (queue time is no attempt)."""
    for research in Research.objects.filter(state.due(), status=ResearchStatus.QUEUED):
        state.retry_or_fail(
            research,
            "start",
            partial(lifecycle.start_failed, research.pk),
            partial(dispatch.START.now, str(research.pk)),
            f"it was taken up {research.attempts} times and never started",
            status=ResearchStatus.QUEUED,
        )


def _running(state: Sweep) -> QuerySet:
    return Research.objects.filter(state.due(), status=ResearchStatus.RUNNING)


def lapsed_top_planning(state: Sweep) -> None:
    for research in _running(state).exclude(Exists(SerpQuery.objects.filter(research=OuterRef("pk"), depth=1))):
        state.retry_or_fail(
            research,
            "plan_top",
            partial(plan.planning_failed, str(research.pk), None),
            partial(dispatch.PLAN.now, str(research.pk), None),
            f"no top-level queries after {research.attempts} attempts",
            status=ResearchStatus.RUNNING,
        )


def lapsed_reports(state: Sweep) -> None:
    """Every query counted off and nothing under way, and the report is what the research is due
    (research/control/dispatch.py tree_finished_step)."""
    _tree_finished(state, dispatch.REPORT, "report", report.report_failed)


def lapsed_coverage(state: Sweep) -> None:
    """Every query counted off and nothing under way, and (adaptive mode) the coverage evaluation is due first."""
    _tree_finished(state, dispatch.COVERAGE, "coverage evaluation", review.coverage_failed)


def _tree_finished(
    state: Sweep, step: dispatch.StepRef[[str]], what: str, fail: Callable[[str, BaseException], Any]
) -> None:
    for research in _running(state).filter(pending_queries__lte=0):
        if dispatch.tree_finished_step(research.pk) != step:
            continue
        state.retry_or_fail(
            research,
            "coverage" if step == dispatch.COVERAGE else "report",
            partial(fail, str(research.pk)),
            partial(step.now, str(research.pk)),
            f"no {what} after {research.attempts} attempts",
            status=ResearchStatus.RUNNING,
            pending_queries__lte=0,
        )


def stuck_reports(state: Sweep) -> None:
    """A report writer that died before it planned the sections (its lease lapsed): back to running, so the
    report can be claimed again (and record a new report_writing_start). Once the sections are planned they have
    leases of their own (lapsed_sections), and the assembly its own (lapsed_assembly)."""
    stuck = Research.objects.filter(status=ResearchStatus.REPORTING, claimed_at__lt=state.lease_cutoff).exclude(
        Exists(
            Document.objects.filter(
                research=OuterRef("pk"), kind=DocumentKind.REPORT, version=OuterRef("report_version")
            )
        )
    )
    for research in stuck.exclude(_has_sections()):
        if research.attempts >= settings.MAX_ATTEMPTS:
            report.report_failed(str(research.pk), RuntimeError(f"no report after {research.attempts} attempts"))
            state.done["report_failed"] += 1
        elif transitions.report_writer_lost(research.pk, state.lease_cutoff, state.now):
            dispatch.REPORT.now(str(research.pk))
            state.done["report_retry"] += 1


def _has_sections() -> Exists:
    return Exists(ReportSection.objects.filter(research=OuterRef("pk"), version=OuterRef("report_version")))


def lapsed_assembly(state: Sweep) -> None:
    """Every section of the report written, and its assembly's worker died or its message was lost."""
    unwritten = ReportSection.objects.filter(research=OuterRef("pk"), version=OuterRef("report_version")).exclude(
        status=SectionStatus.WRITTEN
    )
    ready = Research.objects.filter(
        state.due(), _has_sections(), ~Exists(unwritten), status=ResearchStatus.REPORTING
    ).exclude(
        Exists(
            Document.objects.filter(
                research=OuterRef("pk"), kind=DocumentKind.REPORT, version=OuterRef("report_version")
            )
        )
    )
    for research in ready:
        state.retry_or_fail(
            research,
            "assemble",
            partial(report.report_failed, str(research.pk)),
            partial(dispatch.ASSEMBLE.now, str(research.pk)),
            f"no report assembled after {research.attempts} attempts",
            failed_kind="report_failed",
            status=ResearchStatus.REPORTING,
        )


def lapsed_sections(state: Sweep) -> None:
    """A report section whose writer died or whose message was lost: queued again; past MAX_ATTEMPTS the
    report fails, as a report that could not be written does."""
    unwritten = [SectionStatus.PENDING, SectionStatus.WRITING]
    rows = ReportSection.objects.filter(
        state.due(),
        research__status=ResearchStatus.REPORTING,
        version=F("research__report_version"),
        status__in=unwritten,
    )
    for section in rows:
        state.retry_or_fail(
            section,
            "section",
            partial(report.section_failed, section.pk),
            partial(dispatch.SECTION.at_priority, state.priority(section.research_id), section.pk),
            f"section “{section.title}” not written after {section.attempts} attempts",
            status__in=unwritten,
        )


def lapsed_searches(state: Sweep) -> None:
    searching = [QueryStatus.PENDING, QueryStatus.SEARCHING]
    rows = SerpQuery.objects.filter(state.due(), research__status=ResearchStatus.RUNNING, status__in=searching)
    for query in rows:
        state.retry_or_fail(
            query,
            "query",
            partial(search.search_failed, query.pk),
            partial(dispatch.SEARCH.at_priority, state.priority(query.research_id), query.pk),
            f"no search result after {query.attempts} attempts",
            status__in=searching,
        )


def lapsed_reviews(state: Sweep) -> None:
    """A review whose worker died or whose message was lost: queued again; past MAX_ATTEMPTS the branch is judged
    without a model (review.review_failed), so it still finishes."""
    rows = SerpQuery.objects.filter(state.due(), research__status=ResearchStatus.RUNNING, status=QueryStatus.REVIEWING)
    for query in rows:
        state.retry_or_fail(
            query,
            "review",
            partial(review.review_failed, query.pk),
            partial(dispatch.REVIEW.now, query.pk),
            f"no review after {query.attempts} attempts",
            status=QueryStatus.REVIEWING,
        )


def lapsed_child_planning(state: Sweep) -> None:
    unplanned = SerpQuery.objects.filter(
        state.due(),
        research__status=ResearchStatus.RUNNING,
        status=QueryStatus.DONE,
        children_planned=False,
        depth__lt=F("research__depth"),
    )
    for query in unplanned:
        state.retry_or_fail(
            query,
            "plan_children",
            partial(plan.planning_failed, str(query.research_id), query.pk),
            partial(dispatch.PLAN.now, str(query.research_id), query.pk),
            f"no queries under “{query.query}” after {query.attempts} attempts",
            status=QueryStatus.DONE,
            children_planned=False,
        )


def lapsed_scrapes(state: Sweep) -> None:
    _websites(state, [WebsiteStatus.PENDING, WebsiteStatus.SCRAPING], "scrape", scrape.scrape_failed, dispatch.SCRAPE)


def lapsed_analyses(state: Sweep) -> None:
    _websites(state, [WebsiteStatus.ANALYZING], "analyze", analyze.analysis_failed, dispatch.ANALYZE)


def _websites(
    state: Sweep,
    statuses: list[str],
    kind: str,
    fail: Callable[[int, BaseException], Any],
    step: dispatch.StepRef[[int]],
) -> None:
    rows = Website.objects.filter(state.due(), research__status=ResearchStatus.RUNNING, status__in=statuses).exclude(
        # Waiting on a page another step is fetching: that fetcher's lease stands for it.
        status=WebsiteStatus.SCRAPING,
        page__status=PageStatus.FETCHING,
        page__claimed_at__gte=state.lease_cutoff,
    )
    for website in rows:
        state.retry_or_fail(
            website,
            kind,
            partial(fail, website.pk),
            partial(step.at_priority, state.priority(website.research_id), website.pk),
            f"abandoned after {website.attempts} attempts",
            failed_kind="website_failed",
            status=website.status,
        )


# The sweeper's work that belongs to no step, done first in every sweep.
HOUSEKEEPING: tuple[Finder, ...] = (_stop_ended, _unnumbered_events, _check_budgets, _expired_drafts, _expired_reviews)


def lapsed_answers(state: Sweep) -> None:
    """A question whose answer's worker died or whose message was lost: queued again; past MAX_ATTEMPTS it fails
    with the reason, and the rest of the research is untouched."""
    unanswered = [AnswerStatus.PENDING, AnswerStatus.WRITING]
    for asked in AskedQuestion.objects.filter(state.due(), status__in=unanswered):
        state.retry_or_fail(
            asked,
            "answer",
            partial(ask.answer_failed, asked.pk),
            partial(dispatch.ANSWER.now, asked.pk),
            f"no answer after {asked.attempts} attempts",
            status__in=unanswered,
        )
