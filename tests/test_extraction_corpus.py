"""Main-text extraction on the annotated corpus of tests/corpus, and the safety properties of page_text's
trafilatura path (hidden text, scripts and styles dropped, entities as text, no network, limits), and one text
for a page whether it is indexed from a file or scraped from the collection view."""

import json
import socket
import sys
from pathlib import Path

import pytest
from django.http import HttpResponse
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.extraction import current, load_corpus, normalise, score
from devtools.processes import ROOT
from research.collection.documents import parse_document
from research.text import page_text
from research.text.page_text import decode_body, extract_page, extract_text
from research.text.quotes import normalise as normalise_quote
from research.text.storable import storable

ARTICLE = "".join(
    f"<p>Paragraph {n} of the article says something about heat pumps in cold climates, with a full sentence.</p>"
    for n in range(8)
)


def test_extraction_corpus_held_out_meets_target() -> None:
    result = score(current, load_corpus("held-out"))

    assert result.pages == 15 and result.failed == ()
    assert result.f1 >= 0.90 and result.precision >= 0.88


def test_extraction_corpus_dev_part_and_no_page_fails() -> None:
    result = score(current, load_corpus("dev"))

    assert result.pages == 40 and result.failed == ()
    assert result.f1 >= 0.90 and result.precision >= 0.88


def test_extraction_corpus_annotations_are_in_their_pages() -> None:
    annotations = json.loads((Path(__file__).parent / "corpus" / "annotations.json").read_text())
    pages = load_corpus()

    assert len(pages) == len(annotations) >= 55
    for page in pages:
        soup_text = normalise(page_text.extract_page_soup(page.html, "u")[1] + " " + page.html)
        assert page.keep and page.drop, page.name
        assert all(normalise(segment) in soup_text for segment in page.keep), page.name
        assert not any(normalise(d) in normalise(" ".join(page.keep)) for d in page.drop), page.name


def test_the_shared_extractor_reads_every_corpus_page_as_the_keyword_options_did(monkeypatch) -> None:
    """One trafilatura Extractor serves every page: same text as options given by keyword on each call, and no
    state carried from one page to the next (the pages are read in two orders)."""
    import trafilatura

    pages = load_corpus()
    shared = [extract_page(page.html, "u") for page in pages]
    shared_reversed = [extract_page(page.html, "u") for page in reversed(pages)][::-1]
    bare_extraction = trafilatura.bare_extraction

    def by_keyword(tree, url=None, options=None):
        assert options is page_text._extractor()
        return bare_extraction(
            tree,
            url=url,
            favor_precision=True,
            favor_recall=False,
            include_comments=False,
            include_tables=True,
            include_images=False,
            include_links=False,
            include_formatting=False,
            with_metadata=False,
            deduplicate=False,
        )

    monkeypatch.setattr(trafilatura, "bare_extraction", by_keyword)
    by_keywords = [extract_page(page.html, "u") for page in pages]

    assert shared == by_keywords == shared_reversed
    assert sum(len(text) for _, text in shared) > 20_000  # the pages were read, not failed


def test_extraction_drops_hidden_scripts_and_styles_and_keeps_entities_as_text() -> None:
    html = f"""<html><head><title>T</title><style>p {{ color: red }}</style></head><body>
    <script>var secret = "script text";</script>
    <article>{ARTICLE}
      <p style="display:none">Hidden style paragraph that a reader never sees on the page.</p>
      <p hidden>Hidden attribute paragraph that a reader never sees on the page.</p>
      <div aria-hidden="true"><p>Aria hidden paragraph that a reader never sees on the page.</p></div>
      <p>Entity &lt;script&gt;alert(1)&lt;/script&gt; stays literal text in this sentence.</p>
    </article></body></html>"""

    _, text = extract_page(html, "https://x.test/")

    assert "Paragraph 0 of the article" in text and "Paragraph 7 of the article" in text
    assert "Hidden" not in text and "Aria hidden" not in text
    assert "script text" not in text and "color: red" not in text
    assert "Entity <script>alert(1)</script> stays literal text" in text
    assert "\n\n" in text  # paragraph breaks kept


def test_extraction_keeps_every_post_of_a_forum_thread_without_signatures() -> None:
    # given a thread: four posts in div soup, each with a post-content block, a signature and a post toolbar
    posts = "".join(
        f'<div class="post"><div class="post-author"><a href="/u/{n}">user{n}</a></div><div class="post-content">'
        f"<p>Post number {n} of the thread explains one more step of bleeding the radiators in the flat.</p></div>"
        f'<div class="signature">Signature line of user{n}</div><div class="post-actions"><a href="#r">Reply</a> '
        f'<a href="#q">Quote</a> <a href="#p">Report post</a></div></div>'
        for n in range(4)
    )
    html = f'<html><body><div class="content"><h1>Bleeding radiators</h1>{posts}</div></body></html>'
    # when
    _, text = extract_page(html, "u")
    # then every reply is main text; signatures and toolbars are not
    assert all(f"Post number {n} of the thread" in text for n in range(4))
    assert "Signature line" not in text and "Report post" not in text


def test_extraction_drops_furniture_named_by_class_and_link_lists_but_keeps_the_page() -> None:
    # given an article in a wrapper whose class says "sidebar", with a purchase box, a share bar, a skip link,
    # an unlabelled list of related links, and a paragraph in an element whose class only contains "nav"
    related = "".join(f'<a href="/r/{n}">Related story number {n} about something else</a><br>' for n in range(4))
    html = f"""<html><body><a href="#main">Skip to content</a><div class="layout has-sidebar">
    <div class="buy-box"><p>Free delivery on orders over 50 euros</p></div>
    <div class="shareBar"><a href="/s">Share this story with friends</a></div>
    <div class="c1"><h1>Heat pumps</h1>{ARTICLE}<p class="navy-text">A navy paragraph is still the article.</p>
    </div><div class="c2"><b>See also</b><br>{related}</div></div></body></html>"""
    # when
    _, text = extract_page(html, "u")
    # then
    assert "Paragraph 0 of the article" in text and "Paragraph 7 of the article" in text
    assert "A navy paragraph is still the article." in text
    assert not any(s in text for s in ("Skip to content", "Free delivery", "Share this story", "Related story"))


def test_extraction_of_a_table_layout_keeps_the_content_column_lists_and_drops_the_footer_band() -> None:
    # given a page laid out in a table: a menu row, a sidebar and a content column, and a footer row
    html = f"""<html><body><table><tr><td colspan="2"><a href="/">Home</a> | <a href="/a">About</a></td></tr>
    <tr><td><div><b>Most read</b><br><a href="/1">One story</a><br><a href="/2">Two story</a><br>
    <a href="/3">Three story</a></div></td><td><h1>Heat pumps</h1>{ARTICLE}
    <ul><li>First listed point of the article</li><li>Second listed point of the article</li></ul></td></tr>
    <tr><td colspan="2"><p>Copyright 2024 Example Media. All rights reserved.</p></td></tr></table></body></html>"""
    # when
    _, text = extract_page(html, "u")
    # then
    assert "Paragraph 0 of the article" in text and "- Second listed point of the article" in text
    assert "Copyright" not in text and "Most read" not in text and "Three story" not in text


def test_extraction_never_opens_a_connection(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("page_text opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    page = load_corpus("dev")[0]

    assert "tram line" in extract_page(page.html, "https://x.test/a")[1]


def test_extraction_falls_back_past_the_element_limit_and_on_tiny_pages(monkeypatch) -> None:
    monkeypatch.setattr(page_text, "_MAX_EXTRACTOR_ELEMENTS", 5)
    html = f"<html><body><nav>Menu entry</nav><main>{ARTICLE}</main></body></html>"

    assert extract_page(html, "u") == page_text.extract_page_soup(html, "u")
    assert extract_page("<p>Short.</p>", "u")[1] == "Short."


def test_extraction_markdown_and_plain_text_unchanged() -> None:
    body = "# Title\n\n<nav>not html here</nav>\n\nA paragraph."

    assert extract_text(body, "text/markdown", "u") == ("Title", body)
    assert extract_text(body, "text/plain", "u")[1] == body


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_extraction_of_any_paragraph_text_is_storable_and_inert(words: str) -> None:
    # given arbitrary text, escaped, as one more paragraph of an article beside a script
    escaped = words.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    html = f"<html><body><script>var leak = 1;</script><article>{ARTICLE}<p>{escaped}</p></article></body></html>"
    # when
    title, text = extract_page(html, "u")
    # then the text is storable, holds the article and nothing of the script
    assert storable(text) == text and storable(title) == title
    assert "Paragraph 3 of the article" in text and "var leak" not in text


@pytest.mark.parametrize("depth", [300, 5000])
def test_extraction_survives_deep_nesting(depth: int) -> None:
    html = "<html><body>" + "<div>" * depth + ARTICLE + "</div>" * depth + "</body></html>"

    assert "Paragraph 5 of the article" in extract_page(html, "u")[1]


def test_pydoc_pages_index_and_scrape_to_the_same_text_methods_included() -> None:
    # given a pydoc page of the demo collection: every class's methods sit in layout tables
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import build_demo_collection as demo
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    html = demo.render("multiprocessing.process")
    # when it is indexed as a file, and served by the collection view and decoded as the scraper does
    indexed = parse_document(Path("/demo/multiprocessing.process.html"), html.encode("utf-8"))
    served = HttpResponse(indexed.source, content_type="text/html; charset=utf-8")
    scraped = extract_text(decode_body(served.content, "utf-8", is_html=True), "text/html", "http://web:8000/c/1/s/")
    # then both read the same text (quotes are checked against both), and it holds the methods' docstrings
    assert scraped == (indexed.title, indexed.text)
    close_doc = "It is an error to call this method if the child process is still running."
    assert normalise_quote(close_doc) in normalise_quote(indexed.text)


@pytest.mark.parametrize("depth", [2100, 20_000])
def test_extraction_keeps_the_text_nested_past_the_parsers_own_depth_limit(depth: int) -> None:
    # given a page nested deeper than libxml2 builds a tree (2,048 levels), its text at the bottom
    html = "<html><body>" + "<div>" * depth + "deep text" + "</div>" * depth + "<p>After.</p></body></html>"
    # when it is read, by the rules and through trafilatura
    _, rules = page_text.extract_page_soup(html, "u")
    _, text = extract_page(html, "u")
    # then nothing past the limit is lost
    assert "deep text" in rules and "After." in rules
    assert "deep text" in text


def test_removing_an_element_keeps_the_text_after_it_and_sets_no_control_character() -> None:
    # given text around removed elements, carrying control characters as bytes and as character references
    html = (
        "<html><body><article><p>Before \x01 &#1; one<script>leak()</script>&#2;\x0b two<span hidden>gone</span>"
        "&#x1f; three<!-- note --> four<noscript>gone</noscript> five.</p>" + ARTICLE + "</article></body></html>"
    )
    # when the page is read (lxml refuses to set a text that holds a control character)
    _, text = extract_page(html, "u")
    _, rules = page_text.extract_page_soup(html, "u")
    # then the text after each removed element stays, in order, and no control character does
    for got in (text, rules):
        assert "Before one two three four five." in " ".join(got.split())
        assert "leak" not in got and "gone" not in got and "note" not in got
        assert not any(ord(char) < 32 and char not in "\n\t" for char in got)


def test_class_names_are_read_one_space_apart_as_trafilatura_expects() -> None:
    # given a menu whose class starts with "nav", once written with stray spaces
    menu = "<div class='{}'><p>" + "Menu entry words that are not the article. " * 6 + "</p></div>"
    pages = [
        f"<html><body>{menu.format(name)}<article>{ARTICLE}</article></body></html>"
        for name in ("nav-links", "  nav-links   extra ")
    ]
    # when both are read
    texts = [extract_page(page, "u")[1] for page in pages]
    # then trafilatura judges them alike: the menu is not the article
    assert "Menu entry" not in texts[0]
    assert texts[0] == texts[1]


def test_title_and_headings_skip_script_text_and_nested_hidden_blocks_go_in_one_pass() -> None:
    # given a page without <title> whose <h1> holds a script, and thousands of nested hidden blocks
    hidden = "<div hidden>" * 3000 + "secret" + "</div>" * 3000
    heading = "<h1>Real <script>var x = 1;</script>heading</h1>"
    html = f"<html><body>{heading}{hidden}<article>{ARTICLE}</article></body></html>"
    # when it is read
    title, text = extract_page(html, "u")
    # then the title is the heading's text, and nothing hidden is read
    assert title == "Real heading"
    assert "secret" not in text and "Paragraph 7 of the article" in text


_TAGS = ["div", "p", "span", "a", "table", "tr", "td", "ul", "li", "pre", "section", "article", "main", "form", "h1"]
_ATTRIBUTES = [
    "",
    ' class="post"',
    ' class=" nav menu"',
    " hidden",
    ' style="display:none"',
    ' role="main"',
    ' href="#x"',
]


@st.composite
def _tag_soup(draw: st.DrawFn, depth: int = 0) -> str:
    """Nested tags (not always closed), attributes the cleaning reads, comments, scripts and arbitrary text."""
    if depth > 4 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["text", "text", "comment", "script", "br"]))
        words = draw(st.text(max_size=40)).replace("&", "&amp;").replace("<", "&lt;")
        return {
            "text": words,
            "comment": f"<!--{words.replace('-', '')}-->",
            "script": "<script>var scriptLeak = 1;</script>",
            "br": "<br>",
        }[kind]
    tag = draw(st.sampled_from(_TAGS))
    children = "".join(draw(st.lists(_tag_soup(depth + 1), max_size=4)))
    closing = draw(st.sampled_from([f"</{tag}>", f"</{tag}>", ""]))
    return f"<{tag}{draw(st.sampled_from(_ATTRIBUTES))}>{children}{closing}"


@settings(max_examples=80, deadline=None)
@given(st.lists(_tag_soup(), min_size=1, max_size=6))
def test_any_tag_soup_is_read_without_error_storable_and_without_script_text(blocks: list[str]) -> None:
    # given any page of nested, unclosed tags with comments, scripts, hidden and furniture-named blocks
    html = f"<html><head><title>T</title></head><body>{''.join(blocks)}</body></html>"
    # when it is read, with trafilatura and by the rules alone
    for title, text in (extract_page(html, "u"), page_text.extract_page_soup(html, "u")):
        # then nothing fails, the text is storable, and no script or control character is in it
        assert storable(text) == text and storable(title) == title
        assert "scriptLeak" not in text
        assert not any(ord(char) < 32 and char not in "\n\t" for char in text)
