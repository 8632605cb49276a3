"""What a research's page figures mean, in one place: the cards, the coverage line, the report's preface and the
exports all count pages this way, so one screen never shows two numbers for one thing.

A page is a distinct URL: a search result of one query is a website row, and the same page found by three queries
is three rows but one page. Of the pages a research found:
- analysed: at least one of its queries analysed it;
- failed: none analysed it and at least one failed on it (its fetch failed, or its analysis);
the rest are still waiting, or were cancelled with their query.

The live deltas count the same in SQL (research/live/delta.py, `_STATE`), where a push reads them in its one
statement; tests/test_deltas.py holds every replayed delta equal to the snapshot, so the two cannot drift.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from research.models import WebsiteStatus


@dataclass(frozen=True)
class PageCounts:
    found: int
    analysed: int
    failed: int


def page_counts(websites: Iterable[tuple[str, str]]) -> PageCounts:
    """The page figures of a research's websites, given as (url, status)."""
    analysed: set[str] = set()
    failed: set[str] = set()
    found: set[str] = set()
    for url, status in websites:
        found.add(url)
        if status == WebsiteStatus.ANALYZED:
            analysed.add(url)
        elif status == WebsiteStatus.FAILED:
            failed.add(url)
    return PageCounts(len(found), len(analysed), len(failed - analysed))
