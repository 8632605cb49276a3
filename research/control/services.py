"""The use cases that start and stop a research, one function each, for every entry point.

The JSON API, the `start_research` management command, the benchmarks and the browser tests' seed data all go
through these functions, so they all get the same checks: the same limits, the per-user cap, and the
conditional claim that lets only one of two racing starts through. Follow-up questions need the model, so they
are a step of their own on the workers (workers/pipeline/followups.py), queued for the draft made here.
"""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from research.control import budgets, dispatch
from research.control.lifecycle import cancel_research
from research.models import (
    ACTIVE_STATUSES,
    Document,
    DocumentKind,
    EventType,
    Extract,
    FollowUpQuestion,
    Research,
    ResearchMode,
    ResearchStatus,
)
from research.record import transitions
from research.record.events import record_event
from research.record.transactions import research_transaction


class ServiceError(Exception):
    """A request the service refuses; `field` names the input at fault, if one is."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class InvalidInput(ServiceError):
    pass


class TooManyActive(ServiceError):
    pass


class NotStartable(ServiceError):
    """The research is not awaiting answers (started already, running, or over)."""


class NotCancellable(ServiceError):
    pass


class NothingToReport(ServiceError):
    """Only a cancelled research that analysed something and has no report writes one from what it found."""


def make_title(prompt: str, limit: int = 90) -> str:
    first_line = " ".join(prompt.split())
    if len(first_line) <= limit:
        return first_line
    return first_line[:limit].rsplit(" ", 1)[0] + "…"


def create_draft(owner: Any, prompt: str, num_questions: int) -> Research:
    """A new research whose follow-up questions a worker writes: queued once the draft is committed."""
    _check_prompt(prompt)
    if not 1 <= num_questions <= settings.MAX_FOLLOWUP_QUESTIONS:
        raise InvalidInput(f"must be 1..{settings.MAX_FOLLOWUP_QUESTIONS}", "num_questions")
    with transaction.atomic():
        research = Research.objects.create(
            owner=owner,
            prompt=prompt,
            title=make_title(prompt),
            num_questions=num_questions,
            engine=default_engine(),
            # Handed on to its step: the sweeper queues it again if the message is lost (workers/pipeline/recovery.py).
            claimed_at=timezone.now(),
            claimed_by=dispatch.QUEUED,
        )
        record_event(research.pk, EventType.GENERATING_FOLLOWUPS, {"num_questions": num_questions})
        dispatch.FOLLOWUPS.on_commit(str(research.pk))
    return research


def create_with_answers(owner: Any, prompt: str, answered: Sequence[tuple[str, str]]) -> Research:
    """A new research whose questions the client brings already answered: it awaits only its start."""
    _check_prompt(prompt)
    with transaction.atomic():
        research = Research.objects.create(
            owner=owner,
            prompt=prompt,
            title=make_title(prompt),
            num_questions=len(answered),
            status=ResearchStatus.AWAITING_ANSWERS,
            engine=default_engine(),
        )
        FollowUpQuestion.objects.bulk_create(
            FollowUpQuestion(research=research, position=i, question=q, answer=a) for i, (q, a) in enumerate(answered)
        )
    return research


def start_research(
    research: Research,
    answers: Sequence[str] | None,
    breadth: int,
    depth: int,
    budget: Any = None,
    mode: Any = None,
    min_depth: Any = None,
    quality_threshold: Any = None,
    report_length: Any = None,
    review_plan: Any = None,
) -> None:
    """Store the answers (None: keep those stored) and queue the research, within its owner's cap.

    `budget` is the request's {"seconds", "tokens", "usd"} (each optional; the defaults fill in the rest).
    `mode` is "fixed" (default) or "adaptive"; `min_depth` and `quality_threshold` apply to adaptive mode only.
    `report_length` is one of REPORT_LENGTHS or a number of words (default "standard"). `review_plan` (true or
    false, default false): the research waits for its user to review its top-level queries
    (research/control/plan_review.py).
    """
    check_startable(research)
    if not 1 <= breadth <= settings.MAX_BREADTH:
        raise InvalidInput(f"must be 1..{settings.MAX_BREADTH}", "breadth")
    if not 1 <= depth <= settings.MAX_DEPTH:
        raise InvalidInput(f"must be 1..{settings.MAX_DEPTH}", "depth")
    mode, min_depth, quality_threshold = research_mode(mode, min_depth, quality_threshold, depth)
    limits = _budget(budget)
    words = report_words(report_length)
    if review_plan is not None and not isinstance(review_plan, bool):
        raise InvalidInput("must be true or false", "review_plan")
    with transaction.atomic():
        hold_active_slot(research.owner_id)
        for position, answer in enumerate(answers or []):
            FollowUpQuestion.objects.filter(research=research, position=position).update(answer=answer)
        # Conditional: of two racing starts, only one moves the research on and queues it.
        if not transitions.queue_start(
            research.pk,
            breadth=breadth,
            depth=depth,
            budget_seconds=limits.seconds,
            budget_tokens=limits.tokens,
            budget_usd=limits.usd,
            mode=mode,
            min_depth=min_depth,
            quality_threshold=quality_threshold,
            report_words=words,
            review_plan=bool(review_plan),
        ):
            raise NotStartable("research was started already", "research_id")
        dispatch.START.on_commit(str(research.pk))


def lock_owner(owner_id: int) -> None:
    """Lock the owner's row to the end of the transaction: first, before any research row, in every transaction
    that may make one of the owner's researches active (so that they cannot deadlock)."""
    get_user_model().objects.select_for_update().filter(pk=owner_id).first()


def hold_active_slot(owner_id: int) -> None:
    """Inside the transaction that makes one of the owner's researches active (a start, a deepen, a retry of a
    finished one, a cancelled one's report): raise TooManyActive where the owner has MAX_ACTIVE_RESEARCH_PER_USER
    active already. The owner's row stays locked to the commit (lock_owner), so two such requests at once cannot
    both slip under the cap."""
    lock_owner(owner_id)
    active = Research.objects.filter(owner_id=owner_id, status__in=ACTIVE_STATUSES).count()
    if active >= settings.MAX_ACTIVE_RESEARCH_PER_USER:
        raise TooManyActive(
            f"you have {active} researches running; the limit is "
            f"{settings.MAX_ACTIVE_RESEARCH_PER_USER}: wait for one to finish or cancel one"
        )


def check_startable(research: Research) -> None:
    """Raise NotStartable unless the research awaits its answers: its questions must exist before it can start."""
    if research.status == ResearchStatus.DRAFT:
        raise NotStartable("the follow-up questions are still being written; start once they are ready", "research_id")
    if research.status != ResearchStatus.AWAITING_ANSWERS:
        raise NotStartable(f"research is {research.status}; only one awaiting answers can start", "research_id")


def research_mode(mode: Any, min_depth: Any, quality_threshold: Any, depth: int) -> tuple[str, int | None, int | None]:
    """The mode a research starts in, with its adaptive settings: in adaptive mode `depth` is the maximum, a branch
    may stop on quality from `min_depth` (1..depth, default 1) when its score reaches `quality_threshold` (1..10,
    default ADAPTIVE_QUALITY_THRESHOLD); fixed mode takes neither."""
    mode = ResearchMode.FIXED if mode is None else mode
    if mode not in ResearchMode.values:
        raise InvalidInput(f"must be one of: {', '.join(ResearchMode.values)}", "mode")
    if mode == ResearchMode.FIXED:
        for name, value in (("min_depth", min_depth), ("quality_threshold", quality_threshold)):
            if value is not None:
                raise InvalidInput("applies to adaptive mode only", name)
        return mode, None, None
    min_depth = _whole(min_depth, "min_depth", 1, depth, 1)
    threshold = _whole(quality_threshold, "quality_threshold", 1, 10, settings.ADAPTIVE_QUALITY_THRESHOLD)
    return mode, min_depth, threshold


# The report lengths a start may name, in words; or it names a number of words in REPORT_WORDS_RANGE.
REPORT_LENGTHS = {"brief": 1500, "standard": 4000, "long": 10000}
REPORT_WORDS_RANGE = (300, 30000)


def report_words(report_length: Any) -> int:
    """The words a report should have: "standard" when not given, a named length, or a number of words."""
    if report_length is None:
        return REPORT_LENGTHS["standard"]
    if isinstance(report_length, str):
        if report_length not in REPORT_LENGTHS:
            raise InvalidInput(f"must be one of {', '.join(REPORT_LENGTHS)} or a number of words", "report_length")
        return REPORT_LENGTHS[report_length]
    low, high = REPORT_WORDS_RANGE
    # bool is an int in Python; JSON true is not a number. 2000.0 is not a whole number of words either.
    if isinstance(report_length, bool) or not isinstance(report_length, int) or not low <= report_length <= high:
        raise InvalidInput(
            f"must be one of {', '.join(REPORT_LENGTHS)} or a whole number of words from {low} to {high}",
            "report_length",
        )
    return report_length


def _whole(value: Any, name: str, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    # bool is an int in Python; JSON true is not a number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("must be an integer", name)
    if not low <= value <= high:
        raise InvalidInput(f"must be {low}..{high}", name)
    return value


def cancel(research: Research) -> None:
    """Stop an unfinished research and every step of it."""
    if not cancel_research(research.pk):
        research.refresh_from_db(fields=["status"])
        raise NotCancellable(f"research is {research.status} and cannot be cancelled")


TITLE_MAX_CHARS = 200


class StillRunning(ServiceError):
    """A research that is queued, running or writing its report is cancelled before it is deleted."""


def rename(research: Research, title: str) -> Research:
    """Give the research a title of its user's choosing (the report keeps the title it was written with)."""
    title = " ".join(title.split())
    if not title:
        raise InvalidInput("must not be empty", "title")
    if len(title) > TITLE_MAX_CHARS:
        raise InvalidInput(f"must be at most {TITLE_MAX_CHARS} characters", "title")
    transitions.rename(research.pk, title)
    research.refresh_from_db()
    return research


def delete(research: Research) -> None:
    """Delete a research that is not under way, with everything it holds (its tree, events and reports)."""
    with research_transaction(research.pk):
        deleted, _ = Research.objects.filter(pk=research.pk).exclude(status__in=ACTIVE_STATUSES).delete()
    if not deleted:
        raise StillRunning("research is under way: cancel it first")


def expire_drafts(older_than: timedelta) -> int:
    """Delete the drafts never started (follow-up questions asked, then left) made more than `older_than` ago;
    returns how many went."""
    stale = Research.objects.filter(
        status__in=(ResearchStatus.DRAFT, ResearchStatus.AWAITING_ANSWERS), created_at__lt=timezone.now() - older_than
    )
    ids = list(stale.values_list("pk", flat=True)[:500])
    if not ids:
        return 0
    # Conditional again: a draft started meanwhile is kept.
    stale.filter(pk__in=ids).delete()
    return len(ids) - Research.objects.filter(pk__in=ids).count()


def report_what_was_found(research: Research) -> None:
    """Write the report of a cancelled research from what it analysed before the cancel: like a budget stop, the
    research is partial (stop_reason "cancelled"), nothing new is searched, and the report says it is partial."""
    with transaction.atomic():
        lock_owner(research.owner_id)
        _report_cancelled(research)


def _report_cancelled(research: Research) -> None:
    with research_transaction(research.pk):  # the row is locked: its state below holds until the commit
        locked = Research.objects.get(pk=research.pk)
        if locked.status != ResearchStatus.CANCELLED:
            raise NothingToReport(f"research is {locked.status}: only a cancelled research is reported this way")
        if Document.objects.filter(research_id=locked.pk, kind=DocumentKind.REPORT).exists():
            raise NothingToReport("this research has a report already")
        if not Extract.objects.filter(research_id=locked.pk).exists():
            raise NothingToReport("nothing was analysed before the cancel: there is nothing to report")
        hold_active_slot(locked.owner_id)  # it runs again: counted like a start
        # Every query is settled (the cancel stopped the rest), so the report step finds the tree finished.
        transitions.report_cancelled(locked.pk, budgets.CANCELLED)
        record_event(locked.pk, EventType.REPORT_REQUESTED, {"by": "user", "was": ResearchStatus.CANCELLED})
        dispatch.REPORT.on_commit(str(locked.pk))


def default_engine() -> str:
    """The engine a new research gets; settings resolve RESEARCH_ENGINE=auto to llm or extractive."""
    return settings.RESEARCH_ENGINE


def _budget(requested: Any) -> budgets.Budget:
    try:
        return budgets.resolve(requested)
    except budgets.BudgetError as exc:
        raise InvalidInput(exc.message, exc.field) from None


def _check_prompt(prompt: str) -> None:
    if not prompt.strip():
        raise InvalidInput("must not be empty", "prompt")
    if len(prompt) > settings.MAX_PROMPT_CHARS:
        raise InvalidInput(f"must be at most {settings.MAX_PROMPT_CHARS} characters", "prompt")
