"""A branch's planning reads the chain of queries above it, each with its learnings, in one statement."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from research.models import QueryStatus, SerpQuery
from tests.support.factories import running_research
from workers.agents.types import Ancestor
from workers.pipeline.plan import _ancestors

pytestmark = pytest.mark.django_db


def test_the_chain_above_a_query_is_read_top_down_with_its_learnings_in_one_statement(user) -> None:
    # given a branch three queries deep, each with its learnings, beside another branch
    research = running_research(user, breadth=2, depth=4)
    parent = None
    for depth in (1, 2, 3):
        parent = SerpQuery.objects.create(
            research=research,
            parent=parent,
            depth=depth,
            position=0,
            query=f"query {depth}",
            objective=f"objective {depth}",
            status=QueryStatus.DONE,
            learnings=[f"learning {depth}", "é ünïcode"],
        )
    SerpQuery.objects.create(research=research, depth=1, position=1, query="other", objective="o")
    assert parent is not None
    # when the planning of its children reads the chain
    with CaptureQueriesContext(connection) as queries:
        chain = _ancestors(parent)
    # then it has the whole chain from the top, and read it in one statement
    assert chain == [Ancestor(f"query {d}", f"objective {d}", [f"learning {d}", "é ünïcode"]) for d in (1, 2, 3)]
    assert len(queries) == 1
    assert _ancestors(None) == []
