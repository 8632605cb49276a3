"""The research row is written in one module, research/transitions.py, by conditional updates: a transition from
the wrong state changes nothing and says so."""

import ast
from pathlib import Path

import pytest

from research import transitions
from research.dispatch import QUEUED
from research.models import Research, ResearchStatus
from tests.support.source import parse as source_tree

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "research" / "transitions.py"
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


def test_the_research_row_is_updated_only_in_the_transitions_module() -> None:
    found = []
    for package in ("research", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == HOME or "migrations" in path.parts:
                continue
            found += [f"{path.relative_to(ROOT)}:{line}" for line in research_writes(path.read_text())]
    assert found == [], "write the research row through research/transitions.py"


def test_the_check_sees_a_chained_update() -> None:
    source = "Research.objects.filter(pk=1).exclude(x=2).update(status='y')\nSerpQuery.objects.update(a=1)\n"
    assert research_writes(source) == [1]


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
    assert transitions.complete(research.pk, "The report's title", [ResearchStatus.REPORTING])
    research.refresh_from_db()
    assert (research.status, research.title, research.stop_reason) == ("completed", "Mine", "budget_seconds")
