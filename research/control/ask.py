"""Ask: a question about a completed research, kept in its conversation and answered by a worker
(workers/pipeline/ask.py) from the research's own findings and stored page text."""

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from research.control import budgets, dispatch
from research.control.dispatch import QUEUED
from research.control.services import ServiceError
from research.models import AskedQuestion, Research, ResearchStatus

MAX_QUESTION_CHARS = 2000


class NotAskable(ServiceError):
    """The research has no finished report to ask about (it runs, waits, or ended without one)."""


def ask(research: Research, question: str) -> AskedQuestion:
    """Add the question to the research's conversation and hand it to a worker once the transaction commits."""
    with transaction.atomic():
        locked = Research.objects.select_for_update(no_key=True).get(pk=research.pk)
        if locked.status != ResearchStatus.COMPLETED:
            raise NotAskable(f"research is {locked.status}: ask once it has completed")
        reason = budgets.spent(locked)
        if reason:
            raise NotAskable(f"research has spent its {budgets.describe(reason, locked)}: no question can be answered")
        last = AskedQuestion.objects.filter(research_id=locked.pk).aggregate(position=Max("position"))["position"]
        asked = AskedQuestion.objects.create(
            research_id=locked.pk,
            position=(last or 0) + 1,
            question=question,
            claimed_at=timezone.now(),
            claimed_by=QUEUED,  # handed on to its answer
        )
        dispatch.ANSWER.on_commit(asked.pk)
    return asked
