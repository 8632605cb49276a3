"""Turn a fetched page into (title, main text): HTML through trafilatura (on lxml's tree of the page, which the
title, the safety clean-up before it and the fallback after it read too), plain text and markdown as is, PDFs
through pypdf (with limits for PDFs off the web).

The text is data for an LLM and for verbatim-quote checks, never markup: entities are unescaped once by the
parser, so `&lt;script&gt;` in a page becomes the literal text `<script>`, and nothing here renders HTML.
"""

from __future__ import annotations

import codecs
import datetime
import functools
import io
import logging
import re
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

import lxml.html
from bs4.dammit import EncodingDetector, UnicodeDammit
from lxml import etree
from lxml.html import HtmlElement

from research.text.storable import storable

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
PLAIN_TYPES = frozenset({"text/plain"})
TEXT_TYPES = HTML_TYPES | MARKDOWN_TYPES | PLAIN_TYPES
PDF_TYPES = frozenset({"application/pdf"})

# Never part of the readable text, wherever they sit.
_DROP_TAGS = [
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "iframe",
    "object",
    "embed",
    "canvas",
    "nav",
    "header",
    "footer",
    "aside",
    "button",
    "select",
    "textarea",
    "input",
]
_DROP_TAG_SET = frozenset(_DROP_TAGS)
# ARIA spellings of nav/header/footer/aside.
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_COOKIE_MARK = re.compile(
    r"(cookie|consent|gdpr)[-_]?(banner|bar|notice|popup|modal|dialog|law|message|overlay|wall|consent|container)"
    r"|onetrust|cookiebot|^cc-(banner|window)$|^cookies?$",
    re.IGNORECASE,
)

# Furniture that a class, id or aria-label names (site footers, menus, breadcrumbs, share bars, related links,
# newsletter and cookie boxes, sidebars, forum signatures and post toolbars, purchase boxes with their delivery
# lines, skip links, reference lists and wiki chrome): whole words of the name ("page-footer", "shareBar",
# "breadcrumbs", "post-actions"), so "navy", "canvas" or "shareholders" are not furniture. Only block elements
# are dropped (an inline link's class says little: Sphinx marks every link "reference"), and only those that
# hold neither the page's <main>/<article> nor most of its text (a "has-sidebar" wrapper is the page).
_FURNITURE_WORDS = frozenset(
    """footer footers printfooter nav navbar navbox navigation menu breadcrumb breadcrumbs crumbs sidebar
    sidebars share sharing sharebar social related newsletter subscribe subscription signup cookie cookies
    consent gdpr signature signatures actions toolbar buybox buy cart basket checkout delivery shipping
    catlinks editsection references reflist""".split()
)
_FURNITURE_BLOCKS = frozenset("""div section aside ul ol dl p table tr td th form center details figure""".split())
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# A link list: this many links or more, making up this share of the block's text or more.
_LINK_LIST_MIN = 3
_LINK_LIST_SHARE = 0.8
# "Skip to content", "Jump to navigation": links to a place on the page for keyboard and screen-reader users.
_SKIP_LINK = re.compile(r"^\s*(skip|jump)\s+to\b", re.IGNORECASE)
# The class names by which trafilatura takes the first matching element as the article (its BODY_XPATH): on a
# forum thread or a listing page several siblings carry one, and the first post alone would be read.
_POST_CLASS = re.compile(
    r"^(post|entry|message|reply)$|post[-_]?(text|body|content|entry)|postContent|"
    r"(entry|page|text|article|art|message|reply)[-_]content|article(-|__)?body|articleBody|body-text",
)

_BLOCK_TAGS = frozenset(
    """address article aside blockquote body caption center dd details dialog div dl dt fieldset figcaption
    figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu nav ol p section summary
    table tbody tfoot thead tr ul""".split()
)
_CELL_TAGS = frozenset({"td", "th"})
# Private-use characters mark <br> and table cells while whitespace is collapsed; page text has its own
# private-use characters (icon-font glyphs) removed first, so the markers cannot be forged.
_BR = "\ue000"
_CELL = "\ue001"
# C0 controls other than whitespace, DEL, and the private-use area (icon-font glyphs).
_STRIP_CHARS = dict.fromkeys([*range(0x00, 0x09), *range(0x0E, 0x20), 0x7F, *range(0xE000, 0xF900)])
_SPACES = re.compile(r"\s+")
_CELL_RUN = re.compile(rf"\s*(?:{_CELL}\s*)+")
_BLANK_LINES = re.compile(r"\n{3,}")

_MIN_MAIN_CHARS = 200


# Main-text extraction (trafilatura), measured on tests/corpus (bench part `extraction`, docs/performance.md):
# - precision (favor_precision): on the development pages it drops more boilerplate (related-article teasers,
#   newsletter and author boxes) for a small loss of recall, the better F1 of the two with precision over 0.88.
# - comments off: reader comments are not the page's statements; tables on: specification and data tables are
#   main text; no metadata (htmldate would read dates we never store).
# One Extractor (trafilatura's options object) serves every page: built per call, it read its configuration again
# each time (0.14 ms a page); trafilatura copies it before any change of its own, so sharing it is safe.
@functools.cache
def _extractor() -> Any:
    from trafilatura.settings import Extractor

    return Extractor(
        output_format="python",
        precision=True,
        recall=False,
        comments=False,
        tables=True,
        images=False,
        links=False,
        formatting=False,
        with_metadata=False,
        dedup=False,
    )


# trafilatura's cost grows with the element count (about 0.1 ms an element, 3 s at 30,000): past this many,
# a page (a hostile or generated one, rarely a real article) gets the cleaning rules' extraction alone.
_MAX_EXTRACTOR_ELEMENTS = 30_000
# The extractor "finds too little" under this many characters (trafilatura's own MIN_EXTRACTED_SIZE): on a page
# that short, or one it cannot read, the rules' extraction is kept when it has more.
_MIN_EXTRACTED_CHARS = 250


def decode_body(body: bytes, charset: str | None, *, is_html: bool) -> str:
    """Decode a body: BOM, then the HTTP charset, then the meta charset (HTML), then UTF-8, then detection.

    Undecodable bytes become U+FFFD rather than failing: a page with a few bad bytes is still worth reading.
    """
    bom_text, bom_encoding = EncodingDetector.strip_byte_order_mark(body)
    candidates = [bom_encoding, charset]
    if is_html:
        candidates.append(EncodingDetector.find_declared_encoding(body, is_html=True))
    for name in candidates:
        if name and _is_text_codec(name):
            return (bom_text if name == bom_encoding else body).decode(name, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    detected = UnicodeDammit(body, is_html=is_html).unicode_markup
    return detected if detected is not None else body.decode("utf-8", errors="replace")


def _is_text_codec(name: str) -> bool:
    try:
        info = codecs.lookup(name)
    except LookupError:
        return False
    # rot13, base64 and friends are registered codecs too, but not text encodings.
    return getattr(info, "_is_text_encoding", True)


def extract_text(body: str, content_type: str, url: str) -> tuple[str, str]:
    """(title, text) for any allowed content type: HTML is extracted, markdown and plain text pass through.

    Both storable: this is where a fetched page or an indexed document comes in.
    """
    if content_type in HTML_TYPES:
        title, text = extract_page(body, url)
        return storable(title), storable(text)
    text = _clean_plain(body)
    if content_type in MARKDOWN_TYPES:
        heading = re.search(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
        title = heading.group(1)[:300] if heading else _first_line(text)
    else:
        title = _first_line(text)
    return storable(title), storable(text)


def extract_page(html: str | bytes, url: str) -> tuple[str, str]:
    """(title, main text) of an HTML page: navigation, notices, share bars, related links, comments and footers
    left out by trafilatura; scripts, hidden elements and the furniture that class names or link density give
    away (_drop_furniture) removed before it; blocks kept, one blank line apart."""
    page = _cleaned(html)
    _drop_furniture(page.body)
    root = _main_root(page.document, page.body)
    fallback = _render(root)
    _unwrap_layout_tables(root)
    _ungroup_posts(root)
    # A <main> or <article> holding the bulk of the text is the author's own word for the main content; within
    # it trafilatura still drops share bars, related links and comments.
    # trafilatura's cost grows faster than the page's past a few hundred levels of nesting (1.7 s at 2,000 levels,
    # 0.1 s at 256): a page nested deeper than libxml2 builds by default is read by the rules alone.
    extracted = page.document if root is page.body else _document_of(root)
    text = "" if page.nested_deep else _extracted(extracted, url)
    if len(text) < _MIN_EXTRACTED_CHARS and len(fallback) > len(text):
        log.debug("extracted %s chars from %s (rules fallback)", len(fallback), url)
        return page.title, fallback
    log.debug("extracted %s chars from %s (trafilatura)", len(text), url)
    return page.title, text


def published_date(html: str | bytes, url: str) -> datetime.date | None:
    """The date an HTML page gives itself: its metadata (article:published_time and kin, JSON-LD, <time>), its
    address, else a date in its text, by htmldate (trafilatura's own date finder), newest first (a page updated
    after it was published speaks as of its update). htmldate's fast mode: no search of the whole page's free text,
    about 0.7 ms a page on tests/corpus. It gets the parsed tree, never a string, so it never fetches a URL itself.
    None where the page names no date, or htmldate fails on it."""
    from htmldate import find_date

    document, _ = _parse(html)
    try:
        found = find_date(document, url=url or None, extensive_search=False, outputformat="%Y-%m-%d")
    except Exception:  # noqa: BLE001 - a page htmldate cannot read has no date; it is still a page
        log.debug("htmldate failed on %s", url, exc_info=True)
        return None
    return datetime.date.fromisoformat(found) if found else None


def extract_page_soup(html: str | bytes, url: str) -> tuple[str, str]:
    """(title, text) by the cleaning rules alone: the fallback of extract_page, and the extractor before
    trafilatura (kept callable for bench/extraction.py's comparison)."""
    page = _cleaned(html)
    return page.title, _render(_main_root(page.document, page.body))


@dataclass
class _CleanedPage:
    document: HtmlElement
    body: HtmlElement  # the <body>, or the document when it has none
    title: str  # read before anything was dropped
    nested_deep: bool  # past libxml2's own nesting limit (_parse)
    held: list[HtmlElement]  # kept alive while the page is read (_hold)


def _cleaned(html: str | bytes) -> _CleanedPage:
    """The page parsed, its title read, then scripts, hidden elements and comments dropped (_drop_noise)."""
    document, nested_deep = _parse(html)
    held = _hold(document, nested_deep)
    title = _title(document)
    body = _body(document)
    _drop_noise(body)
    return _CleanedPage(document, body, title, nested_deep, held)


# --- the page's tree --------------------------------------------------------------------------------------
# One parse, by lxml (libxml2's HTML parser, the one trafilatura reads with too): the cleaning passes below work on
# that tree and trafilatura is handed the cleaned tree itself. BeautifulSoup built its own tree from the same
# parser's events (2 ms of a 3.6 KB page's 8 ms), and the cleaned page was then written out and parsed again
# for trafilatura.


class _Parsers(threading.local):
    """lxml parsers keep per-parse state (the error log read below): one of each per thread."""

    def __init__(self) -> None:
        self.direct = lxml.html.HTMLParser(encoding="utf-8")
        self.huge = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)


_parsers = _Parsers()
_LIMIT_ERROR = "ERR_RESOURCE_LIMIT"
# What lxml refuses to set as text or attribute (libxml2 keeps them in what it parses): controls other than
# whitespace go, as _STRIP_CHARS takes them from the text anyway; vertical tab and form feed become spaces.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_SETTABLE = {**dict.fromkeys([*range(0x00, 0x09), *range(0x0E, 0x20), 0xFFFE, 0xFFFF]), 0x0B: " ", 0x0C: " "}


def _parse(html: str | bytes) -> tuple[HtmlElement, bool]:
    """The page as an lxml tree (an empty <html> when it has no element at all), and whether it is nested past
    libxml2's limit of 256 levels (or holds a text node over 10 MB, its other limit).

    libxml2 drops what lies past its limits when it builds the tree itself, so such a page is built by lxml from
    the parser's events, which has no limit (a hostile page's 20,000 nested divs, at 4 times the cost of the
    direct parse). Text is given to the parser as UTF-8 with the encoding stated, so a page's own declaration
    (an XML prolog, a meta charset) cannot make it decode the text a second time; bytes are decoded as a fetched
    body is."""
    if isinstance(html, bytes):
        html = decode_body(html, None, is_html=True)
    try:
        data = html.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, which no encoding can carry (and no text keeps: storable)
        data = storable(html).encode("utf-8")
    parser = _parsers.direct
    document: HtmlElement | None
    try:
        document = etree.fromstring(data, parser)
        past_limit = any(error.type_name == _LIMIT_ERROR for error in parser.error_log)
    except etree.XMLSyntaxError:
        document, past_limit = None, False
    if past_limit:
        document = _parse_events(data)
        if document is None:  # libxml2 read a control character the event builder cannot set: up to 2,048 levels
            document = etree.fromstring(data, _parsers.huge)
    if document is None:
        return lxml.html.Element("html"), past_limit
    return document, past_limit


def _hold(document: HtmlElement, nested_deep: bool) -> list[HtmlElement]:
    """Every element's Python object, for a page nested past the limit, to keep while the page is read.

    lxml makes an element's Python object when a walk reaches it and frees it after, and freeing one walks up
    its ancestors: each walk of a page nested 20,000 deep took half a second (the square of the depth), and held,
    the objects are made once."""
    return list(document.iter()) if nested_deep else []


def _parse_events(data: bytes) -> HtmlElement | None:
    builder = etree.TreeBuilder(parser=lxml.html.HTMLParser())  # its element classes: HtmlElement and kin
    parser = etree.HTMLParser(target=builder, encoding="utf-8", huge_tree=True)
    try:
        parser.feed(data)
        return cast(HtmlElement, parser.close())
    except (etree.XMLSyntaxError, ValueError):
        return None


def _body(document: HtmlElement) -> HtmlElement:
    return next(document.iter("body"), document)


def _is_tag(node: Any) -> bool:
    """An element, not a comment or processing instruction (whose `tag` is a function, and whose `text` is not the
    page's text; their `tail` is)."""
    return isinstance(node.tag, str)


# Code, not text: what these hold never counts as the page's text (they are removed before any count; a title or
# heading read before that skips it).
_CODE_TAGS = frozenset({"script", "style", "template"})


def _strings(root: HtmlElement) -> Iterator[str]:
    """The text of `root`'s subtree in document order (not its own tail), without comments' and processing
    instructions' own text, nor a script's or a style's. Iterative: hostile pages nest thousands deep."""
    stack: list[HtmlElement | str] = [root]
    while stack:
        entry = stack.pop()
        if isinstance(entry, str):
            yield entry
            continue
        if entry is not root and entry.tail:
            stack.append(entry.tail)  # after the subtree: lxml keeps the text that follows an element on it
        if _is_tag(entry) and entry.tag not in _CODE_TAGS:
            stack.extend(reversed(entry))
            if entry.text:
                stack.append(entry.text)


def _get_text(root: HtmlElement) -> str:
    return "".join(_strings(root))


def _text_len(root: HtmlElement) -> int:
    """Characters of `root`'s text, each string stripped (what _strings gives, in any order: one walk in C)."""
    total = 0
    for node in root.iter():
        if node.text and _is_tag(node) and node.tag not in _CODE_TAGS:
            total += len(node.text.strip())
        if node.tail and node is not root:
            total += len(node.tail.strip())
    return total


def _drop(element: HtmlElement) -> None:
    """Remove an element and its subtree; the text after it stays (lxml keeps that text on the element)."""
    parent = element.getparent()
    if parent is None:
        return
    if element.tail:
        previous = element.getprevious()
        before = parent.text if previous is None else previous.tail
        joined = (before or "") + element.tail
        if _CONTROL.search(joined):
            joined = joined.translate(_SETTABLE)
        if previous is None:
            parent.text = joined
        else:
            previous.tail = joined
    parent.remove(element)


def _classes(element: HtmlElement) -> list[str]:
    return (element.get("class") or "").split()


def _attached(element: HtmlElement, root: HtmlElement) -> bool:
    """Whether `element` is still in `root`'s tree (no ancestor of it removed)."""
    node: HtmlElement | None = element
    while node is not None and node is not root:
        node = node.getparent()
    return node is root


_LAYOUT_CONTENT = frozenset(
    ["div", "p", "table", "pre", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "article", "section"]
)


def _has_descendant(element: HtmlElement, names: frozenset[str]) -> bool:
    return any(node.tag in names for node in element.iterdescendants())


def _nearest(element: HtmlElement, name: str) -> HtmlElement | None:
    """The nearest ancestor of `element` named `name`."""
    return next(element.iterancestors(name), None)


def _unwrap_layout_tables(body: HtmlElement) -> None:
    """Turn tables used for page layout (cells holding paragraphs, lists or other tables) into divs.

    trafilatura keeps a table whole (include_tables), so an old table layout's menu, sidebar and footer cells
    would come out with the article; as divs, each is judged on its own. Data tables hold text, not blocks.
    A table that frames the page (over half its text) loses its footer band (_drop_footer_band), and the
    column holding over half the page's text becomes an <article> when the page has none: it is the table
    layout's spelling of one, and trafilatura reads a block it cannot place (no <article>, no class it knows)
    paragraph by paragraph only, dropping its lists.
    """
    body_len = _text_len(body)
    column_marked = next(body.iterdescendants("article"), None) is not None
    for table in reversed(list(body.iterdescendants("table"))):  # innermost first
        if not _attached(table, body):
            continue
        cells = list(table.iterdescendants("td", "th"))
        if not any(_has_descendant(cell, _LAYOUT_CONTENT) for cell in cells):
            continue
        frames_page = body_len and _text_len(table) > body_len / 2
        if frames_page:
            _drop_footer_band(table)
        # The table's own parts, found before it is renamed (a renamed table is no longer their parent table).
        parts = [
            node
            for node in table.iterdescendants("thead", "tbody", "tfoot", "tr", "td", "th")
            if _nearest(node, "table") is table
        ]
        column = None
        if frames_page and not column_marked:
            widest = max((node for node in parts if node.tag in _CELL_TAGS), key=_text_len, default=None)
            if widest is not None and _text_len(widest) > body_len / 2:
                column = widest
        for node in [table, *parts]:
            node.tag = "article" if node is column else "div"
            for name in [name for name in node.attrib if name not in ("class", "id")]:
                del node.attrib[name]
        column_marked = column_marked or column is not None


def _drop_footer_band(table: HtmlElement) -> None:
    """Drop the last row of a page laid out in a table when it is the footer band: one cell across the columns
    below a row of side-by-side cells, no heading, little of the table's text (a <footer> of table layouts)."""
    rows = [row for row in table.iterdescendants("tr") if _nearest(row, "table") is table]
    if len(rows) < 2:
        return
    row_cells = [[cell for cell in row.iterdescendants("td", "th") if _nearest(cell, "tr") is row] for row in rows]
    if len(row_cells[-1]) != 1 or not any(len(cells) > 1 for cells in row_cells[:-1]):
        return
    last = rows[-1]
    if next(last.iterdescendants("h1", "h2", "h3", "h4", "h5", "h6", "main", "article"), None) is not None:
        return
    if _text_len(last) < 0.25 * _text_len(table):
        _drop(last)


def load_extractor() -> None:
    """Import trafilatura now (0.15 s of CPU, imported lazily so web processes that never extract skip it): a
    worker calls this at start, so its first page is not the one that pays."""
    import trafilatura  # noqa: F401


def _document_of(root: HtmlElement) -> HtmlElement:
    """A document of its own around `root` (moved there, without the text after it), for trafilatura, which
    reads a whole page."""
    document = lxml.html.Element("html")
    body = etree.SubElement(document, "body")
    root.tail = None
    body.append(root)
    return document


def _extracted(document: HtmlElement, url: str) -> str:
    """trafilatura's main text of the cleaned page, rendered like _render; "" when it finds none or cannot run.

    It reads the page after _drop_noise (so hidden text, scripts and styles never reach it), as a tree: it is
    never given a URL to fetch, and nothing here downloads anything.
    """
    import trafilatura

    if sum(1 for _ in document.iter()) > _MAX_EXTRACTOR_ELEMENTS:
        return ""
    try:
        result = trafilatura.bare_extraction(document, url=None, options=_extractor())
    # Deeply nested or malformed pages make lxml or trafilatura give up in many ways; the fallback reads them.
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, RecursionError, etree.LxmlError) as exc:
        log.debug("trafilatura failed on %s: %r", url, exc)
        return ""
    body = getattr(result, "body", None)
    return "" if body is None else _render_extracted(body)


_EXTRACTED_BLOCKS = frozenset({"p", "head", "list", "item", "table", "row", "quote", "code", "div", "body", "section"})


def _block_lines(raw: str) -> list[str]:
    """A block's text as lines: spaces collapsed, table cells " | " apart without a cell mark at either end."""
    lines = []
    # (str.split() splits on exactly the characters \s matches; the ends it drops are stripped below anyway.)
    for line in " ".join(raw.split()).split(_BR):
        # (Only a table row holds a cell mark; the expression tried every position of every other line.)
        line = (_CELL_RUN.sub(" | ", line) if _CELL in line else line).strip()
        if line.startswith("| "):
            line = line[2:]
        if line.endswith(" |"):
            line = line[:-2]
        if line.strip():
            lines.append(line.strip())
    return lines


def _render_extracted(root: etree._Element) -> str:
    """Text of trafilatura's XML body: blocks one blank line apart, list items "- " on consecutive lines, table
    rows one a line with " | " between cells, code as laid out. Iterative, like _render."""
    blocks: list[tuple[str, bool]] = []
    parts: list[str] = []
    open_blocks: list[str] = []

    def flush() -> None:
        lines = _block_lines("".join(parts))
        parts.clear()
        if not lines:
            return
        kind = open_blocks[-1] if open_blocks else ""
        text = "\n".join(lines)
        blocks.append((f"- {text}" if kind == "item" else text, kind in ("item", "row")))

    def text_of(value: str | None) -> str:
        return (value or "").translate(_STRIP_CHARS)

    stack: list[tuple[etree._Element, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        if closing:
            if node.tag in _EXTRACTED_BLOCKS:
                flush()
                open_blocks.pop()
            parts.append(text_of(node.tail))
            continue
        if not isinstance(node.tag, str):  # comments, processing instructions
            parts.append(text_of(node.tail))
            continue
        if node.tag == "lb":
            parts.append(_BR)
            parts.append(text_of(node.tail))
            continue
        if node.tag == "code" and "\n" in "".join(node.itertext()):
            flush()
            code = "\n".join(line.rstrip() for line in text_of("".join(node.itertext())).splitlines())
            if code.strip():
                blocks.append((code.strip("\n"), False))
            parts.append(text_of(node.tail))
            continue
        if node.tag == "cell":
            parts.append(_CELL)
        if node.tag in _EXTRACTED_BLOCKS:
            flush()
            open_blocks.append(node.tag)
        parts.append(text_of(node.text))
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node))
    flush()

    out: list[str] = []
    previous_line = False
    for text, is_line in blocks:
        if out:
            out.append("\n" if is_line and previous_line else "\n\n")
        out.append(text)
        previous_line = is_line
    return "".join(out)


def _title(document: HtmlElement) -> str:
    head = next(document.iter("head"), None)
    tag = next(head.iter("title"), None) if head is not None else None
    if tag is None:
        tag = next(document.iter("title"), None)
    if tag is not None:
        title = _collapse(_get_text(tag))
        if title:
            return title[:300]
    meta = next((node for node in document.iter("meta") if node.get("property") == "og:title"), None)
    if meta is not None and meta.get("content") is not None:
        title = _collapse(str(meta.get("content")))
        if title:
            return title[:300]
    h1 = next(document.iter("h1"), None)
    return _collapse(_get_text(h1))[:300] if h1 is not None else ""


def _collapse(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_STRIP_CHARS)).strip()


def _drop_noise(body: HtmlElement) -> None:
    """Remove boilerplate, invisible elements and comments in place.

    One walk over the elements in document order that does not enter an element it removes."""
    # Softer signals: a form, a hidden wrapper or a "cookie" class that holds most of the page is a layout
    # wrapper (ASP.NET pages sit in one <form>, some sites hide the body until scripts run), so keep those.
    soft = []
    _normalise_classes(body)
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if not _is_tag(node):  # comments and processing instructions, with the text after them kept
            _drop(node)
            continue
        role = node.get("role")
        if node.tag in _DROP_TAG_SET or (role is not None and role.strip().lower() in _DROP_ROLES):
            _drop(node)
            continue
        _normalise_classes(node)
        if node.tag == "form" or _is_hidden(node) or _is_cookie_banner(node):
            soft.append(node)
        stack.extend(reversed(node))
    if not soft:
        return
    page_len = _text_len(body)
    gone: set[HtmlElement] = set()  # what the soft elements removed took with them (soft ones nest)
    for node in soft:
        if node in gone:
            continue
        if page_len and _text_len(node) > page_len / 2:
            continue
        gone.update(node.iterdescendants())
        _drop(node)


def _normalise_classes(node: HtmlElement) -> None:
    """Class names one space apart: trafilatura matches the start of a class attribute ("nav..." is navigation),
    which leading or doubled spaces would hide."""
    classes = node.get("class")
    if classes is not None:
        single = " ".join(classes.split())
        if single != classes:
            node.set("class", single.translate(_SETTABLE))


def _drop_furniture(body: HtmlElement) -> None:
    """Remove the blocks that a class, id or aria-label names as furniture (_FURNITURE_WORDS), skip links, and
    link lists (_LINK_LIST_MIN links or more and little other text: menus, related and most-read boxes, the div
    spelling of <nav>), unless the block holds the page's main content (its <main>, <article> or <h1>, or over
    half of its text). Linear in the page's size: hostile pages nest thousands of elements deep."""
    for link in [link for link in body.iter("a") if link.get("href") is not None]:
        if str(link.get("href")).startswith("#") and _SKIP_LINK.match(_get_text(link)):
            _drop(link)
    page_len = 0

    def is_named(tag: HtmlElement, info: _Stats) -> bool:
        return _names_furniture(tag)

    def is_link_list(tag: HtmlElement, info: _Stats) -> bool:
        return info.links >= _LINK_LIST_MIN and info.link_text >= _LINK_LIST_SHARE * info.text

    # Named blocks first, so that a box's links no longer count towards its parent's link density.
    for rule in (is_named, is_link_list):
        elements = _block_stats(body)
        page_len = page_len or elements[0][1].text
        doomed, skip_to = [], -1
        for index, (tag, info) in enumerate(elements):
            if index <= skip_to or tag.tag not in _FURNITURE_BLOCKS or info.holds_main:
                continue
            if (page_len and info.text > page_len / 2) or not rule(tag, info):
                continue
            doomed.append(tag)
            skip_to = info.end  # its descendants go with it
        for tag in doomed:
            _drop(tag)


@dataclass
class _Stats:
    end: int = 0  # index of its last descendant in document order
    text: int = 0  # characters of text, as _text_len counts them
    link_text: int = 0  # of which inside <a href>
    links: int = 0
    holds_main: bool = False  # a <main>, <article>, <h1> or [role=main] in it (or it)


def _block_stats(body: HtmlElement) -> list[tuple[HtmlElement, _Stats]]:
    """`body` and every element in it in document order, with its _Stats, each computed from its children's in
    one pass (no per-element search of the subtree)."""
    tags = [node for node in body.iter() if _is_tag(node)]
    stats: dict[HtmlElement, _Stats] = {}  # lxml gives one Python object per element while one is referenced
    for index in range(len(tags) - 1, -1, -1):  # children before their parents
        tag = tags[index]
        info = _Stats(end=index)
        if tag.text:
            info.text += len(tag.text.strip())
        for child in tag:
            if _is_tag(child):
                below = stats[child]
                info.end = max(info.end, below.end)
                info.text += below.text
                info.link_text += below.link_text
                info.links += below.links
                info.holds_main = info.holds_main or below.holds_main
            if child.tail:
                info.text += len(child.tail.strip())
        if tag.tag == "a" and tag.get("href") is not None:
            info.link_text, info.links = info.text, info.links + 1
        if tag.tag in ("main", "article", "h1") or (tag.get("role") or "").strip().lower() == "main":
            info.holds_main = True
        stats[tag] = info
    return [(tag, stats[tag]) for tag in tags]


def _names_furniture(tag: HtmlElement) -> bool:
    names = [tag.get("id") or "", tag.get("aria-label") or "", *_classes(tag)]
    return any(word.lower() in _FURNITURE_WORDS for name in names if name for word in _NAME_WORDS.findall(name))


def _ungroup_posts(root: HtmlElement) -> None:
    """Take the article class names (_POST_CLASS) off elements that repeat them, the posts of a thread or the
    entries of a listing, so that trafilatura judges them together instead of reading the first one alone."""
    groups: dict[str, list[HtmlElement]] = {}
    for tag in root.iterdescendants():
        if not _is_tag(tag) or tag.get("class") is None:
            continue
        classes = " ".join(_classes(tag))
        if any(_POST_CLASS.search(name) for name in classes.split()):
            groups.setdefault(classes, []).append(tag)
    for tags in groups.values():
        if len(tags) > 1:
            for tag in tags:
                kept = " ".join(name for name in _classes(tag) if not _POST_CLASS.search(name))
                tag.set("class", kept.translate(_SETTABLE))


def _is_hidden(tag: HtmlElement) -> bool:
    hidden = tag.get("hidden")
    if hidden is not None and hidden.strip().lower() != "until-found":  # until-found is findable text
        return True
    if (tag.get("aria-hidden") or "").strip().lower() == "true":
        return True
    return bool(_HIDDEN_STYLE.search(tag.get("style") or ""))


def _is_cookie_banner(tag: HtmlElement) -> bool:
    names = [tag.get("id") or "", *_classes(tag)]
    return any(name and _COOKIE_MARK.search(name) for name in names)


def _main_root(document: HtmlElement, body: HtmlElement) -> HtmlElement:
    """The <main>, [role=main] or <article> that holds the bulk of the text, else the body."""
    body_len = _text_len(body)
    found: dict[str, list[HtmlElement]] = {"main": [], "role": [], "article": []}
    for tag in document.iterdescendants():
        if tag.tag in ("main", "article"):
            found[tag.tag].append(tag)
        if _is_tag(tag) and tag.get("role") == "main":
            found["role"].append(tag)
    for kind, share in (("main", 0.3), ("role", 0.3), ("article", 0.5)):
        candidates = found[kind]
        if not candidates:
            continue
        best = max(candidates, key=_text_len)
        length = _text_len(best)
        if length >= _MIN_MAIN_CHARS and length >= share * body_len:
            return best
    return body


def _render(root: HtmlElement) -> str:
    """Text of `root` with one blank line between blocks and list items on consecutive lines.

    Iterative on purpose: hostile pages nest thousands of elements deep.
    """
    blocks: list[tuple[str, bool]] = []  # (text, is_list_item)
    parts: list[str] = []
    open_blocks: list[str] = []

    def flush() -> None:
        lines = _block_lines("".join(parts))
        parts.clear()
        if not lines:
            return
        kind = open_blocks[-1] if open_blocks else ""
        text = "\n".join(lines)
        blocks.append((f"- {text}" if kind == "li" else text, kind == "li"))

    # Entries: an element to open, the name of a block to close, or a text (an element's tail, after its subtree).
    stack: list[HtmlElement | _Close | str] = [root]
    while stack:
        entry = stack.pop()
        if isinstance(entry, str):
            parts.append(entry.translate(_STRIP_CHARS))
            continue
        if isinstance(entry, _Close):
            flush()
            open_blocks.pop()
            continue
        node = entry
        if node is not root and node.tail:
            stack.append(node.tail)
        if not _is_tag(node):  # comments, processing instructions
            continue
        name = node.tag
        if name == "br":
            parts.append(_BR)
        elif name == "pre":
            flush()
            pre = "\n".join(line.rstrip() for line in _get_text(node).translate(_STRIP_CHARS).splitlines())
            if pre.strip():
                blocks.append((pre.strip("\n"), False))
        else:
            if name in _CELL_TAGS:
                parts.append(_CELL)
            if name in _BLOCK_TAGS:
                flush()
                open_blocks.append(name)
                stack.append(_CLOSE)
            stack.extend(reversed(node))
            if node.text:
                stack.append(node.text)
    flush()

    out: list[str] = []
    previous_item = False
    for text, is_item in blocks:
        if out:
            out.append("\n" if is_item and previous_item else "\n\n")
        out.append(text)
        previous_item = is_item
    return "".join(out)


class _Close:
    """The end of a block element in _render's walk."""


_CLOSE = _Close()


def _clean_plain(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    cleaned = "\n".join(line.translate(_STRIP_CHARS) for line in lines)
    return _BLANK_LINES.sub("\n\n", cleaned).strip()


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip():
            return _collapse(line)[:300]
    return ""


# --- PDF ------------------------------------------------------------------------------------------------------


class PdfError(Exception):
    """A PDF whose text cannot be read: `reason` is "decode" (corrupt, encrypted), "too_large" or "too_many_pages",
    the scraper's failure reasons."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason, message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return self.message


# pypdf's own limits are per stream (75 MB each by default); a page's /Contents may be an array of thousands of
# small streams that each inflate to the limit, and decoded streams stay cached in the reader. So a PDF read with
# limits also gets a budget for all the bytes its streams inflate to, counted as pypdf decodes them.
_PDF_STREAM_LIMITS = (
    "maximum_declared_stream_length",
    "array_based_stream_maximum_output_length",
    "zlib_maximum_output_length",
    "lzw_maximum_output_length",
    "run_length_maximum_output_length",
    "brotli_maximum_output_length",
    "stream_decoding_work_maximum_length",
)
_decode_budget: ContextVar[list[int] | None] = ContextVar("pdf_decode_budget", default=None)


def _count_decoded_bytes() -> None:
    """Wrap pypdf's stream decoder (once) so that decoding under a budget spends it."""
    import pypdf.filters
    from pypdf.errors import LimitReachedError
    from pypdf.generic import StreamObject

    decode = pypdf.filters.decode_stream_data
    if getattr(decode, "counts_budget", False):
        return

    def counted(stream: StreamObject) -> bytes:
        data = decode(stream)
        budget = _decode_budget.get()
        if budget is not None:
            budget[0] -= len(data)
            if budget[0] < 0:
                raise LimitReachedError("the PDF's streams inflate beyond the decoding budget")
        return data

    counted.counts_budget = True  # type: ignore[attr-defined]
    pypdf.filters.decode_stream_data = counted


def pdf_text(data: bytes, *, max_pages: int | None = None, max_bytes: int | None = None) -> tuple[str, str]:
    """(title, text) of a PDF through pypdf: the metadata title (or the first line), each page's text a block.

    With limits (a PDF off the web is untrusted): more than `max_pages` pages is refused before any page is read;
    the streams may inflate to 4 × `max_bytes` in all, and the text may be `max_bytes` characters long.
    """
    from pypdf import PdfReader, apply_configuration
    from pypdf.errors import LimitReachedError, PyPdfError

    budget = None if max_bytes is None else 4 * max_bytes
    limits: dict[str, Any] = {} if budget is None else dict.fromkeys(_PDF_STREAM_LIMITS, budget)
    if budget is not None:
        _count_decoded_bytes()
    token = _decode_budget.set(None if budget is None else [budget])
    try:
        with apply_configuration(**limits):
            reader = PdfReader(io.BytesIO(data))
            count = len(reader.pages)
            if max_pages is not None and count > max_pages:
                raise PdfError("too_many_pages", f"the PDF has {count} pages, over the limit of {max_pages}")
            pages, size = [], 0
            for page in reader.pages:
                text = (page.extract_text() or "").strip()
                size += len(text)
                if max_bytes is not None and size > max_bytes:
                    raise PdfError("too_large", f"the PDF's text is over the {max_bytes} character limit")
                pages.append(text)
            metadata_title = (reader.metadata.title if reader.metadata else None) or ""
    except PdfError:
        raise
    except LimitReachedError as exc:
        raise PdfError("too_large", f"the PDF is over a size limit: {exc}") from exc
    # pypdf raises many kinds of errors on malformed files; none of them is ours.
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError, RecursionError) as exc:
        raise PdfError("decode", f"unreadable PDF: {exc}") from exc
    finally:
        _decode_budget.reset(token)
    # Pages are separate blocks; within a page, extract_text keeps the lines as laid out.
    first_line, text = extract_text("\n\n".join(page for page in pages if page), "text/plain", "")
    return str(metadata_title).strip() or first_line, text
