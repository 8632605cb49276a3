"""The step registry (workers/steps.py): a step added through it alone — an address, one entry and its function,
in a module of its own (tests/support/dummy_step.py) — is published through its address, routed to its queue, run
by a real worker, failed through its handler and swept when its lease lapses; and the registry covers every step
the code can queue."""

import inspect
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from devtools.processes import wait_until
from research.control import dispatch
from research.models import Research, ResearchStatus
from researchsite.celery import app as celery_app
from tests.support.dummy_step import DUMMY, DUMMY_TITLE
from workers import steps, tasks

pytestmark = pytest.mark.django_db(transaction=True)


def error_of(research: Research) -> str:
    return Research.objects.filter(pk=research.pk).values_list("error", flat=True).get()


def test_a_step_added_through_the_registry_alone_is_dispatched_routed_failed_and_swept(user, workers) -> None:
    # given a step registered by a module of its own, which fails when told to
    research = Research.objects.create(
        owner=user, prompt="fail, please", title=DUMMY_TITLE, status=ResearchStatus.CANCELLED
    )
    # then it is routed to the queue its entry names
    assert celery_app.amqp.router.route({}, DUMMY.name, (), {})["queue"].name == "control"
    # when it is queued through its address, a worker runs it and its failure handler records the failure
    DUMMY.now(str(research.pk))
    wait_until(lambda: "failed" in error_of(research), timeout=30, message="the dummy step's failure")
    assert error_of(research) == "ran;failed: the dummy step was told to fail;"
    # when its worker dies holding the row (the lease lapses), the sweeper finds it through the entry's finder
    Research.objects.filter(pk=research.pk).update(
        prompt="fine", error="", claimed_by="a worker that died", claimed_at=timezone.now() - timedelta(hours=1)
    )
    assert steps.sweep() == {"dummy": 1}
    # then it runs again, the lapsed lease counted as an attempt
    wait_until(lambda: error_of(research) == "ran;", timeout=30, message="the dummy step run again")
    assert Research.objects.get(pk=research.pk).attempts == 1


def test_every_address_has_one_step_and_every_step_a_task() -> None:
    addresses = {ref.name for ref in vars(dispatch).values() if isinstance(ref, dispatch.StepRef)}
    registered = {step.name for step in steps.STEPS}
    assert addresses == registered
    assert len(steps.STEPS) == len(registered)  # no address twice
    for name in registered:
        assert name in tasks.TASKS and name in celery_app.tasks
        assert steps.REGISTRY[name].lapsed, f"{name}: the sweeper would never find it lapsed"


def test_a_step_takes_positional_arguments_only() -> None:
    with pytest.raises(TypeError, match="positional"):
        dispatch.SEARCH.now(query_id=1)  # type: ignore[call-arg]


def test_the_engine_docs_step_table_is_the_registry() -> None:
    table = (Path(settings.BASE_DIR) / "docs" / "engine.md").read_text().split("## The task tree", 1)[1]
    table = table.split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+_task)\(([\w, ]*)\)`", table, flags=re.MULTILINE)
    registered = []
    for step in steps.STEPS:
        parameters = [name for name in inspect.signature(step.run).parameters if name != "task_id"]
        registered.append((step.name.removeprefix("workers.tasks."), ", ".join(parameters)))
    assert documented == registered
