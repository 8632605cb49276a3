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
from research.collection import parse_document
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
    assert result.f1 >= 0.90
    # The target is 0.88; the held-out part measured 0.868 when it was first scored (docs/performance.md), and
    # the options were not tuned on it afterwards. This floor keeps it from getting worse.
    assert result.precision >= 0.86


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
