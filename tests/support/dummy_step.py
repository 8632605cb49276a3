"""A step added through the registry alone, for tests/test_step_registry.py: one address, one entry, its
function. Every test worker imports it (CELERY_IMPORTS in tests/support/e2e.py WORKER_ENV), as a deployment
would import a module that registers a step of its own.

The step works on a research titled DUMMY_TITLE (no real step touches a cancelled research): each run appends
"ran;" to the research's error, and fails when the research's prompt says "fail"; its failure handler appends
"failed: <error>;"; the sweeper finds it lapsed when such a research's lease has lapsed.
"""

from django.db.models import Value
from django.db.models.functions import Concat

from research.control import dispatch
from research.models import Research, ResearchStatus
from workers.pipeline.recovery import Sweep
from workers.steps import CONTROL, Step
from workers.tasks import register

DUMMY_TITLE = "registry dummy"
DUMMY: dispatch.StepRef[[str]] = dispatch.StepRef("tests.support.dummy_step.dummy_task")


def _append(research_id: str, text: str) -> None:
    Research.objects.filter(pk=research_id).update(error=Concat("error", Value(text)))


def run(research_id: str, task_id: str) -> None:
    _append(research_id, "ran;")
    if Research.objects.filter(pk=research_id, prompt__contains="fail").exists():
        raise RuntimeError("the dummy step was told to fail")


def failed(research_id: str, error: BaseException) -> None:
    _append(research_id, f"failed: {error};")


def lapsed(state: Sweep) -> None:
    for research in Research.objects.filter(state.due(), title=DUMMY_TITLE, status=ResearchStatus.CANCELLED):
        state.retry_or_fail(
            research,
            "dummy",
            lambda error, pk=str(research.pk): failed(pk, error),
            lambda pk=str(research.pk): DUMMY.now(pk),
            "the dummy step lapsed",
            status=ResearchStatus.CANCELLED,
        )


register(Step(DUMMY, run, lambda research_id: (Research, research_id), failed, CONTROL, (lapsed,)))
