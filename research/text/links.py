"""Links in markdown documents: URLs written so that `[text](url)` carries them whole, and text that forms no link.

A URL is outside data. Written as it is, `https://x.test/a)b` ends its link at the `)`, a space starts a link
title, and `<`, `>`, a backtick or a backslash mean something to markdown inside a link. Those characters are
percent-encoded in the link target, as a browser sends them anyway, so every renderer (Python-Markdown on the
report page, CommonMark wherever a downloaded report is read) takes the link whole and it leads to the same page.
The encoding is many-to-one (`a(b` and `a%28b` give the same target), so a link is matched to a page by encoding
the page's URL, never by decoding the link: `pages_by_link`.
"""

import functools
import re
from collections.abc import Iterable

# Whitespace, control characters, and what markdown reads inside a link target. Brackets are left alone: they
# are harmless there, and an IPv6 host is written in them.
_BREAKS_LINK = re.compile(r'[\s\x00-\x1f\x7f()<>"`\\]')


# Kept per process: each section of a report looks up every source's link (hundreds, for hundreds of sections).
@functools.lru_cache(maxsize=8192)
def link_target(url: str) -> str:
    """The URL as a markdown link target: the characters that would break the link percent-encoded (UTF-8)."""
    return _BREAKS_LINK.sub(lambda match: "".join(f"%{byte:02X}" for byte in match.group(0).encode()), url)


def inert_text(text: str) -> str:
    """Text that reads as written in markdown and forms neither a link nor a tag: backslashes and brackets
    escaped, angle brackets as entities (so `<https://…>` is no autolink either)."""
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def markdown_link(text: str, url: str) -> str:
    """`[text](url)` that stays one link whatever the text and the URL hold."""
    return f"[{inert_text(' '.join(text.split()))}]({link_target(url)})"


def pages_by_link(urls: Iterable[str]) -> dict[str, str]:
    """Each URL by the link target it is written as: how a link in a document is traced back to its page."""
    return {link_target(url): url for url in urls}


# What could end a link title or the link (`"`, `)`), open a link or markup inside it, or be read as an escape or
# an entity: written as character references, which both Python-Markdown and CommonMark decode in a title.
_TITLE_REFERENCES = {
    "&": "&amp;",
    '"': "&quot;",
    "'": "&#39;",
    "(": "&#40;",
    ")": "&#41;",
    "[": "&#91;",
    "]": "&#93;",
    "<": "&lt;",
    ">": "&gt;",
    "\\": "&#92;",
    "`": "&#96;",
    "*": "&#42;",
    "_": "&#95;",
}
_TITLE_SPECIAL = re.compile("[" + re.escape("".join(_TITLE_REFERENCES)) + "]")


def link_title(text: str) -> str:
    """Text as a markdown link title, `[text](url "title")`: one line, and the reader sees it exactly as written
    (a quote holding `"`, `)`, brackets or markup neither ends the link nor becomes markup)."""
    return _TITLE_SPECIAL.sub(lambda match: _TITLE_REFERENCES[match.group(0)], " ".join(text.split()))
