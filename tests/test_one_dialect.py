"""One dialect: the code runs on PostgreSQL only, and nothing asks which database it runs on.

The hot paths' hand-written statements share their helpers in research/record/database.py (a prepared cursor, reads made
into the ORM's values and instances, locks, a consistent view); these tests hold those helpers to what the ORM
reads, and guard against a second dialect creeping back.
"""

import re
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone

from research.models import Research, ResearchStatus, SerpQuery
from research.record import database
from research.record.usage import BudgetState

ROOT = Path(__file__).resolve().parent.parent
# Asking which database this is: its vendor, or its feature flags (has_select_for_update and the like); or naming
# the other dialect's engine, broker or channel layer.
FORK = re.compile(
    r"\.vendor\b|\bconnection\.features\b|\bconnections\[[^]]*\]\.features\b|sqlite|filesystem://|channels_lite",
    re.IGNORECASE,
)


def forks(source: str) -> list[int]:
    """The lines of the source that ask which database the code runs on, or name another dialect."""
    return [number for number, line in enumerate(source.splitlines(), 1) if FORK.search(line)]


def test_no_code_asks_which_database_it_runs_on() -> None:
    found = []
    for package in ("research", "workers", "researchsite"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.relative_to(ROOT).parts:
                continue  # a migration may say what the project ran on when it was written
            found += [f"{path.relative_to(ROOT)}:{line}" for line in forks(path.read_text())]
    assert found == [], "the code has one dialect: PostgreSQL"


@pytest.mark.parametrize(
    "source",
    [
        'if connection.vendor == "postgresql":',
        'if connection.vendor != "postgresql":',
        "sqlite = connections[using].vendor == 'sqlite'",
        "if connection.features.has_select_for_update:",
        'if connections["default"].features.has_native_uuid_field:',
        'ENGINE = "django.db.backends.sqlite3"',
        'CELERY_BROKER_URL = "filesystem://"',
        'INSTALLED_APPS.append("channels_lite")',
    ],
)
def test_the_dialect_check_catches_a_fork(source: str) -> None:
    assert forks(f"x = 1\n{source}\n") == [2]


def test_the_dialect_check_allows_plain_queries() -> None:
    assert forks("with database.prepared_cursor() as cursor:\n    cursor.execute(sql)\n") == []


@pytest.mark.django_db
def test_a_row_reads_by_hand_written_sql(user) -> None:
    research = Research.objects.create(owner=user, prompt="p", status=ResearchStatus.RUNNING, breadth=1, depth=1)
    fields = BudgetState._fields[:6]  # the research's own columns (its usage is summed from its calls)
    sql = f"SELECT {', '.join(fields)} FROM {Research._meta.db_table} WHERE id = %s"
    raw = database.read_row(Research, research.pk, sql)
    assert raw == Research.objects.filter(pk=research.pk).values_list(*fields).get()
    assert raw is not None and raw[0] == ResearchStatus.RUNNING
    Research.objects.filter(pk=research.pk).delete()
    assert database.read_row(Research, research.pk, sql) is None


@pytest.mark.django_db(transaction=True)
def test_a_consistent_view_is_repeatable_read_with_its_xmin() -> None:
    with transaction.atomic():
        xmin = database.begin_consistent_view(200)
        with connection.cursor() as cursor:
            cursor.execute("SHOW transaction_isolation")
            assert cursor.fetchone()[0] == "repeatable read"
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone()[0] == "200ms"
    assert isinstance(xmin, int) and xmin > 0


def queries_of_every_kind(user) -> tuple[Research, SerpQuery, SerpQuery]:
    """A research with a query and its child, whose columns hold values of every kind."""
    research = Research.objects.create(owner=user, prompt="p", status=ResearchStatus.RUNNING, breadth=1, depth=2)
    parent = SerpQuery.objects.create(research=research, depth=1, position=0, query="q", objective="o")
    child = SerpQuery.objects.create(
        research=research,
        parent=parent,
        depth=2,
        position=3,
        query="Ä q",
        objective="o",
        learnings=["a", {"b": 1}],
        dimensions={"x": 0.5},
        score=0.25,
        started_at=timezone.now(),
    )
    return research, parent, child


@pytest.mark.django_db
def test_a_whole_row_reads_as_the_orms_instance(user) -> None:
    # given a query with values of every kind its columns hold: JSON lists and objects, a float, dates, a parent
    research, parent, child = queries_of_every_kind(user)
    expected = SerpQuery.objects.get(pk=child.pk)
    # when it is read whole, by hand-written SQL
    read = database.read_instance(SerpQuery, child.pk)
    # then it is the instance the ORM reads, field by field, and a saved one (not new)
    assert read is not None and not read._state.adding
    for field in SerpQuery._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
    assert database.read_instance(SerpQuery, 10**9) is None


@pytest.mark.django_db
def test_hand_written_values_read_as_the_orms_values(user) -> None:
    # given queries with values of every kind their columns hold: JSON lists and objects, a float, dates, a parent
    research, parent, _ = queries_of_every_kind(user)
    fields = [field.attname for field in SerpQuery._meta.concrete_fields]
    # when they are read by a hand-written condition
    key = Research._meta.pk.get_db_prep_value(research.pk, connection)
    read = database.read_values(SerpQuery, fields, "research_id = %s ORDER BY depth DESC", [key])
    # then each row is what the ORM's values() gives, in the order asked for
    expected = list(SerpQuery.objects.filter(research=research).order_by("-depth").values(*fields))
    assert read == expected and read[0]["learnings"] == ["a", {"b": 1}] and read[0]["parent_id"] == parent.pk
