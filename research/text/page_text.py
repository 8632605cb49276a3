"""Turn a fetched page into (title, main text): HTML through trafilatura (with BeautifulSoup for the title, the
safety clean-up before it and the fallback after it), plain text and markdown as is, PDFs through pypdf (with
limits for PDFs off the web).

The text is data for an LLM and for verbatim-quote checks, never markup: entities are unescaped once by the
parser, so `&lt;script&gt;` in a page becomes the literal text `<script>`, and nothing here renders HTML.
"""

from __future__ import annotations

import codecs
import functools
import io
import logging
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import lxml.html
from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.dammit import EncodingDetector, UnicodeDammit
from bs4.element import AttributeValueList, PreformattedString
from lxml import etree

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
# a page (a hostile or generated one, rarely a real article) gets the BeautifulSoup extraction alone.
_MAX_EXTRACTOR_ELEMENTS = 30_000
# The extractor "finds too little" under this many characters (trafilatura's own MIN_EXTRACTED_SIZE): on a page
# that short, or one it cannot read, the BeautifulSoup extraction is kept when it has more.
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
    soup = BeautifulSoup(html, "lxml")
    title = _title(soup)
    body = soup.body or soup
    _drop_noise(body)
    _drop_furniture(body)
    root = _main_root(soup, body)
    fallback = _render(root)
    _unwrap_layout_tables(root)
    _ungroup_posts(root)
    # A <main> or <article> holding the bulk of the text is the author's own word for the main content; within
    # it trafilatura still drops share bars, related links and comments.
    text = _extracted(soup if root is body else root, url)
    if len(text) < _MIN_EXTRACTED_CHARS and len(fallback) > len(text):
        log.debug("extracted %s chars from %s (BeautifulSoup fallback)", len(fallback), url)
        return title, fallback
    log.debug("extracted %s chars from %s (trafilatura)", len(text), url)
    return title, text


def extract_page_soup(html: str | bytes, url: str) -> tuple[str, str]:
    """(title, text) by BeautifulSoup alone: the fallback of extract_page, and the extractor before trafilatura
    (kept callable for bench/extraction.py's comparison)."""
    soup = BeautifulSoup(html, "lxml")
    title = _title(soup)
    body = soup.body or soup
    _drop_noise(body)
    return title, _render(_main_root(soup, body))


_LAYOUT_CONTENT = ["div", "p", "table", "pre", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "article", "section"]


def _unwrap_layout_tables(body: Tag) -> None:
    """Turn tables used for page layout (cells holding paragraphs, lists or other tables) into divs.

    trafilatura keeps a table whole (include_tables), so an old table layout's menu, sidebar and footer cells
    would come out with the article; as divs, each is judged on its own. Data tables hold text, not blocks.
    A table that frames the page (over half its text) loses its footer band (_drop_footer_band), and the
    column holding over half the page's text becomes an <article> when the page has none: it is the table
    layout's spelling of one, and trafilatura reads a block it cannot place (no <article>, no class it knows)
    paragraph by paragraph only, dropping its lists.
    """
    body_len = _text_len(body)
    column_marked = body.find("article") is not None
    for table in reversed(body.find_all("table")):  # innermost first
        if _destroyed(table):
            continue
        cells = table.find_all(["td", "th"])
        if not any(cell.find(_LAYOUT_CONTENT) for cell in cells):
            continue
        frames_page = body_len and _text_len(table) > body_len / 2
        if frames_page:
            _drop_footer_band(table)
        # The table's own parts, found before it is renamed (a renamed table is no longer their parent table).
        parts: list[Tag] = table.find_all(["thead", "tbody", "tfoot", "tr", "td", "th"])
        parts = [tag for tag in parts if tag.find_parent("table") is table]
        column = None
        if frames_page and not column_marked:
            widest = max((tag for tag in parts if tag.name in _CELL_TAGS), key=_text_len, default=None)
            if widest is not None and _text_len(widest) > body_len / 2:
                column = widest
        for tag in [table, *parts]:
            tag.name = "article" if tag is column else "div"
            tag.attrs = {key: value for key, value in tag.attrs.items() if key in ("class", "id")}
        column_marked = column_marked or column is not None


def _drop_footer_band(table: Tag) -> None:
    """Drop the last row of a page laid out in a table when it is the footer band: one cell across the columns
    below a row of side-by-side cells, no heading, little of the table's text (a <footer> of table layouts)."""
    rows = [row for row in table.find_all("tr") if row.find_parent("table") is table]
    if len(rows) < 2:
        return
    row_cells = [[cell for cell in row.find_all(["td", "th"]) if cell.find_parent("tr") is row] for row in rows]
    if len(row_cells[-1]) != 1 or not any(len(cells) > 1 for cells in row_cells[:-1]):
        return
    last = rows[-1]
    if last.find(["h1", "h2", "h3", "h4", "h5", "h6", "main", "article"]):
        return
    if _text_len(last) < 0.25 * _text_len(table):
        last.decompose()


def load_extractor() -> None:
    """Import trafilatura now (0.15 s of CPU, imported lazily so web processes that never extract skip it): a
    worker calls this at start, so its first page is not the one that pays."""
    import trafilatura  # noqa: F401


def _extracted(soup: BeautifulSoup | Tag, url: str) -> str:
    """trafilatura's main text of the cleaned page, rendered like _render; "" when it finds none or cannot run.

    It reads the page after _drop_noise (so hidden text, scripts and styles never reach it) and from a string
    only: it is never given a URL to fetch, and nothing here downloads anything.
    """
    import trafilatura

    if len(soup.find_all(True)) > _MAX_EXTRACTOR_ELEMENTS:
        return ""
    try:
        markup = str(soup) if isinstance(soup, BeautifulSoup) else f"<html><body>{soup}</body></html>"
        tree = lxml.html.document_fromstring(markup)
        document = trafilatura.bare_extraction(tree, url=None, options=_extractor())
    # Deeply nested or malformed pages make lxml or trafilatura give up in many ways; the fallback reads them.
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, RecursionError, etree.LxmlError) as exc:
        log.debug("trafilatura failed on %s: %r", url, exc)
        return ""
    body = getattr(document, "body", None)
    return "" if body is None else _render_extracted(body)


_EXTRACTED_BLOCKS = frozenset({"p", "head", "list", "item", "table", "row", "quote", "code", "div", "body", "section"})


def _block_lines(raw: str) -> list[str]:
    """A block's text as lines: spaces collapsed, table cells " | " apart without a cell mark at either end."""
    lines = []
    for line in _SPACES.sub(" ", raw).split(_BR):
        line = _CELL_RUN.sub(" | ", line).strip()
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


def _title(soup: BeautifulSoup) -> str:
    head = soup.head or soup
    tag = head.find("title") or soup.find("title")
    if isinstance(tag, Tag):
        title = _collapse(tag.get_text())
        if title:
            return title[:300]
    meta = soup.find("meta", attrs={"property": "og:title"})
    if isinstance(meta, Tag) and isinstance(meta.get("content"), str):
        title = _collapse(str(meta["content"]))
        if title:
            return title[:300]
    h1 = soup.find("h1")
    return _collapse(h1.get_text())[:300] if isinstance(h1, Tag) else ""


def _collapse(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_STRIP_CHARS)).strip()


def _text_len(tag: Tag) -> int:
    # A walk of the descendants: find_all(string=True) matched a filter against each.
    return sum(
        len(node.strip())
        for node in tag.descendants
        if isinstance(node, NavigableString) and not isinstance(node, PreformattedString)
    )


def _destroyed(tag: Tag) -> bool:
    """Whether `tag` was decomposed, itself or with an ancestor. bs4's `decomposed` property reads an attribute that
    only a decomposed element has: on a live tag the read falls through to `Tag.__getattr__`, which searches the
    tag's whole subtree for a child element of that name, so checking every tag of a page was quadratic in its
    nesting."""
    return bool(vars(tag).get("_decomposed", False))


def _drop_noise(body: Tag) -> None:
    """Remove boilerplate and invisible elements in place.

    One walk over the elements in document order: an element's ancestors come before it, so one that goes takes
    its descendants with it before they are reached (bs4's own searches, one per kind, cost three walks with a
    filter matched per element)."""
    # Softer signals: a form, a hidden wrapper or a "cookie" class that holds most of the page is a layout
    # wrapper (ASP.NET pages sit in one <form>, some sites hide the body until scripts run), so keep those.
    soft = []
    for tag in body.find_all(True):
        if _destroyed(tag):
            continue
        role = tag.get("role")
        if tag.name in _DROP_TAG_SET or (role is not None and str(role).strip().lower() in _DROP_ROLES):
            tag.decompose()
        elif tag.name == "form" or _is_hidden(tag) or _is_cookie_banner(tag):
            soft.append(tag)
    if not soft:
        return
    page_len = _text_len(body)
    for tag in soft:
        if _destroyed(tag):
            continue
        if page_len and _text_len(tag) > page_len / 2:
            continue
        tag.decompose()


def _drop_furniture(body: Tag) -> None:
    """Remove the blocks that a class, id or aria-label names as furniture (_FURNITURE_WORDS), skip links, and
    link lists (_LINK_LIST_MIN links or more and little other text: menus, related and most-read boxes, the div
    spelling of <nav>), unless the block holds the page's main content (its <main>, <article> or <h1>, or over
    half of its text). Linear in the page's size: hostile pages nest thousands of elements deep."""
    for link in body.find_all("a", href=True):
        if str(link["href"]).startswith("#") and _SKIP_LINK.match(link.get_text()):
            link.decompose()
    page_len = 0

    def is_named(tag: Tag, info: _Stats) -> bool:
        return _names_furniture(tag)

    def is_link_list(tag: Tag, info: _Stats) -> bool:
        return info.links >= _LINK_LIST_MIN and info.link_text >= _LINK_LIST_SHARE * info.text

    # Named blocks first, so that a box's links no longer count towards its parent's link density.
    for rule in (is_named, is_link_list):
        elements = _block_stats(body)
        page_len = page_len or elements[0][1].text
        doomed, skip_to = [], -1
        for index, (tag, info) in enumerate(elements):
            if index <= skip_to or tag.name not in _FURNITURE_BLOCKS or info.holds_main:
                continue
            if (page_len and info.text > page_len / 2) or not rule(tag, info):
                continue
            doomed.append(tag)
            skip_to = info.end  # its descendants go with it
        for tag in doomed:
            tag.decompose()


@dataclass
class _Stats:
    end: int = 0  # index of its last descendant in document order
    text: int = 0  # characters of text, as _text_len counts them
    link_text: int = 0  # of which inside <a href>
    links: int = 0
    holds_main: bool = False  # a <main>, <article>, <h1> or [role=main] in it (or it)


def _block_stats(body: Tag) -> list[tuple[Tag, _Stats]]:
    """`body` and every element in it in document order, with its _Stats, each computed from its children's in
    one pass (no per-element search of the subtree)."""
    tags = [body, *body.find_all(True)]
    stats: dict[int, _Stats] = {}
    for index in range(len(tags) - 1, -1, -1):  # children before their parents
        tag = tags[index]
        info = _Stats(end=index)
        for child in tag.children:
            if isinstance(child, Tag):
                below = stats[id(child)]
                info.end = max(info.end, below.end)
                info.text += below.text
                info.link_text += below.link_text
                info.links += below.links
                info.holds_main = info.holds_main or below.holds_main
            elif isinstance(child, NavigableString) and not isinstance(child, PreformattedString):
                info.text += len(child.strip())
        if tag.name == "a" and tag.get("href") is not None:
            info.link_text, info.links = info.text, info.links + 1
        if tag.name in ("main", "article", "h1") or str(tag.get("role", "")).strip().lower() == "main":
            info.holds_main = True
        stats[id(tag)] = info
    return [(tag, stats[id(tag)]) for tag in tags]


def _names_furniture(tag: Tag) -> bool:
    names = [str(tag.get("id", "")), str(tag.get("aria-label", "")), *map(str, tag.get_attribute_list("class"))]
    return any(word.lower() in _FURNITURE_WORDS for name in names if name for word in _NAME_WORDS.findall(name))


def _ungroup_posts(root: Tag) -> None:
    """Take the article class names (_POST_CLASS) off elements that repeat them, the posts of a thread or the
    entries of a listing, so that trafilatura judges them together instead of reading the first one alone."""
    groups: dict[str, list[Tag]] = {}
    for tag in root.find_all(class_=True):
        classes = " ".join(map(str, tag.get_attribute_list("class")))
        if any(_POST_CLASS.search(name) for name in classes.split()):
            groups.setdefault(classes, []).append(tag)
    for tags in groups.values():
        if len(tags) > 1:
            for tag in tags:
                kept = [name for name in tag.get_attribute_list("class") if not _POST_CLASS.search(name)]
                tag["class"] = AttributeValueList(kept)


def _is_hidden(tag: Tag) -> bool:
    hidden = tag.get("hidden")
    if hidden is not None and str(hidden).strip().lower() != "until-found":  # until-found is findable text
        return True
    if str(tag.get("aria-hidden", "")).strip().lower() == "true":
        return True
    return bool(_HIDDEN_STYLE.search(str(tag.get("style", ""))))


def _is_cookie_banner(tag: Tag) -> bool:
    names = [str(tag.get("id", "")), *(str(name) for name in tag.get_attribute_list("class") if name)]
    return any(name and _COOKIE_MARK.search(name) for name in names)


def _main_root(soup: BeautifulSoup, body: Tag) -> Tag:
    """The <main>, [role=main] or <article> that holds the bulk of the text, else the body."""
    body_len = _text_len(body)
    # One walk for the three kinds, in document order as a CSS select gives them: select compiled and matched a
    # selector for each.
    found: dict[str, list[Tag]] = {"main": [], "role": [], "article": []}
    for tag in soup.find_all(True):
        if tag.name in ("main", "article"):
            found[tag.name].append(tag)
        if tag.get("role") == "main":
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


def _render(root: Tag) -> str:
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

    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        if closing:
            flush()
            open_blocks.pop()
        elif isinstance(node, NavigableString):
            if not isinstance(node, PreformattedString):  # comments, doctype, CDATA, processing instructions
                parts.append(str(node).translate(_STRIP_CHARS))
        elif isinstance(node, Tag):
            name = node.name
            if name == "br":
                parts.append(_BR)
            elif name == "pre":
                flush()
                pre = "\n".join(line.rstrip() for line in node.get_text().translate(_STRIP_CHARS).splitlines())
                if pre.strip():
                    blocks.append((pre.strip("\n"), False))
            else:
                if name in _CELL_TAGS:
                    parts.append(_CELL)
                if name in _BLOCK_TAGS:
                    flush()
                    open_blocks.append(name)
                    stack.append((node, True))
                stack.extend((child, False) for child in reversed(node.contents))
    flush()

    out: list[str] = []
    previous_item = False
    for text, is_item in blocks:
        if out:
            out.append("\n" if is_item and previous_item else "\n\n")
        out.append(text)
        previous_item = is_item
    return "".join(out)


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
