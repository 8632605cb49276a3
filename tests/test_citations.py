"""Quote verification and report rendering: only analysed pages are cited, only real quotes are kept."""

import re

from research.text.links import link_target
from research.text.quotes import PageText
from research.web.rendering import render_markdown
from tests.support.reports import sentence
from workers.agents.report_writer import SourceNote
from workers.pipeline.citations import MemoryNote, cited_urls, drop_stray_links, render_report, report_title

PAGE_A = "Heat pumps keep a COP of 2.1 at -15 °C.\n\nThe  Nordic   trial ran for 3 winters."
PAGE_B = "Ground-source systems cost 30% more to install."
SOURCES = [
    SourceNote(1, "https://a.example/trial", "Nordic trial", [("COP 2.1 at -15", "COP of 2.1 at -15 °C")]),
    SourceNote(2, "https://b.example/cost", "Costs", [("30% more", "cost 30% more to install")]),
]
TEXTS = {"https://a.example/trial": PageText(PAGE_A), "https://b.example/cost": PageText(PAGE_B)}


def test_quote_matching_ignores_whitespace_and_typography_only() -> None:
    page = PageText(PAGE_A)
    assert page.contains("The Nordic trial ran for 3 winters.")
    assert page.contains("“The Nordic trial ran\nfor 3 winters”")
    assert not page.contains("The Nordic trial ran for 4 winters.")
    assert not page.contains("COP")  # too short to prove anything


CHINESE = "热泵在零下二十度时仍然能够正常工作并保持高效率。"


def test_quotes_too_short_to_mean_something_are_refused() -> None:
    # given a page with claims, fragments of which occur on countless pages
    page = PageText("In 2021 the Heat-pump-efficiency-programme found a COP of 2.1 at -15 °C. " + CHINESE)
    # then fragments shorter than 20 characters or 3 words prove nothing, whole spans of a claim do
    assert not page.contains("In 2021 the Heat")  # 16 characters
    assert not page.contains("Heat-pump-efficiency-programme")  # 30 characters, one word
    assert page.contains("COP of 2.1 at -15 °C")  # 20 characters, 6 words
    assert page.contains("the Heat-pump-efficiency-programme found")
    # a script written without spaces is held to the character minimum alone
    assert page.contains("热泵在零下二十度时仍然能够正常工作并保持高效率")
    assert not page.contains("热泵在零下二十度")


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
    # each citation carries the quote it rests on as its title: the sentence's own, else its source's finding
    cost, trial = (
        '(https://b.example/cost "cost 30% more to install")',
        '(https://a.example/trial "COP of 2.1 at -15 °C")',
    )
    assert f"Costs are higher for ground-source systems. [[1]]{cost}" in markdown
    assert f"COP stays above 2. [[2]]{trial}[[1]]{cost}" in markdown
    assert "1. [Costs](https://b.example/cost) — quoted: “cost 30% more to install”" in markdown
    assert "2. [Nordic trial](https://a.example/trial) — quoted: “COP of 2.1 at -15 °C”" in markdown
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


def test_angle_brackets_stay_literal_text_in_the_report_and_its_title() -> None:
    # given a model that writes comparisons and markup
    report = {
        "title": "Latency < 5 ms <b>",
        "summary": [sentence("Switching takes < 5 ms and > 2 ms; <script>alert(1)</script> is text.", [1])],
        "sections": [],
    }
    # when the report is rendered
    markdown, _ = render_report(report, SOURCES, TEXTS)
    html = render_markdown(markdown)
    # then the markdown escapes them, the page shows them as written, and nothing became markup
    assert "takes &lt; 5 ms and &gt; 2 ms; &lt;script&gt;alert(1)&lt;/script&gt; is text." in markdown
    assert "<script" not in markdown and "<b>" not in markdown
    assert "takes &lt; 5 ms and &gt; 2 ms; &lt;script&gt;alert(1)&lt;/script&gt; is text." in html
    assert "<script" not in html and "<b>" not in html
    assert report_title(markdown) == "Latency < 5 ms <b>"


def test_urls_with_balanced_parentheses_are_whole_links() -> None:
    # given an analysed Wikipedia page, whose URL holds parentheses
    wiki = "https://en.wikipedia.org/wiki/Heat_pump_(HVAC)"
    sources = [*SOURCES, SourceNote(3, wiki, "Heat pump (HVAC)", [])]
    texts = {**TEXTS, wiki: PageText("A heat pump moves heat.")}
    report = {
        "title": "T",
        "summary": [
            sentence(f"As [the article]({wiki}) and {wiki} say, it moves heat.", [3]),
            sentence("Unknown (https://evil.example/a_(b)) claims.", [1]),
        ],
        "sections": [],
    }
    # when the report is rendered
    markdown, stats = render_report(report, sources, texts)
    # then the model's own links to it are unlinked whole, the citation and the source entry keep the whole URL
    # (its parentheses percent-encoded, as every link target's: research/text/links.py)
    linked = "https://en.wikipedia.org/wiki/Heat_pump_%28HVAC%29"
    assert f"As the article and say, it moves heat. [[1]]({linked})" in markdown
    assert "Unknown () claims." in markdown and "evil.example" not in markdown
    assert f"1. [Heat pump (HVAC)]({linked})" in markdown
    analysed = [source.url for source in sources]
    assert cited_urls(markdown, analysed) == [wiki, "https://a.example/trial", wiki, "https://a.example/trial"]
    assert stats["citations_dropped"] == 1
    assert f'href="{linked}"' in render_markdown(markdown)


def test_quotes_in_the_sources_list_are_shown_verbatim_without_markup() -> None:
    # given a page whose quoted sentence carries markup and a markdown link
    page = "Type <b>[the docs](https://evil.example/x)</b> \\ here to see it. Plain text follows."
    url = "https://c.example/md"
    sources = [SourceNote(1, url, "Markdown", [])]
    quote = "Type <b>[the docs](https://evil.example/x)</b> \\ here to see it."
    report = {"title": "T", "summary": [sentence("Docs exist.", [1], [(1, quote)])], "sections": []}
    # when the report is rendered
    markdown, stats = render_report(report, sources, {url: PageText(page)})
    html = render_markdown(markdown)
    # then the quote reads as written, and forms neither a tag nor a link
    assert stats["quotes_dropped"] == 0
    assert cited_urls(markdown) == [url, url]
    assert "evil.example" not in "".join(re.findall(r'href="([^"]*)"', html))
    assert "<b>" not in markdown and "<b>" not in html
    assert "“Type &lt;b&gt;[the docs](https://evil.example/x)&lt;/b&gt; \\ here to see it.”" in html


def test_a_quote_given_twice_with_other_whitespace_is_listed_once() -> None:
    page = "Heat pumps keep working at minus twenty degrees. Other text."
    url = "https://d.example/cold"
    sources = [SourceNote(1, url, "Cold", [])]
    quotes = [
        (1, "Heat pumps keep working at minus twenty degrees."),
        (1, "Heat pumps  keep working\nat minus twenty degrees."),
    ]
    report = {"title": "T", "summary": [sentence("They work in the cold.", [1], quotes)], "sections": []}
    markdown, stats = render_report(report, sources, {url: PageText(page)})
    assert stats["quotes_dropped"] == 0
    assert markdown.count("“Heat pumps keep working at minus twenty degrees.”") == 1


ODD_URLS = [
    "https://x.test/a)b",
    "https://x.test/x_(y)",
    "https://x.test/a b<c>d",
    'https://x.test/q?a="1"&b=`2`',
    "https://x.test/back\\slash]",
    "https://[2001:db8::1]/ipv6",
]


def test_urls_that_break_markdown_links_stay_whole_clickable_links() -> None:
    # given analysed pages whose URLs hold what ends or splits a markdown link
    sources = [SourceNote(i + 1, url, f"Title {i} ]\\", []) for i, url in enumerate(ODD_URLS)]
    texts = {url: PageText(PAGE_A) for url in ODD_URLS}
    report = {
        "title": "T",
        "summary": [
            sentence(f"Claim {i}.", [i + 1], [(i + 1, "The Nordic trial ran for 3 winters.")]) for i in range(6)
        ],
        "sections": [],
    }
    # when the report is rendered, and shown as HTML
    markdown, stats = render_report(report, sources, texts)
    html = render_markdown(markdown)
    # then each citation and each source entry is one link, traced back to its page, and clickable on the page
    assert stats["citations"] == 6 and stats["sources_cited"] == 6
    assert cited_urls(markdown, ODD_URLS) == ODD_URLS + ODD_URLS
    assert "https://x.test/a%29b" in markdown and "https://x.test/a b" not in markdown
    hrefs = [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]*)"', html)]
    assert hrefs == [link_target(url) for url in ODD_URLS + ODD_URLS]
    assert "Title 0 )\\" in html  # a title's backslash and bracket did not break its link


def test_link_targets_map_back_to_their_pages_only() -> None:
    assert link_target("https://x.test/a)b") == "https://x.test/a%29b"
    assert link_target("https://x.test/é\u00a0x") == "https://x.test/é%C2%A0x"
    assert link_target(link_target(ODD_URLS[2])) == link_target(ODD_URLS[2])
    # a link the document happens to hold for a page that was not analysed stays what it is: a stray
    assert cited_urls("[a](https://x.test/a%29b) [b](https://y.test/)", ["https://x.test/a)b"]) == [
        "https://x.test/a)b",
        "https://y.test/",
    ]


def test_stray_links_are_dropped_keeping_their_text() -> None:
    markdown = "Text [[1]](https://x.test/a%29b) and [evil](https://evil.test/x).\n\n1. [Page](https://x.test/a%29b)\n"
    kept, dropped = drop_stray_links(markdown, ["https://x.test/a)b"])
    assert dropped == 1
    assert kept == "Text [[1]](https://x.test/a%29b) and evil.\n\n1. [Page](https://x.test/a%29b)\n"


def test_each_citation_carries_its_quote_as_a_title_that_hostile_quotes_cannot_break() -> None:
    # given a page whose quoted sentence holds quotes, a ")", brackets, a markdown link, markup and a backslash
    quote = 'He said "it (mostly) works) [see](https://evil.example/x) *now* `x` <b> \\ & &quot; 热泵'
    page = f"Intro text here. {quote} Plain text follows."
    url = "https://c.example/a)b"
    sources = [SourceNote(1, url, "Page", [])]
    report = {"title": "T", "summary": [sentence("It works.", [1], [(1, quote)])], "sections": []}
    # when the report is rendered and shown
    markdown, stats = render_report(report, sources, {url: PageText(page)})
    html = render_markdown(markdown)
    # then the citation is still one link to the page, its title the quote as written, and nothing else linked
    assert stats["quotes_dropped"] == 0 and stats["citations"] == 1
    assert cited_urls(markdown, [url]) == [url, url]
    assert drop_stray_links(markdown, [url]) == (markdown, 0)
    anchors = re.findall(r'<a href="([^"]*)" title="([^"]*)"', html)
    assert [href for href, _ in anchors] == [link_target(url)]
    unescaped = anchors[0][1].replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert unescaped == quote
    assert "evil.example" not in "".join(re.findall(r'href="([^"]*)"', html))
    sentence_html = html.split("<h2>Sources</h2>")[0]
    assert "<b>" not in sentence_html and "<em>" not in sentence_html and "<code>" not in sentence_html


def test_contradictions_cite_each_side_with_its_quote() -> None:
    # given a memory contradiction naming a page the writer's sources left out, with that page's quote
    other = "https://e.example/other"
    memory = [
        MemoryNote(
            "contradiction",
            "The trials disagree on the COP.",
            [("https://a.example/trial", "Nordic trial"), (other, "Other")],
            {other: ["Our trial measured a COP of 1.4 at -15 °C."]},
        )
    ]
    report = {"title": "T", "summary": [sentence("COP is 2.1.", [1])], "sections": []}
    # when the report is rendered
    markdown, _ = render_report(report, SOURCES, TEXTS, memory)
    # then both sides of the contradiction carry a quote in their title, and the sources list shows both quotes
    html = render_markdown(markdown.split("## Contradictions")[1])
    assert re.findall(r'title="([^"]*)"', html.split("<h2>Sources</h2>")[0]) == [
        "COP of 2.1 at -15 °C",
        "Our trial measured a COP of 1.4 at -15 °C.",
    ]
    assert "[Other](https://e.example/other) — quoted: “Our trial measured a COP of 1.4 at -15 °C.”" in markdown


def test_sources_list_and_writer_prompt_show_each_sources_date_and_standing() -> None:
    from datetime import date

    from workers.agents.report_writer import sources_block

    sources = [
        SourceNote(1, "https://a.example/trial", "Nordic trial", SOURCES[0].findings, dated=date(2025, 3, 12)),
        SourceNote(
            2, "https://b.example/cost", "Costs", SOURCES[1].findings, dated=date(2024, 12, 31), standing="archived"
        ),
    ]
    report = {
        "title": "Cold-climate heat pumps",
        "summary": [],
        "sections": [
            {"heading": "Efficiency", "paragraphs": [[sentence("COP stays above 2.", [1, 2])]], "subsections": []}
        ],
    }
    markdown, _ = render_report(report, sources, TEXTS)
    assert "1. [Nordic trial](https://a.example/trial) (12 Mar 2025) — quoted:" in markdown
    assert "2. [Costs](https://b.example/cost) (archived, 31 Dec 2024) — quoted:" in markdown
    block = sources_block(sources)
    assert "[1] https://a.example/trial — Nordic trial (12 Mar 2025)" in block
    assert "[2] https://b.example/cost — Costs (archived, 31 Dec 2024)" in block


def test_a_sphinx_role_in_a_sentence_is_no_url() -> None:
    text = "If the :py:data:`~socket.SO_REUSEPORT` constant is not defined then this capability is unsupported."
    sources = [SourceNote(1, "https://a.example/trial", "Docs", [(text, text)])]
    report = {"title": "T", "summary": [], "sections": [{"heading": "H", "paragraphs": [[sentence(text, [1])]]}]}
    markdown, stats = render_report(report, sources, {"https://a.example/trial": PageText(text)})
    assert stats["citations_dropped"] == 0 and "SO_REUSEPORT" in markdown
