"""Text from outside (search results, pages, model output) made storable, at the boundary where it comes in.

PostgreSQL refuses NUL in text and in JSON (`\\u0000`), and psycopg cannot encode a lone surrogate (U+D800 to
U+DFFF, which a JSON `\\ud800` escape yields in Python) as UTF-8. Either one in a title, a snippet, a fact or a
page would make the step's write raise, and a step that always raises fails for good: one hostile value would
fail the research. So both are stripped where the data enters, and huge fields are capped there.
"""

import re
from typing import Any

# NUL and every UTF-16 surrogate code point: whatever a str holds of these is unstorable.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

# Caps for search results: a title or snippet is a hint to the reader, never evidence, and a page's real title
# comes from the page itself.
MAX_TITLE_CHARS = 500
MAX_SNIPPET_CHARS = 2000
# URLs are indexed (one page per research and URL), and a B-tree entry must fit in a third of a page (2704
# bytes): a longer URL cannot be stored at all. Browsers and crawlers commonly stop at 2000 characters too.
MAX_URL_BYTES = 2000


def storable(text: str, max_chars: int | None = None) -> str:
    """`text` without what PostgreSQL cannot store, cut to `max_chars` when given."""
    text = _UNSTORABLE.sub("", text)
    return text[:max_chars] if max_chars is not None else text


def storable_data(value: Any) -> Any:
    """Parsed JSON with every string (keys too) made storable; other values as they are."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable_data(key): storable_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_data(item) for item in value]
    return value


def storable_url(url: str) -> bool:
    """Whether a URL can be stored as it is: nothing to strip (stripping would make it another URL), and short
    enough to index."""
    return not _UNSTORABLE.search(url) and len(url.encode("utf-8")) <= MAX_URL_BYTES
