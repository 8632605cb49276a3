"""Citation links a reader follows to the quoted sentence itself, not to the top of a long page.

A stored report links each citation to the page it rests on, with the quote as the link's title
(`[[1]](url "quote")`: workers/pipeline/citations.py). When a report is shown or exported, each citation's link is
pointed at its quote:
- a collection document: its page in the app, `/collection/<id>/?quote=...&from=<research>#quote`, which marks the
  passage and scrolls to it (research/web/collection_views.py), with the way back to the research;
- a web page: the same URL with a text fragment (`#:~:text=start,end`), which Chromium, Safari and Firefox scroll
  to and highlight; a browser without them opens the page at its top, as before.
The stored report keeps the plain URLs: they are its identity (coverage, deltas, the sources list).
"""

import html
import re
from urllib.parse import quote, urlencode

from research.text.links import link_target

# A citation as the renderer writes it: `[[n]](target "title")`; the title holds no `"` (it is written as a
# reference).
_CITATION = re.compile(r'(\[\[\d+\]\]\()(\S+?)( "([^"]*)")\)')
_COLLECTION_PATH = re.compile(r"[0-9]+/")
# A text fragment names a long quote by its first and last words, which is enough to find it and short to send.
_FRAGMENT_WORDS = 4


def quote_anchors(markdown: str, base: str, research_id: object | None = None) -> str:
    """The markdown with each citation's link pointed at its quote; `base` is the app's address as the reader
    reached it (collection links are already stable links under it: research/collection/documents.py
    `public_links`), `research_id` the research a document page links back to."""
    collection = f"{base.rstrip('/')}/collection/"

    def anchored(match: re.Match[str]) -> str:
        url, said = match.group(2), html.unescape(match.group(4))
        if url.startswith(collection) and _COLLECTION_PATH.fullmatch(url[len(collection) :]):
            query = {"quote": said, **({"from": str(research_id)} if research_id is not None else {})}
            target = f"{url}?{urlencode(query)}#quote"
        else:
            target = text_fragment(url, said)
        return f"{match.group(1)}{link_target(target)}{match.group(3)})"

    return _CITATION.sub(anchored, markdown)


def text_fragment(url: str, said: str) -> str:
    """The URL with a text fragment for `said`: the whole of a short quote, the first and last words of a long one."""
    words = said.split()
    if not words:
        return url
    if len(words) > 2 * _FRAGMENT_WORDS:
        directive = f"{_encode(' '.join(words[:_FRAGMENT_WORDS]))},{_encode(' '.join(words[-_FRAGMENT_WORDS:]))}"
    else:
        directive = _encode(" ".join(words))
    return f"{url}{':~:text=' if '#' in url else '#:~:text='}{directive}"


def _encode(text: str) -> str:
    # The directive's own marks (`-`, `,`, `&`) must not appear unencoded in its text.
    return quote(text, safe="").replace("-", "%2D")
