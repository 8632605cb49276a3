"""Quote verification and report rendering: only analysed pages are cited, only real quotes are kept."""

from workers.agents.report_writer import SourceNote
from workers.pipeline.citations import cited_urls, render_report
from workers.pipeline.quotes import PageText

PAGE_A = "Heat pumps keep a COP of 2.1 at -15 °C.\n\nThe  Nordic   trial ran for 3 winters."
PAGE_B = "Ground-source systems cost 30% more to install."
SOURCES = [
    SourceNote(1, "https://a.example/trial", "Nordic trial", [("COP 2.1 at -15", "COP of 2.1 at -15 °C")]),
    SourceNote(2, "https://b.example/cost", "Costs", [("30% more", "cost 30% more to install")]),
]
TEXTS = {"https://a.example/trial": PageText(PAGE_A), "https://b.example/cost": PageText(PAGE_B)}


def sentence(text: str, sources: list[int], quotes: list[tuple[int, str]] = ()) -> dict:
    return {"text": text, "sources": sources, "quotes": [{"source": s, "quote": q} for s, q in quotes]}


def test_quote_matching_ignores_whitespace_and_typography_only() -> None:
    page = PageText(PAGE_A)
    assert page.contains("The Nordic trial ran for 3 winters.")
    assert page.contains("“The Nordic trial ran\nfor 3 winters”")
    assert not page.contains("The Nordic trial ran for 4 winters.")
    assert not page.contains("COP")  # too short to prove anything


def test_render_keeps_valid_citations_and_renumbers_in_order_of_use() -> None:
    report = {
        "title": "Cold-climate heat pumps",
        "summary": [sentence("Costs are higher for ground-source systems.", [2], [(2, "cost 30% more to install")])],
        "sections": [
            {"heading": "Efficiency", "paragraphs": [[sentence("COP stays above 2.", [1, 2])]], "subsections": []}
        ],
    }
    markdown, stats = render_report(report, SOURCES, TEXTS)
    assert markdown.startswith("# Cold-climate heat pumps\n")
    assert "Costs are higher for ground-source systems. [[1]](https://b.example/cost)" in markdown
    assert "COP stays above 2. [[2]](https://a.example/trial)[[1]](https://b.example/cost)" in markdown
    assert "1. [Costs](https://b.example/cost) — quoted: “cost 30% more to install”" in markdown
    assert "2. [Nordic trial](https://a.example/trial)" in markdown
    assert stats["citations"] == 3 and stats["citations_dropped"] == 0 and stats["sources_cited"] == 2


def test_render_drops_fabrications() -> None:
    report = {
        "title": "T",
        "summary": [
            sentence("Per [this study](https://evil.example/x) and https://evil.example/y it works.", [1]),
            sentence("Only an invented source backs this.", [7]),
            sentence("A fake quote is attached.", [1], [(1, "a quote that is on no page at all")]),
            sentence("<script>alert(1)</script> [3] text", [2]),
        ],
        "sections": [],
    }
    markdown, stats = render_report(report, SOURCES, TEXTS)
    assert "evil.example" not in markdown
    assert "Only an invented source" not in markdown
    assert "on no page at all" not in markdown
    assert "<script>" not in markdown
    assert set(cited_urls(markdown)) <= {s.url for s in SOURCES}
    assert stats["citations_dropped"] == 3 and stats["quotes_dropped"] == 1 and stats["sentences_dropped"] == 1


def test_sentence_without_any_valid_source_is_dropped() -> None:
    report = {"title": "T", "summary": [sentence("Unsupported claim.", [])], "sections": []}
    markdown, stats = render_report(report, SOURCES, TEXTS)
    assert "Unsupported claim" not in markdown and stats["sentences_dropped"] == 1
