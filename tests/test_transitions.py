"""The research row is written in one module, research/record/transitions.py, by conditional updates: a transition from
the wrong state changes nothing and says so."""

import ast
import re
from pathlib import Path

import pytest

from research.control.dispatch import QUEUED
from research.models import Research, ResearchStatus
from research.record import transitions
from tests.support.source import parse as source_tree

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "research" / "record" / "transitions.py"
WRITES = {"update", "bulk_update", "update_or_create", "save"}


def research_writes(source: str) -> list[int]:
    """Lines of `Research.objects….update(…)` (and bulk_update, update_or_create) calls in the source."""
    lines = []
    for node in ast.walk(source_tree(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES):
            continue
        receiver = node.func.value
        while isinstance(receiver, (ast.Call, ast.Attribute)):
            if isinstance(receiver, ast.Attribute) and receiver.attr == "objects":
                if isinstance(receiver.value, ast.Name) and receiver.value.id == "Research":
                    lines.append(node.lineno)
                break
            receiver = receiver.func if isinstance(receiver, ast.Call) else receiver.value
    return lines


TABLE = Research._meta.db_table
SQL_UPDATE = re.compile(rf"\bUPDATE\s+(?:ONLY\s+)?{TABLE}\b", re.IGNORECASE)


def _is_research_table(node: ast.AST, names: set[str]) -> bool:
    """`Research._meta.db_table`, or a name bound to it."""
    if isinstance(node, ast.Name):
        return node.id in names
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "db_table"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "_meta"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "Research"
    )


def sql_research_writes(source: str) -> list[int]:
    """Lines of SQL strings (plain or f-strings) that UPDATE the research table: by its name, by
    `{Research._meta.db_table}`, or by a name the module binds to that (`table = Research._meta.db_table`)."""
    tree = source_tree(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (
                    zip(target.elts, node.value.elts, strict=False)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                names.update(t.id for t, v in pairs if isinstance(t, ast.Name) and _is_research_table(v, names))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                part.value
                if isinstance(part, ast.Constant)
                else (TABLE if _is_research_table(part.value, names) else "{other}")
                for part in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if SQL_UPDATE.search(text):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_research_row_is_updated_only_in_the_transitions_module() -> None:
    found = []
    for package in ("research", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == HOME or "migrations" in path.parts:
                continue
            source = path.read_text()
            lines = research_writes(source) + sql_research_writes(source)
            found += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert found == [], "write the research row through research/record/transitions.py"
    # and the SQL check is not blind: it finds the statements of the transitions module itself
    assert len(sql_research_writes(HOME.read_text())) >= 4


def test_the_check_sees_a_chained_update() -> None:
    source = "Research.objects.filter(pk=1).exclude(x=2).update(status='y')\nSerpQuery.objects.update(a=1)\n"
    assert research_writes(source) == [1]


def test_the_check_sees_an_update_of_the_research_table_in_sql() -> None:
    # given SQL that writes the research row three ways, and SQL that only reads or locks it, or writes another table
    planted = (
        "table = Research._meta.db_table\n"
        "research, events = Research._meta.db_table, Event._meta.db_table\n"
        'cursor.execute(f"UPDATE {table} SET pending_queries = 0 WHERE id = %s", [pk])\n'
        'cursor.execute(f"WITH x AS (SELECT 1) UPDATE {research} SET last_event_seq = 1")\n'
        f'cursor.execute("update {TABLE} set title = %s", [title])\n'
        'cursor.execute(f"SELECT 1 FROM {Research._meta.db_table} WHERE id = %s FOR NO KEY UPDATE", [pk])\n'
        'cursor.execute(f"UPDATE {events} SET seq = 1")\n'
        'cursor.execute(f"UPDATE {Research._meta.db_table} AS r SET title = %s", [t])\n'
    )
    # then the writes are found, by line, and nothing else
    assert sql_research_writes(planted) == [3, 4, 5, 8]


@pytest.mark.django_db
def test_a_transition_from_another_state_changes_nothing(user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.QUEUED)
    assert transitions.start(research.pk, planned=6)
    assert not transitions.start(research.pk, planned=6)  # a second delivery finds it running
    research.refresh_from_db()
    assert (research.status, research.pending_queries, research.claimed_by) == ("running", 6, QUEUED)
    assert not transitions.start_reporting(research.pk, "worker")  # queries still pending
    assert transitions.stop_on_budget(research.pk, "budget_seconds")
    assert not transitions.stop_on_budget(research.pk, "budget_tokens")  # stopped once
    assert transitions.hand_stopped_tree_to_report(research.pk)
    assert transitions.start_reporting(research.pk, "worker")
    assert not transitions.cancel(research.pk, research.created_at, [ResearchStatus.RUNNING])
    transitions.rename(research.pk, "Mine")
    assert transitions.complete(research.pk, "The report's title", [ResearchStatus.REPORTING], "partial")
    research.refresh_from_db()
    assert (research.status, research.title, research.stop_reason) == ("completed", "Mine", "budget_seconds")
    assert research.outcome == "partial"
