"""Quote verification: a quote is kept only if it occurs in the page's stored text, whitespace aside."""

import re
import unicodedata

_SPACE = re.compile(r"\s+")
# Typographic variants a model tends to normalise when it copies; matching them is not paraphrase.
_EQUIVALENT = str.maketrans(
    {"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'", "–": "-", "—": "-", "\u00a0": " ", "…": "..."}
)


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_EQUIVALENT)
    return _SPACE.sub(" ", text).strip()


class PageText:
    """A page's text normalised once, to check many quotes against it."""

    def __init__(self, text: str) -> None:
        self._text = normalise(text)

    def contains(self, quote: str) -> bool:
        needle = normalise(quote).strip(" \"'")
        # Very short "quotes" match anywhere and prove nothing.
        return len(needle) >= 8 and needle in self._text
