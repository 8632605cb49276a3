"""Helpers shared by the agents: schema relaxing and text trimming to a token budget."""

import copy
from typing import Any

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


def trim_to_tokens(text: str, max_tokens: int) -> str:
    """Cut text to about `max_tokens` tokens, at a paragraph or sentence boundary when one is near."""
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for boundary in ("\n\n", ". ", "\n"):
        index = cut.rfind(boundary)
        if index > limit * 0.8:
            return cut[: index + len(boundary)].rstrip()
    return cut


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
