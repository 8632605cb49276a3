"""The migration that adds Research.outcome gives the researches completed before it the badge of how they ended,
from what they stored, so that an upgrade shows no stopped or unanswered research as whole."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.migrations import latest, migrate

BEFORE = [("research", "0024_page_standing")]
AFTER = [("research", "0025_research_outcome")]


@pytest.mark.django_db(transaction=True)
def test_researches_completed_before_it_get_the_outcome_they_stored(user) -> None:
    newest = latest()
    try:
        # given, before the migration, a whole research, one a budget stopped, one with a failed branch, one whose
        # report found no answer, and one that failed
        migrate(BEFORE)
        apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        Research = apps.get_model("research", "Research")
        made = {}
        for name, status, partial in (
            ("whole", "completed", False),
            ("stopped", "completed", True),
            ("branch failed", "completed", False),
            ("unanswered", "completed", False),
            ("failed", "failed", False),
        ):
            made[name] = Research.objects.create(
                owner_id=user.pk, prompt="p", title=name, status=status, partial=partial
            )
        apps.get_model("research", "SerpQuery").objects.create(
            research_id=made["branch failed"].pk, depth=1, position=0, query="q", objective="o", status="failed"
        )
        documents = apps.get_model("research", "Document")
        documents.objects.create(
            research_id=made["unanswered"].pk, kind="report", markdown="# t", stats={"outcome": "unanswered"}
        )
        documents.objects.create(research_id=made["whole"].pk, kind="report", markdown="# t", stats={"citations": 3})
        # when it runs
        migrate(AFTER)
        # then each has the outcome it ended with; a research that did not complete has none
        with connection.cursor() as cursor:
            cursor.execute("SELECT title, outcome FROM research_research WHERE owner_id = %s", [user.pk])
            assert dict(cursor.fetchall()) == {
                "whole": "complete",
                "stopped": "partial",
                "branch failed": "partial",
                "unanswered": "unanswered",
                "failed": "",
            }
    finally:
        migrate(newest)
