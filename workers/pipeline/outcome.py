"""The outcome of a research whose finished tree left the report no finding to write from.

Two different things end that way, and they must not look alike:
- a failure: no page could be read at all (every page found failed to load, or a budget or a cancel stopped the
  research before the first page was analysed). The research fails, and its error names that cause;
- an honest "no answer": pages were read and none of them said anything on the request. Nothing broke, so the
  research completes, with a short report that says so and helps its user go on: what was searched, what was read,
  what the document collection covers, and what to try next. It cites nothing, because it claims nothing from a
  source; every sentence in it is a fact about the research itself.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.conf import settings
from django.db.models import Count, Q

from research.collection.overview import Overview, collection_overview
from research.control import budgets
from research.live.figures import page_counts
from research.models import Extract, QueryStatus, Research, SerpQuery, Website, WebsiteStatus
from workers.pipeline.citations import Stats

UNANSWERED = "unanswered"
# The report lists this many queries and pages, and counts the rest.
MAX_LISTED_QUERIES = 30
MAX_LISTED_PAGES = 20


@dataclass(frozen=True)
class SearchedQuery:
    query: str
    objective: str
    found: int
    analysed: int


@dataclass(frozen=True)
class ReadPage:
    title: str
    url: str
    dated: date | None
    standing: str


@dataclass(frozen=True)
class TreeOutcome:
    """What a finished tree with no finding did: its queries, the pages it read, and why the others failed."""

    queries: list[SearchedQuery]
    pages_analysed: int
    read: list[ReadPage] = field(default_factory=list)
    # failure_reason → pages that failed with it
    pages_failed: Counter[str] = field(default_factory=Counter)


def tree_outcome(research_id: Any) -> TreeOutcome:
    queries = [
        SearchedQuery(query, objective, found, analysed)
        for query, objective, found, analysed in SerpQuery.objects.filter(research_id=research_id)
        .annotate(
            found=Count("websites"),
            analysed=Count("websites", filter=Q(websites__status=WebsiteStatus.ANALYZED)),
        )
        .order_by("depth", "pk")
        .values_list("query", "objective", "found", "analysed")
    ]
    websites = Website.objects.filter(research_id=research_id)
    read: dict[str, ReadPage] = {}
    for url, title, dated, standing in (
        websites.filter(status=WebsiteStatus.ANALYZED)
        .order_by("pk")
        .values_list("url", "title", "page__dated", "page__standing")
    ):
        read.setdefault(url, ReadPage(title or url, url, dated, standing or "current"))
    # A page found by several queries failed once.
    failed_pages = dict(websites.filter(status=WebsiteStatus.FAILED).values_list("url", "failure_reason"))
    failed = Counter(reason or "error" for reason in failed_pages.values())
    # Pages analysed as the page's cards count them (one definition: research/live/figures.py).
    pages = page_counts(websites.values_list("url", "status"))
    return TreeOutcome(queries, pages.analysed, list(read.values()), failed)


def failure_cause(research: Research, outcome: TreeOutcome) -> str | None:
    """Why no page was read, where that is a failure; None where pages were read and simply held no answer."""
    if outcome.pages_analysed:
        return None
    if research.partial and research.stop_reason == budgets.CANCELLED:
        return "The research was cancelled before any page was analysed."
    if research.partial:
        budget = budgets.describe(research.stop_reason, research)
        return f"The research reached its {budget} before any page was analysed."
    failed = sum(outcome.pages_failed.values())
    if failed:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in outcome.pages_failed.most_common())
        pages = "the page" if failed == 1 else f"all {failed:,} pages"
        return f"No page could be analysed: {pages} found failed ({reasons})."
    return "No page could be analysed: the searches found no page to read."


def unanswered_report(research: Research, outcome: TreeOutcome) -> tuple[str, dict[str, Any]]:
    """The report of a research whose pages held no answer: what it did, what the collection covers, what next."""
    searched = len(outcome.queries)
    pages = "one page" if outcome.pages_analysed == 1 else f"{outcome.pages_analysed:,} pages"
    searches = "one search" if searched == 1 else f"{searched:,} searches"
    overview = collection_overview(research.owner_id, research.prompt) if _searches_collection() else None
    covers = ", what the document collection covers," if overview is not None else ""
    lines = [
        f"# {research.title or research.prompt[:200]}",
        "",
        f"> **No answer found.** This research read {pages} from {searches}, and none of them holds a finding on "
        f"the request. Nothing below answers it: it says what was searched and read{covers} and how to go on.",
        "",
        "## What was searched",
        "",
        *_queries(outcome.queries),
        "",
        "## What was read",
        "",
        *_pages(outcome.read),
        "",
    ]
    if overview is not None:
        lines += ["## What the collection covers", "", *_collection(overview), ""]
    lines += ["## How to go on", "", *_next_steps(overview), ""]
    stats: dict[str, Any] = {
        **Stats().as_dict(),  # the renderer's counts, all 0: nothing here is a cited sentence
        "outcome": UNANSWERED,
        "sources_available": 0,
        "pages_analysed": outcome.pages_analysed,
        "queries": searched,
    }
    return "\n".join(lines), stats


def _searches_collection() -> bool:
    return "local" in settings.SEARCH_PROVIDERS


def _searches_web() -> bool:
    return "searxng" in settings.SEARCH_PROVIDERS


def _queries(queries: list[SearchedQuery]) -> list[str]:
    lines = []
    for item in queries[:MAX_LISTED_QUERIES]:
        read = "none read" if not item.analysed else f"{item.analysed:,} read"
        found = "no page found" if not item.found else f"{item.found:,} found, {read}"
        objective = f" ({_inline(item.objective)})" if item.objective else ""
        lines.append(f"- “{_inline(item.query)}”{objective}: {found}.")
    if len(queries) > MAX_LISTED_QUERIES:
        lines.append(f"- and {len(queries) - MAX_LISTED_QUERIES:,} more searches.")
    return lines


def _pages(pages: list[ReadPage]) -> list[str]:
    # Titles, not links: a link here would count as a citation, and this report cites nothing.
    lines = []
    for page in pages[:MAX_LISTED_PAGES]:
        when = f", {page.dated.isoformat()}" if page.dated else ""
        standing = "" if page.standing == "current" else f", {page.standing}"
        lines.append(f"- {_inline(page.title)}{when}{standing}")
    if len(pages) > MAX_LISTED_PAGES:
        lines.append(f"- and {len(pages) - MAX_LISTED_PAGES:,} more pages.")
    return lines or ["- No page."]


def _collection(overview: Overview) -> list[str]:
    if not overview.documents:
        return ["You have no documents in the collection yet: nothing in it could answer the request."]
    count = "one document" if overview.documents == 1 else f"{overview.documents:,} documents"
    lines = [f"You may read {count} in the collection."]
    if overview.folders:
        folders = "; ".join(f"{_inline(name)} ({count:,})" for name, count in overview.folders)
        lines += ["", f"By folder: {folders}."]
    if overview.closest:
        lines += ["", "Closest to the request, by the words it shares with them:", ""]
        lines += [f"- {_titled(item.title, item.dated)}" for item in overview.closest]
    if overview.newest:
        lines += ["", "Its newest current documents:", ""]
        lines += [f"- {_titled(item.title, item.dated)}" for item in overview.newest]
    return lines


def _next_steps(overview: Overview | None) -> list[str]:
    steps = [
        "- **Reword the request** in the words the documents use, or narrow it to one question: a search finds "
        "pages by their words."
    ]
    if overview is not None:
        steps.append("- **Add documents** that cover it on the Documents page, then research it again.")
    steps.append(
        "- **Dig deeper** below with a narrower query: it runs one more branch of this research and writes the "
        "report again from what it finds."
    )
    if not _searches_web():
        steps.append(
            "- **Search the web**: this instance searches only its document collection; an administrator can add a "
            "web search engine (SEARCH_PROVIDERS=searxng,local and SEARXNG_URL)."
        )
    return steps


def _titled(title: str, dated: date | None) -> str:
    return f"{_inline(title)}, {dated.isoformat()}" if dated else _inline(title)


def _inline(text: str) -> str:
    """One line of markdown text: no line breaks, and no characters that would start a link or emphasis."""
    flat = " ".join(str(text).split())
    for mark in ("\\", "[", "]", "*", "_", "`", "<", ">"):
        flat = flat.replace(mark, "\\" + mark)
    return flat


def unanswered_branches(research_id: Any) -> list[str]:
    """The top-level queries that searched and read without trouble and whose whole branch found nothing on the
    request: the parts of a request its sources leave open. Empty where no branch found anything (the report is
    then the "no answer" one) or every branch found something. A branch that failed or was cancelled is not
    listed: its cause is a failure, shown with the branch."""
    rows = list(SerpQuery.objects.filter(research_id=research_id).values_list("pk", "parent_id", "query", "status"))
    parents = {pk: parent for pk, parent, _, _ in rows}

    def root(pk: int) -> int:
        while parents.get(pk) is not None:
            pk = parents[pk]
        return pk

    with_findings = {
        root(query_id)
        for query_id in Extract.objects.filter(research_id=research_id)
        .values_list("website__query_id", flat=True)
        .distinct()
    }
    if not with_findings:
        return []
    tops = [(pk, query, status) for pk, parent, query, status in rows if parent is None]
    return [query for pk, query, status in sorted(tops) if pk not in with_findings and status == QueryStatus.DONE]


def partly_answered_note(queries: list[str]) -> str:
    """The report's first words when some of the request's branches found nothing."""
    named = "; ".join(f"“{_inline(query)}”" for query in queries)
    more = ", add documents that cover it," if _searches_collection() else ""
    return (
        f"> **Partly answered.** The sources read found nothing on {named}: the report covers the rest of the "
        f"request. To go on, reword that part{more} or dig deeper below."
    )
