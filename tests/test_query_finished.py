"""A query's end: its learnings, its review's verdict, the lease handed to its children's planning and the count
off its research, in one statement."""

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from research.models import Extract, QueryStatus, Research, SerpQuery, Website, WebsiteStatus
from research.record.planning import descendants, total_queries
from tests.support.factories import running_research
from workers.pipeline import progress
from workers.pipeline.tree_writes import tree_transaction

pytestmark = pytest.mark.django_db(transaction=True)

VERDICT = {
    "score": 0.75,
    "dimensions": {"depth": 3, "sources": [1, 2]},
    "gaps": ["Ä gap", "another"],
    "directions": ["look further"],
    "decision": progress.CONTINUE,
    "decision_reason": "threshold",
}
# What each case leaves: the query's columns, the research's pending count, the tasks queued.
COLUMNS = ("status", "learnings", "score", "dimensions", "gaps", "directions", "decision", "decision_reason")
COLUMNS += ("error", "children_planned", "claimed_by")


def reviewing_query(user, depth: int, research_depth: int = 3) -> SerpQuery:
    """A query in review under a running research, with 45 facts over three pages stored out of page order."""
    research = running_research(user, breadth=2, depth=research_depth)
    query = SerpQuery.objects.create(
        research=research, depth=depth, position=0, query="q", objective="o", status=QueryStatus.REVIEWING
    )
    for position in (2, 0, 1):
        website = Website.objects.create(
            research=research, query=query, position=position, url=f"https://p.example/{position}",
            status=WebsiteStatus.ANALYZED,
        )  # fmt: skip
        for k in reversed(range(15)):
            Extract.objects.create(
                research=research, website=website, position=k, fact=f"page {position} fact {k}", quote="q"
            )
    return query


def finish(query: SerpQuery, **kwargs: Any) -> tuple[bool, dict[str, Any], int]:
    with tree_transaction(query.research_id):
        ended = progress.query_finished(query.pk, from_statuses=[QueryStatus.REVIEWING], **kwargs)
    row = SerpQuery.objects.filter(pk=query.pk).values(*COLUMNS).get()
    row["claimed_by"] = row["claimed_by"] == "queued"
    return ended, row, Research.objects.get(pk=query.research_id).pending_queries


@pytest.mark.parametrize(
    "depth, kwargs",
    [
        (1, {"status": QueryStatus.DONE, "review": VERDICT}),  # goes deeper: its children's planning is queued
        (3, {"status": QueryStatus.DONE}),  # a leaf: nothing below it
        (1, {"status": QueryStatus.DONE, "review": {**VERDICT, "decision": progress.STOP}}),  # stops its branch
        (2, {"status": QueryStatus.FAILED, "error": "x" * 3000}),  # fails: its subtree is counted off with it
    ],
)
def test_a_query_ends_in_one_statement(user, published, depth, kwargs) -> None:
    # given a query in review
    one = reviewing_query(user, depth)
    # when it ends
    with CaptureQueriesContext(connection) as captured:
        ended, row, pending = finish(one, **kwargs)
    queued = list(published)
    # then it ends with its review's verdict
    assert ended and row["status"] == kwargs["status"]
    review = kwargs.get("review")
    assert row["score"] == (review["score"] if review else None)
    assert row["dimensions"] == (review["dimensions"] if review else {})
    assert row["gaps"] == (review["gaps"] if review else [])
    assert row["decision"] == (review["decision"] if review else "")
    # with its first 40 facts, in page order, as its learnings
    assert row["learnings"] == [f"page {p} fact {k}" for p in range(3) for k in range(15)][:40]
    assert len(row["error"]) == (2000 if "error" in kwargs else 0)
    goes_deeper = kwargs["status"] == QueryStatus.DONE and depth < 3 and "stop" not in str(kwargs.get("review"))
    assert row["claimed_by"] == goes_deeper
    assert queued == (["workers.tasks.plan_queries_task"] if goes_deeper else [])
    # and in one statement, where the ORM took four (besides the transaction's end and the count off)
    sqls = [query["sql"] for query in captured.captured_queries]
    assert len([sql for sql in sqls if re.match(r'UPDATE "?research_serpquery', sql)]) == 1
    assert not [sql for sql in sqls if sql.startswith("SELECT") and "research_extract" in sql]
    # and it is counted off its research, with its unplanned subtree where it plans none
    counted = 1 if goes_deeper or depth == 3 else 1 + descendants(2, 3, depth)
    assert pending == total_queries(2, 3) - counted


def test_a_query_ends_once(user, published) -> None:
    query = reviewing_query(user, 1)
    assert finish(query, status=QueryStatus.DONE)[0]
    pending = Research.objects.get(pk=query.research_id).pending_queries
    # a second end (a duplicate delivery) changes nothing, counts nothing off and queues nothing more
    assert not finish(query, status=QueryStatus.FAILED)[0]
    assert SerpQuery.objects.get(pk=query.pk).status == QueryStatus.DONE
    assert Research.objects.get(pk=query.research_id).pending_queries == pending
    assert published == ["workers.tasks.plan_queries_task"]
