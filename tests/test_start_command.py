"""manage.py start_research goes through the same service, and so the same checks, as POST /api/research/start."""

import pytest
from django.core.management import CommandError, call_command

from research.models import FollowUpQuestion, Research, ResearchStatus

pytestmark = pytest.mark.django_db(transaction=True)  # the start is queued on commit


def test_start_command_queues_a_research_with_its_answers(user, published, capsys) -> None:
    call_command(
        "start_research", user=user.username, prompt="How do glaciers move?", breadth=2, depth=1, answer=["Where?=Alps"]
    )
    research = Research.objects.get()
    assert capsys.readouterr().out.strip() == str(research.pk)
    assert (research.status, research.breadth, research.depth) == (ResearchStatus.QUEUED, 2, 1)
    assert list(FollowUpQuestion.objects.values_list("question", "answer")) == [("Where?", "Alps")]
    assert published == ["workers.tasks.start_research_task"]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"breadth": 99, "depth": 1}, "breadth"),
        ({"breadth": 1, "depth": 0}, "depth"),
        ({"breadth": 1, "depth": 1, "prompt": "   "}, "prompt"),
    ],
)
def test_start_command_refuses_what_the_api_refuses(user, published, options, field) -> None:
    with pytest.raises(CommandError, match=field):
        call_command("start_research", user=user.username, **{"prompt": "How do glaciers move?", **options})
    assert not Research.objects.exists()
    assert published == []


def test_start_command_respects_the_per_user_cap(user, published, settings) -> None:
    settings.MAX_ACTIVE_RESEARCH_PER_USER = 1
    call_command("start_research", user=user.username, prompt="First", breadth=1, depth=1)
    with pytest.raises(CommandError, match="limit is 1"):
        call_command("start_research", user=user.username, prompt="Second", breadth=1, depth=1)
    assert list(Research.objects.values_list("prompt", flat=True)) == ["First"]
    assert published == ["workers.tasks.start_research_task"]
