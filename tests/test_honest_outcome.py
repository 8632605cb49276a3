"""The outcome of a research whose pages held no answer (workers/pipeline/outcome.py), and what the document
collection covers (research/collection/overview.py): written from the stored tree and collection."""

from __future__ import annotations

import datetime
from collections import Counter

import pytest

from research.collection.documents import store_document
from research.collection.overview import TOP_LEVEL, UPLOADS, collection_overview
from research.collection.readers import ParsedDocument
from research.models import (
    DocumentOrigin,
    Extract,
    Page,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from workers.pipeline.outcome import (
    ReadPage,
    SearchedQuery,
    TreeOutcome,
    failure_cause,
    unanswered_branches,
    unanswered_report,
)

pytestmark = pytest.mark.django_db

SHARE = "/srv/share"


def add(path: str, title: str, text: str, owner=None, origin: str = DocumentOrigin.FOLDER) -> None:
    parsed = ParsedDocument(title=title, text=text, content_type="text/markdown", source="")
    store_document(path, origin, owner.pk if owner else None, text.encode(), parsed)


@pytest.fixture
def share(user, other_user) -> None:
    add(f"{SHARE}/Finance/q1-2026-report.md", "Q1 2026 report", "Revenue grew to 4.1 million euros in Q1 2026.")
    add(f"{SHARE}/Finance/archive/q1-2025-report.md", "Q1 2025 report", "Revenue was 3.2 million euros in 2025.")
    add(f"{SHARE}/HR/holidays.md", "Holiday policy", "Unused company days do not roll over.")
    add(f"{SHARE}/HR/on-call.md", "On-call rules", "On-call weeks are paid at a flat rate.")
    add(f"{SHARE}/IT/laptops.md", "Laptop policy", "Laptops are replaced every four years.")
    add(f"{SHARE}/IT/vpn.md", "VPN guide", "Connect to the VPN before opening the wiki.")
    add(f"{SHARE}/readme.md", "About this share", "The share holds the company's reports.")
    add(f"upload/{user.pk}/ab/notes.md", "Alice's notes", "Alice noted the revenue.", user, DocumentOrigin.UPLOAD)
    add(f"upload/{other_user.pk}/cd/secret.md", "Mallory's revenue plan", "Revenue secrets.", other_user, "upload")


def test_the_overview_counts_what_its_reader_may_read_by_folder_and_names_the_closest(share, user) -> None:
    overview = collection_overview(user.pk, "What was the company's revenue?")
    # every folder document and alice's own upload; not another user's private one
    assert overview.documents == 8
    assert overview.folders == [("Finance", 2), ("HR", 2), ("IT", 2), (TOP_LEVEL, 1), (UPLOADS, 1)]
    closest = [item.title for item in overview.closest]
    assert "Mallory's revenue plan" not in closest
    assert set(closest) >= {"Q1 2026 report", "Alice's notes"}
    assert all("Mallory" not in item.title for item in overview.newest)


def test_an_empty_collection_is_an_overview_of_nothing(user) -> None:
    overview = collection_overview(user.pk, "What was the company's revenue?")
    assert (overview.documents, overview.folders, overview.closest, overview.newest) == (0, [], [], [])


def outcome(pages: int) -> TreeOutcome:
    read = [
        ReadPage(f"Page {i} [draft]", f"https://example.test/{i}", datetime.date(2026, 1, i + 1), "current")
        for i in range(pages)
    ]
    queries = [SearchedQuery("company revenue 2026", "What the sources state about revenue.", pages, pages)]
    return TreeOutcome(queries, pages, read)


def test_the_no_answer_report_over_the_collection_says_what_it_covers_and_how_to_go_on(share, user, settings) -> None:
    settings.SEARCH_PROVIDERS = ["local"]
    research = Research.objects.create(owner=user, prompt="What was the company's revenue?", title="Revenue")
    markdown, stats = unanswered_report(research, outcome(2))
    assert markdown.startswith("# Revenue\n\n> **No answer found.** This research read 2 pages from one search")
    assert "- “company revenue 2026” (What the sources state about revenue.): 2 found, 2 read." in markdown
    assert "- Page 0 \\[draft\\], 2026-01-01" in markdown  # a title's marks are text, not markdown
    assert "what was searched and read, what the document collection covers, and how to go on." in markdown
    assert "## What the collection covers\n\nYou may read 8 documents in the collection." in markdown
    assert "By folder: Finance (2); HR (2); IT (2); Top level of the share (1); Uploads (1)." in markdown
    assert "Q1 2026 report" in markdown
    assert "Mallory" not in markdown
    assert "**Add documents**" in markdown and "**Search the web**" in markdown
    assert "](" not in markdown  # titles, not links: this report cites nothing
    assert stats["outcome"] == "unanswered" and (stats["pages_analysed"], stats["queries"]) == (2, 1)
    assert stats["citations"] == stats["sources_cited"] == stats["sources_available"] == 0


def test_the_no_answer_report_of_a_web_research_leaves_the_collection_out(user, settings) -> None:
    settings.SEARCH_PROVIDERS = ["searxng"]
    research = Research.objects.create(owner=user, prompt="What was the company's revenue?", title="Revenue")
    markdown, _ = unanswered_report(research, outcome(1))
    assert "read one page from one search" in markdown
    assert "it says what was searched and read and how to go on." in markdown
    assert "What the collection covers" not in markdown
    assert "**Search the web**" not in markdown and "**Dig deeper**" in markdown


def test_no_page_read_is_a_failure_with_its_cause_and_pages_read_are_not(user) -> None:
    research = Research(owner=user, prompt="p", partial=False)
    assert failure_cause(research, outcome(1)) is None
    failed = TreeOutcome([], 0, [], pages_failed=Counter({"http_error": 2, "timeout": 1}))
    assert (
        failure_cause(research, failed)
        == "No page could be analysed: all 3 pages found failed (http_error 2, timeout 1)."
    )
    assert (
        failure_cause(research, TreeOutcome([], 0)) == "No page could be analysed: the searches found no page to read."
    )
    cancelled = Research(owner=user, prompt="p", partial=True, stop_reason="cancelled")
    assert failure_cause(cancelled, TreeOutcome([], 0)) == "The research was cancelled before any page was analysed."
    timed = Research(owner=user, prompt="p", partial=True, stop_reason="budget_seconds", budget_seconds=60)
    assert (
        failure_cause(timed, TreeOutcome([], 0))
        == "The research reached its time budget (60 seconds) before any page was analysed."
    )


def test_the_branches_left_open_are_the_finished_top_queries_with_no_finding(user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="t")
    tops = [
        SerpQuery.objects.create(research=research, depth=1, position=i, query=name, objective="o", status=status)
        for i, (name, status) in enumerate(
            [("covered", QueryStatus.DONE), ("open", QueryStatus.DONE), ("broken", QueryStatus.FAILED)]
        )
    ]
    child = SerpQuery.objects.create(
        research=research, parent=tops[0], depth=2, position=0, query="covered / 1", objective="o", status="done"
    )
    assert unanswered_branches(research.pk) == []  # no finding anywhere: the no-answer report says it all
    page = Page.objects.create(research=research, url="https://example.test/a", status="fetched", text="A fact.")
    website = Website.objects.create(
        research=research, query=child, page=page, position=0, url=page.url, status=WebsiteStatus.ANALYZED
    )
    Extract.objects.create(research=research, website=website, position=0, fact="A fact.", quote="A fact.")
    # a finding deep in the first branch answers it; the failed branch is a failure, not an open part
    assert unanswered_branches(research.pk) == ["open"]
