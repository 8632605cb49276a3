"""SQLite behind one seam: only research/database.py forks on the database (migrations keep their own forks).

Code elsewhere asks the seam what to do (`one_statement_writes()`, `lock_key(key)`, ...), never which database it
runs on, so what the embedded mode does differently is all in one module, each difference said once.
"""

import inspect
import re
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from research import database
from research.models import Research, ResearchStatus, SerpQuery
from research.usage import BudgetState

ROOT = Path(__file__).resolve().parent.parent
SEAM = ROOT / "research" / "database.py"
# Asking which database this is: its vendor, or its feature flags (has_select_for_update and the like).
FORK = re.compile(r"\.vendor\b|\bconnection\.features\b|\bconnections\[[^]]*\]\.features\b")


def forks(source: str) -> list[int]:
    """The lines of the source that ask which database the code runs on."""
    return [number for number, line in enumerate(source.splitlines(), 1) if FORK.search(line)]


def test_database_seam_only_the_seam_asks_which_database() -> None:
    found = []
    for package in ("research", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == SEAM or "migrations" in path.relative_to(ROOT).parts:
                continue
            found += [f"{path.relative_to(ROOT)}:{line}" for line in forks(path.read_text())]
    assert found == [], "fork on the database through research/database.py"


@pytest.mark.parametrize(
    "source",
    [
        'if connection.vendor == "postgresql":',
        'if connection.vendor != "postgresql":',
        "sqlite = connections[using].vendor == 'sqlite'",
        "if connection.features.has_select_for_update:",
        'if connections["default"].features.has_native_uuid_field:',
    ],
)
def test_database_seam_check_catches_a_fork(source: str) -> None:
    assert forks(f"x = 1\n{source}\n") == [2]


def test_database_seam_check_allows_the_seam_and_plain_queries() -> None:
    assert forks("if database.one_statement_writes():\n    with connection.cursor() as cursor:\n") == []


def test_database_seam_each_function_says_what_each_database_does() -> None:
    functions = [f for name, f in inspect.getmembers(database, inspect.isfunction) if not name.startswith("_")]
    assert len(functions) >= 8
    vague = [f.__name__ for f in functions if f.__module__ == database.__name__ and not _says_both(f.__doc__ or "")]
    assert vague == []


def _says_both(doc: str) -> bool:
    return "PostgreSQL" in doc and "Embedded mode" in doc


def as_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam as the embedded mode takes it, on this run's PostgreSQL: only for the branches that need no SQLite."""
    monkeypatch.setattr(database, "_postgresql", lambda _database=None: False)


@pytest.mark.django_db
def test_database_seam_a_row_reads_the_same_in_both_modes(user, monkeypatch) -> None:
    research = Research.objects.create(owner=user, prompt="p", status=ResearchStatus.RUNNING, breadth=1, depth=1)
    fields = BudgetState._fields[:6]  # the research's own columns (its usage is summed from its calls)
    sql = f"SELECT {', '.join(fields)} FROM {Research._meta.db_table} WHERE id = %s"
    raw = database.read_row(Research, research.pk, fields, sql)
    as_embedded(monkeypatch)
    assert database.read_row(Research, research.pk, fields, sql) == raw
    assert raw is not None and raw[0] == ResearchStatus.RUNNING
    Research.objects.filter(pk=research.pk).delete()
    assert database.read_row(Research, research.pk, fields, sql) is None


@pytest.mark.django_db
def test_database_seam_embedded_mode_locks_and_views_with_no_statement(user, monkeypatch) -> None:
    as_embedded(monkeypatch)
    research = Research.objects.create(owner=user, prompt="p", breadth=1, depth=1)
    with CaptureQueriesContext(connection) as queries:
        database.lock_key("spend:1")
        database.lock_row(Research, research.pk)
        assert database.begin_consistent_view(200) is None
        database.lift_statement_timeout(connection)
        database.restore_statement_timeout(connection)
    assert queries.captured_queries == []
    assert not (database.one_statement_writes() or database.supports_xmin() or database.full_text_search())


@pytest.mark.django_db(transaction=True)
def test_database_seam_postgresql_gives_a_view_its_xmin() -> None:
    with transaction.atomic():
        xmin = database.begin_consistent_view(200)
        with connection.cursor() as cursor:
            cursor.execute("SHOW transaction_isolation")
            assert cursor.fetchone()[0] == "repeatable read"
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone()[0] == "200ms"
    assert isinstance(xmin, int) and xmin > 0
    assert database.one_statement_writes() and database.supports_xmin() and database.full_text_search()


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
def test_database_seam_a_whole_row_reads_as_the_orms_instance_in_both_modes(user, monkeypatch) -> None:
    # given a query with values of every kind its columns hold: JSON lists and objects, a float, dates, a parent
    research, parent, child = queries_of_every_kind(user)
    expected = SerpQuery.objects.get(pk=child.pk)
    # when it is read whole, by hand-written SQL and by the embedded mode's ORM read
    raw = database.read_instance(SerpQuery, child.pk)
    as_embedded(monkeypatch)
    embedded = database.read_instance(SerpQuery, child.pk)
    # then both are the instance the ORM reads, field by field, and saved ones (not new)
    for read in (raw, embedded):
        assert read is not None and not read._state.adding
        for field in SerpQuery._meta.concrete_fields:
            assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
    monkeypatch.undo()
    assert database.read_instance(SerpQuery, 10**9) is None


@pytest.mark.django_db
def test_database_seam_hand_written_values_read_as_the_orms_values(user) -> None:
    # given queries with values of every kind their columns hold: JSON lists and objects, a float, dates, a parent
    research, parent, _ = queries_of_every_kind(user)
    fields = [field.attname for field in SerpQuery._meta.concrete_fields]
    # when they are read by a hand-written condition
    key = Research._meta.pk.get_db_prep_value(research.pk, connection)
    read = database.read_values(SerpQuery, fields, "research_id = %s ORDER BY depth DESC", [key])
    # then each row is what the ORM's values() gives, in the order asked for
    expected = list(SerpQuery.objects.filter(research=research).order_by("-depth").values(*fields))
    assert read == expected and read[0]["learnings"] == ["a", {"b": 1}] and read[0]["parent_id"] == parent.pk
