"""The hot paths' hand-written statements are prepared on their connection: PostgreSQL parses and plans each once
per connection, not on every run. The ORM's statements are not; a statement logged by Django keeps its text and
parameters; a rollback loses nothing; with prepared statements off, nothing is prepared."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from research.models import Research, ResearchStatus
from research.record import database
from tests.support.factories import running_research

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
RESEARCH_COLUMNS = "SELECT status, breadth FROM research_research WHERE id = %s"


def prepared() -> list[str]:
    """The statements prepared on this connection, by their text."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def read(research: Research) -> tuple[str, int] | None:
    return database.read_row(Research, research.pk, RESEARCH_COLUMNS)


class Abandoned(Exception):
    pass


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=3, depth=1)


def test_a_hot_statement_is_prepared_from_its_second_run_on_a_connection(running: Research) -> None:
    # given a fresh connection
    connection.close()
    # when a hand-written read runs once, then twice more
    assert read(running) == (ResearchStatus.RUNNING, 3)
    once = prepared()
    assert read(running) == (ResearchStatus.RUNNING, 3)
    assert read(running) == (ResearchStatus.RUNNING, 3)
    # then the second run prepared it, and the third ran that one prepared statement
    assert not any("FROM research_research WHERE id = $1" in text for text in once)
    assert sum("SELECT status, breadth FROM research_research WHERE id = $1" in text for text in prepared()) == 1


def test_the_orms_statements_are_not_prepared(running: Research) -> None:
    connection.close()
    for _ in range(4):
        assert Research.objects.filter(pk=running.pk).values_list("breadth", flat=True).get() == 3
    assert prepared() == []


def test_a_logged_statement_keeps_its_text_and_parameters(running: Research) -> None:
    # given a connection that has prepared the read
    connection.close()
    read(running)
    read(running)
    # when Django logs statements (DEBUG, a test capturing them) and the prepared read runs
    with CaptureQueriesContext(connection) as captured:
        assert read(running) == (ResearchStatus.RUNNING, 3)
    # then the log holds it with its parameter, as Django logs its own statements
    (logged,) = captured.captured_queries
    assert logged["sql"] == f"SELECT status, breadth FROM research_research WHERE id = '{running.pk.hex}'::uuid"


def test_a_rollback_loses_no_statement(running: Research) -> None:
    # given the read prepared, then a transaction rolled back (psycopg forgets its prepared statements then)
    connection.close()
    read(running)
    read(running)
    with pytest.raises(Abandoned), transaction.atomic():
        read(running)
        raise Abandoned
    # when it runs again: the same answer, prepared again
    assert read(running) == (ResearchStatus.RUNNING, 3)
    assert read(running) == (ResearchStatus.RUNNING, 3)
    assert any("FROM research_research WHERE id = $1" in text for text in prepared())


def test_with_prepared_statements_off_nothing_is_prepared(running: Research, monkeypatch) -> None:
    # given prepared statements off, as DB_PREPARED_STATEMENTS=false leaves the connection's options
    connection.close()
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "prepare_threshold", None)
    # when the read runs again and again, then it answers and nothing is prepared
    for _ in range(4):
        assert read(running) == (ResearchStatus.RUNNING, 3)
    assert prepared() == []


@pytest.mark.parametrize(("value", "threshold"), [("", "1"), ("true", "1"), ("false", "None")])
def test_the_setting_turns_preparing_on_and_off(value: str, threshold: str) -> None:
    env = {"DB_PREPARED_STATEMENTS": value} if value else {}
    script = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS']['prepare_threshold'])"
    base = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DB_PREPARED_STATEMENTS")}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "researchsite.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == threshold
