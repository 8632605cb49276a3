"""Follow-up questions: the first step of a research, on a worker; the `questions` request only waits for it a while
(research/web/api.py), so a slow model never holds a web request or fails a research."""

import logging

from django.db.models import Exists, OuterRef
from django.utils import timezone

from research.models import EventType, FollowUpQuestion, Research, ResearchStatus
from research.record import transitions
from research.record.events import record_event
from research.record.transactions import research_transaction
from research.types import ResearchId
from workers.agents.engines import engine_for
from workers.clients.llm import charged_to
from workers.pipeline import fencing, heartbeat
from workers.pipeline.fencing import Lease
from workers.pipeline.locks import claim_owner, claimable, lease_token

log = logging.getLogger(__name__)


def generate_followups(research_id: ResearchId, task_id: str | None = None) -> list[str]:
    """Ask the prompt analyzer for a draft's follow-up questions and store them, once; returns those stored (none
    when another delivery holds or did the work, or the draft was cancelled meanwhile).

    The model's errors propagate: its task retries a transient one and marks the research failed
    (`followups_failed`) when retries run out or the error is permanent.
    """
    owner = claim_owner(task_id)
    # A draft without questions, not held by a live delivery: a duplicate while the first still runs leases nothing
    # and makes no model call.
    drafts = Research.objects.filter(claimable(owner), pk=research_id, status=ResearchStatus.DRAFT).exclude(
        Exists(FollowUpQuestion.objects.filter(research=OuterRef("pk")))
    )
    token = lease_token(owner)
    if not drafts.update(claimed_at=timezone.now(), claimed_by=token):
        return []
    heartbeat.took_up()  # the claim replaced the task's reservation
    with fencing.holding(Lease(Research, research_id, token)):
        research = Research.objects.get(pk=research_id)
        with charged_to(research.pk):
            questions = engine_for(research.engine).ask_questions(research.prompt, research.num_questions)
        return _store(research, questions)


def _store(research: Research, questions: list[str]) -> list[str]:
    with research_transaction(research.pk):
        fencing.check()
        # Conditional under the row lock: a delivery that raced this one past a lapsed lease, or a cancel during
        # the model call, leaves nothing to store.
        if not transitions.questions_written(research.pk):
            return []
        FollowUpQuestion.objects.bulk_create(
            FollowUpQuestion(research_id=research.pk, position=index, question=question)
            for index, question in enumerate(questions)
        )
        record_event(research.pk, EventType.FOLLOWUPS_GENERATED, {"questions": questions})
    return questions


def followups_failed(research_id: ResearchId, error: BaseException) -> None:
    """The questions could not be written (a permanent model error, or retries and sweeper attempts used up): the
    draft fails with the reason, which the waiting request, the snapshot and the page show."""
    log.warning("follow-up questions for research %s failed: %s", research_id, error)
    message = str(error) or type(error).__name__
    with research_transaction(research_id):
        if not transitions.draft_failed(research_id, message):
            return  # written meanwhile, cancelled, or failed already
        record_event(research_id, EventType.RESEARCH_FAILED, {"reason": "followups_failed", "error": message[:500]})
