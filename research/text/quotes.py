"""Quote verification: a quote is kept only if it occurs in the page's stored text, whitespace aside."""

import re
import unicodedata

_SPACE = re.compile(r"\s+")
# Typographic variants a model tends to normalise when it copies; matching them is not paraphrase.
_EQUIVALENT = str.maketrans(
    {"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'", "–": "-", "—": "-", "\u00a0": " ", "…": "..."}
)

# A quote must be found for what it says, not by chance. Eight characters ("in 2020.", "the pump") occur on
# countless pages and prove nothing; a bare name, figure or term ("Heat-pump-efficiency") says nothing either.
# 20 characters and 3 words is about the shortest span that states something ("COP of 2.1 at -15 °C", "costs
# fell 30% by 2023"), so real claims pass and fragments do not.
MIN_QUOTE_CHARS = 20
MIN_QUOTE_WORDS = 3
# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Japanese kana, Chinese characters):
# spaces do not count their words, so a quote in them is held to the character minimum alone.
_UNSPACED_SCRIPT = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
)


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_EQUIVALENT)
    return _SPACE.sub(" ", text).strip()


def _needle(quote: str) -> str:
    return normalise(quote).strip(" \"'")


def is_quotable(quote: str) -> bool:
    """Whether a quote is long enough to mean something (MIN_QUOTE_CHARS and MIN_QUOTE_WORDS)."""
    needle = _needle(quote)
    if len(needle) < MIN_QUOTE_CHARS:
        return False
    words = sum(1 for token in needle.split() if any(char.isalnum() for char in token))
    return words >= MIN_QUOTE_WORDS or bool(_UNSPACED_SCRIPT.search(needle))


class PageText:
    """A page's text normalised once, to check many quotes against it."""

    def __init__(self, text: str) -> None:
        self._text = normalise(text)

    def contains(self, quote: str) -> bool:
        """Whether the quote is long enough to mean something and occurs in the page."""
        return is_quotable(quote) and _needle(quote) in self._text


# Words of a quote and what may stand between them in the page: whitespace, punctuation, typographic quotes and
# dashes (a stored quote matches its page with those normalised: `normalise`).
_QUOTE_WORD = re.compile(r"\w+")
_MAX_LOCATED_WORDS = 80


def locate(text: str, quote: str) -> tuple[int, int] | None:
    """Where the quote stands in the page's own text, (start, end), for a reader to be shown it: the quote's words
    in order, anything but a word between them; None where they are not there."""
    words = _QUOTE_WORD.findall(quote)[:_MAX_LOCATED_WORDS]
    if not words:
        return None
    pattern = r"\W+".join(re.escape(word) for word in words)
    found = re.search(pattern, text, re.IGNORECASE)
    if found is None:
        return None
    # The quote's closing marks ("2.7." ends with its full stop), where the page has them too.
    stripped = quote.strip()
    closing = stripped[len(re.sub(r"\W+$", "", stripped)) :]
    end = found.end()
    while closing and text.startswith(closing[0], end):
        end, closing = end + 1, closing[1:]
    return found.start(), end
