"""Citation links pointed at their quotes for the page (research/web/citation_links.py): a collection document's
page with the quote marked, a web page's text fragment; the rendered link stays one safe link whatever the quote."""

import html
import re
from urllib.parse import parse_qs, unquote, urlsplit

from hypothesis import given
from hypothesis import strategies as st

from research.text.links import link_title
from research.web.citation_links import quote_anchors, text_fragment
from research.web.rendering import render_markdown

BASE = "https://research.example.org/"
QUOTE = "Heat pumps kept a seasonal performance factor of 3.1 in the Nordic trial, with defrost losses of 9 %."


def cite(url: str, quote: str) -> str:
    return f'A sentence. [[1]]({url} "{link_title(quote)}")'


def hrefs(markdown: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'href="([^"]*)"', render_markdown(markdown))]


def test_a_collection_citation_opens_its_document_at_the_quote_with_the_way_back() -> None:
    markdown = quote_anchors(cite(f"{BASE}collection/7/", QUOTE), BASE, "0b5c")
    (href,) = hrefs(markdown)
    parts = urlsplit(href)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{BASE}collection/7/" and parts.fragment == "quote"
    assert parse_qs(parts.query) == {"quote": [QUOTE], "from": ["0b5c"]}


def test_a_web_citation_carries_a_text_fragment_of_its_quote() -> None:
    (href,) = hrefs(quote_anchors(cite("https://example.com/trial", QUOTE), BASE, "0b5c"))
    assert href == "https://example.com/trial#:~:text=Heat%20pumps%20kept%20a,losses%20of%209%20%25."
    # a short quote whole, its dashes encoded; a page with a fragment of its own keeps it
    assert text_fragment("https://example.com/a#part", "A well-known COP of 3") == (
        "https://example.com/a#part:~:text=A%20well%2Dknown%20COP%20of%203"
    )


def test_links_that_are_not_citations_and_the_stored_markdown_are_left_alone() -> None:
    plain = "See [the trial](https://example.com/trial) and [[1]](https://example.com/trial)."
    assert quote_anchors(plain, BASE, None) == plain


@given(st.text(min_size=1, max_size=300).filter(lambda s: s.strip()))
def test_any_quote_gives_one_safe_link_to_its_page(quote: str) -> None:
    for url in ("https://example.com/trial?x=1", f"{BASE}collection/3/"):
        found = hrefs(quote_anchors(cite(url, quote), BASE, "r1"))
        assert len(found) == 1, found
        assert found[0].startswith(url.split("?")[0])
        if "collection" in url:
            assert parse_qs(urlsplit(found[0]).query)["quote"] == [" ".join(quote.split())]
        else:
            # one text, or a start and an end, each holding the quote's own words (its commas encoded)
            parts = found[0].split("#:~:text=", 1)[1].split(",")
            assert 1 <= len(parts) <= 2 and all(unquote(part).split() for part in parts)
