"""Follow-up questions: the first step of a research, run inside the `questions` request."""

import logging
from typing import Any

from django.utils import timezone

from research.events import record_event
from research.models import EventType, FollowUpQuestion, Research, ResearchStatus
from research.transactions import research_transaction
from workers.agents.engines import engine_for
from workers.clients.llm import charged_to

log = logging.getLogger(__name__)


def generate_followups(research_id: Any, deadline: float | None = None) -> list[str]:
    """Ask the prompt analyzer for the research's follow-up questions and store them.

    Raises the client's errors after marking the research failed, so the caller can answer with a 502, or with a
    504 for DeadlineExceeded: the model had not answered by `deadline` (a `time.monotonic()` value).
    """
    research = Research.objects.get(pk=research_id)
    record_event(research.pk, EventType.GENERATING_FOLLOWUPS, {"num_questions": research.num_questions})
    try:
        with charged_to(research.pk):
            questions, _, _ = engine_for(research.engine).ask_questions(
                research.prompt, research.num_questions, deadline=deadline
            )
    except Exception as exc:
        log.warning("follow-up questions for research %s failed: %s", research.pk, exc)
        Research.objects.filter(pk=research.pk).update(
            status=ResearchStatus.FAILED, error=str(exc)[:2000], finished_at=timezone.now()
        )
        record_event(research.pk, EventType.RESEARCH_FAILED, {"reason": "followups_failed", "error": str(exc)[:500]})
        raise
    with research_transaction(research.pk):
        FollowUpQuestion.objects.bulk_create(
            FollowUpQuestion(research_id=research.pk, position=index, question=question)
            for index, question in enumerate(questions)
        )
        Research.objects.filter(pk=research.pk).update(status=ResearchStatus.AWAITING_ANSWERS)
        record_event(research.pk, EventType.FOLLOWUPS_GENERATED, {"questions": questions})
    return questions
