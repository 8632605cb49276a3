"""Helpers shared by the agents: schema relaxing, text trimming to a token budget, fences around outside text."""

import copy
import re
import secrets
from dataclasses import dataclass
from typing import Any

from workers.clients.model_window import Room

# A rough, model-independent estimate: English text averages about four characters per token.
CHARS_PER_TOKEN = 4


def relaxed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without array length limits: a model that returns too many or too few items is still usable,
    and the agent fixes the count itself instead of failing the call."""
    result = copy.deepcopy(schema)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("minItems", None)
            node.pop("maxItems", None)
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    strip(result)
    return result


# Of an answer's room, what the items it is asked for may take (the rest for keys, brackets and a margin).
ANSWER_FILL = 0.75


def items_that_fit(writing: int, item_tokens: int, most: int, arrays: int = 1) -> int:
    """`maxItems` for each of `arrays` arrays of items of about `item_tokens` tokens, so that a model that fills
    every one of them still fits an answer of `writing` tokens: at most `most`, at least one."""
    return max(1, min(most, int(writing * ANSWER_FILL) // max(1, arrays * item_tokens)))


def with_max_items(schema: dict[str, Any], limits: dict[str, int]) -> dict[str, Any]:
    """A copy of the schema with `maxItems` of its top-level arrays set as `limits` says (property → maxItems)."""
    result = copy.deepcopy(schema)
    for name, limit in limits.items():
        result["properties"][name]["maxItems"] = limit
    return result


def trim_to_tokens(text: str, max_tokens: int, room: Room | None = None) -> str:
    """Cut text to about `max_tokens` tokens, at a paragraph or sentence boundary when one is near; in the room's
    model's characters per token when a room is given, else the rough estimate."""
    return trim_to_chars(text, room.chars(max_tokens) if room is not None else max_tokens * CHARS_PER_TOKEN)


def trim_to_chars(text: str, limit: int) -> str:
    """Cut text to `limit` characters, at a paragraph or sentence boundary when one is near."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for boundary in ("\n\n", ". ", "\n"):
        index = cut.rfind(boundary)
        if index > limit * 0.8:
            return cut[: index + len(boundary)].rstrip()
    return cut


# Three or more angle brackets: what fence markers are made of.
_MARKER_RUN = re.compile(r"<{3,}|>{3,}")
# Fullwidth look-alikes: a model reads them as the brackets they stand for, and quote matching (NFKC,
# research/text/quotes.py) takes them for the originals, so a quote copied from a neutralised page still holds.
_FULLWIDTH = str.maketrans({"<": "\uff1c", ">": "\uff1e"})


@dataclass(frozen=True)
class Fence:
    """Marker lines around outside text in a prompt, with a random token of their own.

    A page (or a fact taken from one) may hold instructions meant for the model, and markers to make them look
    like the prompt's own: a fixed marker could be closed from inside. These carry a token drawn for each call,
    which the text cannot know, and the text's own marker-like runs are neutralised, so nothing inside can end
    the fence or open another.
    """

    label: str
    token: str

    @classmethod
    def new(cls, label: str) -> "Fence":
        return cls(label, secrets.token_hex(8))

    @property
    def start(self) -> str:
        return f"<<<{self.label}-{self.token}>>>"

    @property
    def end(self) -> str:
        return f"<<<END-{self.label}-{self.token}>>>"

    def around(self, text: str) -> str:
        return f"{self.start}\n{neutralised(text)}\n{self.end}"


def neutralised(text: str) -> str:
    """Outside text that cannot open or close a fence: runs of three or more angle brackets made fullwidth."""
    if "<<<" not in text and ">>>" not in text:
        return text  # the usual page: two substring searches, where the expression tried every position (50 µs)
    return _MARKER_RUN.sub(lambda match: match.group(0).translate(_FULLWIDTH), text)


def distinct(items: list[str]) -> list[str]:
    """Drop blanks and case-insensitive duplicates, keeping order."""
    seen: set[str] = set()
    result = []
    for item in items:
        key = " ".join(item.split()).casefold()
        if key and key not in seen:
            seen.add(key)
            result.append(item.strip())
    return result
