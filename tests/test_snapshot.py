"""Snapshots: valid against the published JSON Schema, built in a constant number of SQL queries."""

import json

import jsonschema
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from research.live.snapshot import build_snapshot
from research.models import QueryStatus, Research, ResearchStatus, Website, WebsiteStatus
from tests.support.factories import build_tree
from tests.support.snapshot_schema import snapshot_schema
from tests.support.snapshot_schema import validate_snapshot as validate

pytestmark = pytest.mark.django_db


def test_snapshot_schema_is_itself_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(snapshot_schema())


def test_snapshot_of_small_and_large_trees_validates_with_same_query_count(user) -> None:
    # given
    small = build_tree(user, breadth=1, depth=1)
    large = build_tree(user, breadth=5, depth=5)
    # when
    with CaptureQueriesContext(connection) as small_queries:
        small_snapshot = build_snapshot(small.pk)
    with CaptureQueriesContext(connection) as large_queries:
        large_snapshot = build_snapshot(large.pk)
    # then
    validate(small_snapshot)
    validate(large_snapshot)
    assert len(large_snapshot["queries"]) == 110
    assert sum(len(q["websites"]) for q in large_snapshot["queries"]) == 770
    assert large_snapshot["progress"]["queries_planned"] == 110
    assert large_snapshot["progress"]["websites_analysed"] == 770
    assert len(small_queries) == len(large_queries)
    assert all("text" not in w for q in large_snapshot["queries"] for w in q["websites"])
    # page text never enters the snapshot: the factory's page text is "t t t ..."
    assert "t t t t" not in json.dumps(large_snapshot)


def test_snapshots_of_draft_and_failed_research_validate(user) -> None:
    # a draft: no breadth, depth, queries or documents yet
    draft = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.DRAFT)
    validate(build_snapshot(draft.pk))
    # a failed research: failed websites and queries, an error output, no report
    failed = build_tree(user, breadth=2, depth=1, websites_per_query=2)
    Research.objects.filter(pk=failed.pk).update(status=ResearchStatus.FAILED, error="search engine down")
    failed.documents.filter(kind="report").update(kind="error_output", markdown="# Research failed")
    Website.objects.filter(research=failed).update(status=WebsiteStatus.FAILED, failure_reason="http_error")
    failed.queries.update(status=QueryStatus.FAILED, error="search failed")
    snapshot = build_snapshot(failed.pk)
    validate(snapshot)
    assert snapshot["report"] is None and snapshot["error_output"]["markdown"] == "# Research failed"
    assert snapshot["progress"]["websites_failed"] == 4


def test_snapshot_timestamps_are_checked(user) -> None:
    snapshot = build_snapshot(build_tree(user, breadth=1, depth=1).pk)
    snapshot["research"]["created_at"] = "yesterday"
    with pytest.raises(jsonschema.ValidationError):
        validate(snapshot)


def test_api_detail_is_the_snapshot(api, user) -> None:
    research = build_tree(user, breadth=2, depth=2, websites_per_query=2)
    body = api.get(f"/api/research/{research.pk}").json()
    validate(body)
    assert body == json.loads(json.dumps(build_snapshot(research.pk)))
    listing = api.get("/api/research").json()["researches"]
    assert [r["id"] for r in listing] == [str(research.pk)]
    assert set(listing[0]) == {"id", "title", "status", "outcome", "stop_reason", "created_at", "finished_at"}
