"""The snapshot's coverage: findings given to the writer, pages cited, words written against the target."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from research.live.coverage import count_words
from research.live.delta import build_delta
from research.live.snapshot import build_snapshot
from research.models import (
    Document,
    DocumentKind,
    Extract,
    ReportSection,
    Research,
    ResearchStatus,
    SectionStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.text.links import link_target
from tests.support.factories import build_tree
from tests.support.snapshot_schema import validate_snapshot

pytestmark = pytest.mark.django_db

A, B, C = "https://example.com/a", "https://example.com/b_(x)", "https://example.com/c"


def _research(user) -> tuple[Research, list[Extract]]:
    """Two queries: page A analysed by both, B by one, C failed; five findings."""
    research = Research.objects.create(
        owner=user,
        prompt="p",
        title="t",
        status=ResearchStatus.REPORTING,
        breadth=2,
        depth=1,
        report_words=1500,
        report_version=2,
    )
    first, second = (
        SerpQuery.objects.create(research=research, depth=1, position=i, query=f"q{i}", objective="o") for i in (0, 1)
    )
    analysed = WebsiteStatus.ANALYZED
    w_a = Website.objects.create(research=research, query=first, position=0, url=A, status=analysed)
    w_b = Website.objects.create(research=research, query=first, position=1, url=B, status=analysed)
    Website.objects.create(research=research, query=second, position=0, url=A, status=analysed)
    Website.objects.create(research=research, query=second, position=1, url=C, status=WebsiteStatus.FAILED)
    extracts = [
        Extract.objects.create(research=research, website=website, position=i, fact="f", quote="q")
        for website, i in ((w_a, 0), (w_a, 1), (w_a, 2), (w_b, 0), (w_b, 1))
    ]
    return research, extracts


def _section(research: Research, position: int, status: str, plan: dict, markdown: str = "") -> None:
    ReportSection.objects.create(
        research=research,
        version=research.report_version,
        position=position,
        title=f"s{position}",
        status=status,
        plan=plan,
        markdown=markdown,
    )


def test_coverage_counts_findings_used_pages_cited_and_words_against_rows(user) -> None:
    # given sections of the current version: three written (one without findings), one pending
    research, e = _research(user)
    _section(
        research,
        1,
        SectionStatus.WRITTEN,
        {"findings": [e[0].pk, e[1].pk], "sources": [1]},
        f'## Heat pumps\n\nHeat pumps work in cold climates. [[1]]({A} "a quote of seven words here")\n',
    )
    _section(
        research,
        2,
        SectionStatus.WRITTEN,
        {"findings": [e[1].pk, e[2].pk, "x"]},
        f"## Costs\n\nThey cost less over time. [[2]]({link_target(B)}) [[3]](https://elsewhere.test/x)\n",
    )
    _section(research, 3, SectionStatus.PENDING, {"findings": [e[3].pk]})
    _section(research, 4, SectionStatus.WRITTEN, {}, f"## Gaps\n\nNone known [see]({C}).\n")
    # an older version's section counts for nothing
    ReportSection.objects.create(
        research=research,
        version=1,
        position=1,
        title="old",
        status=SectionStatus.WRITTEN,
        plan={"findings": [e[4].pk]},
        markdown="## Old\n\nMany old words here.\n",
    )
    # when
    snapshot = build_snapshot(research.pk)
    # then
    validate_snapshot(snapshot)
    assert snapshot["research"]["report_words"] == 1500
    assert snapshot["coverage"] == {
        "findings": 5,
        "findings_used": 3,  # e0, e1, e2: e3's section is not written yet, e4's is of another version
        "pages_analysed": 2,  # A (twice) and B; C failed
        "pages_cited": 2,  # A and B; C was not analysed, elsewhere.test is no page of the research
        "words": 8 + 6 + 4,  # headings and prose, link texts but no citation marks, targets or tooltips
        "report_words": 1500,
    }
    assert build_delta(research.pk, None)["coverage"] == snapshot["coverage"]

    # when the report is assembled: its own text counts, without the sources list
    Document.objects.create(
        research=research,
        kind=DocumentKind.REPORT,
        version=2,
        markdown=(
            f'# Title words here\n\n## Summary\n\nOne two three. [[1]]({A} "x y z")\n\n'
            f"## Sources\n\n1. [Page A title]({A}) — quoted: “x y z”\n"
        ),
    )
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.COMPLETED)
    snapshot = build_snapshot(research.pk)
    # then
    validate_snapshot(snapshot)
    assert snapshot["coverage"] == {
        "findings": 5,
        "findings_used": 3,
        "pages_analysed": 2,
        "pages_cited": 1,
        "words": 7,
        "report_words": 1500,
    }
    assert build_delta(research.pk, None)["coverage"] == snapshot["coverage"]


def test_coverage_of_a_research_without_report_is_zero_and_report_words_default(user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.DRAFT)
    snapshot = build_snapshot(research.pk)
    validate_snapshot(snapshot)
    assert snapshot["research"]["report_words"] == 4000
    assert snapshot["coverage"] == {
        "findings": 0,
        "findings_used": 0,
        "pages_analysed": 0,
        "pages_cited": 0,
        "words": 0,
        "report_words": 4000,
    }


def test_coverage_is_counted_from_what_the_snapshot_loads_anyway(user) -> None:
    # given a tree whose report cites some of its pages, and sections of the current version that name findings
    small = build_tree(user, breadth=1, depth=1)
    large = build_tree(user, breadth=3, depth=2)
    for research in (small, large):
        urls = list(Website.objects.filter(research=research).values_list("url", flat=True))[:5]
        Document.objects.filter(research=research).update(
            markdown="# Report\n\n" + " ".join(f"Fact. [[{i}]]({url})" for i, url in enumerate(urls, 1)) + "\n"
        )
        ids = list(Extract.objects.filter(research=research).values_list("pk", flat=True))
        _section(research, 1, SectionStatus.WRITTEN, {"findings": ids[:4]}, "## S\n\nText.\n")
    # when
    with CaptureQueriesContext(connection) as small_queries:
        small_snapshot = build_snapshot(small.pk)
    with CaptureQueriesContext(connection) as large_queries:
        large_snapshot = build_snapshot(large.pk)
    # then: no query more than the snapshot's nine (one per table), whatever the size
    assert len(small_queries) == len(large_queries) == 9
    assert small_snapshot["coverage"]["pages_cited"] == 5 and large_snapshot["coverage"]["pages_cited"] == 5
    assert large_snapshot["coverage"]["findings_used"] == 4
    assert large_snapshot["coverage"]["pages_analysed"] == large_snapshot["progress"]["pages_analysed"]


def test_count_words_reads_as_a_reader_does() -> None:
    assert count_words("") == 0
    assert count_words('## Don’t stop\n\n- well-known [text link](https://x.test/a_(b) "not these words") [1, 2]') == 5


_SECTION_PARTS = st.sampled_from(
    ["word", "Don’t", "well-known", "[1]", "[1, 2]", f"[[1]]({A})", f'[[2]]({B} "a quote")', "## Heading", "- item"]
)


@given(st.lists(st.lists(_SECTION_PARTS, max_size=12).map(" ".join), max_size=6))
def test_sections_counted_one_by_one_count_as_the_text_they_make(sections: list[str]) -> None:
    from research.live.coverage import coverage

    # given written sections, counted as the snapshot and the deltas count them (each section's figures kept)
    rows = [{"status": SectionStatus.WRITTEN, "findings": [], "markdown": markdown} for markdown in sections]
    figures = coverage(0, 0, 2, rows, None, lambda: [A, B])
    # then they count the words and cite the pages of the text they make together, asked once or again
    whole = "\n\n".join(sections)
    assert figures["words"] == count_words(whole)
    assert figures["pages_cited"] == len({url for url in (A, B) if f"({url}" in whole})
    assert coverage(0, 0, 2, rows, None, lambda: [A, B]) == figures
