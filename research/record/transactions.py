"""The two kinds of transaction that change a research, and the tally that defers its row's changes.

Steps that decide a research's course (start, planning, report, cancel, fail) take the research row first, in
`research_transaction`, to serialise against each other. Steps that write the tree (queries, websites, pages,
extracts) must not: they would then run one at a time. They open a `Tally` instead (workers/pipeline/
tree_writes.py): what they do to the research row (events, finished queries, dropped quotes) is collected here and
applied by one statement at the end of the transaction. Code that records an event asks `open_tally` whether such
a transaction is open for that research; if one is, it adds to the tally, and otherwise records at once.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from research.models import Research
from research.record import database
from research.types import ResearchId


@contextmanager
def research_transaction(research_id: ResearchId, ending: bool = False) -> Iterator[None]:
    """A transaction that locks the research row first. `ending`: one that may end the research's tree (cancel,
    fail, a budget's stop, completion) holds the row exclusively, so that no tree transaction in flight commits
    after it (each reads the status at its end under a shared lock that this one waits for)."""
    with transaction.atomic():
        database.lock_row(Research, research_id, exclusive=ending)
        yield


@dataclass
class Tally:
    """What one tree transaction does to its research's row, applied at its end."""

    research_id: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    quotes_dropped: int = 0
    queries_finished: int = 0  # planned queries counted off: finished ones, and the subtrees of failed ones

    def is_empty(self) -> bool:
        return not (self.events or self.quotes_dropped or self.queries_finished)


# The tallies this thread has open, innermost last.
_open = threading.local()


def open_tally(research_id: ResearchId) -> Tally | None:
    """The tally of the innermost tree transaction this thread has open, if it is for this research."""
    stack = getattr(_open, "stack", None)
    if stack and stack[-1].research_id == str(research_id):
        return stack[-1]
    return None


@contextmanager
def tallying(research_id: ResearchId) -> Iterator[Tally]:
    """Inside the block, the research's events, tokens and counters go into the tally it yields."""
    tally = Tally(str(research_id))
    outer = getattr(_open, "stack", [])
    _open.stack = [*outer, tally]
    try:
        yield tally
    finally:
        _open.stack = outer
