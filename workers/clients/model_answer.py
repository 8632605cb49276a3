"""The JSON in a model's answer, as real models give it.

Self-hosted models rarely answer with bare JSON: a reasoning model writes `<think>…</think>` (or `<reasoning>`,
`<|thinking|>…`) first, and may think aloud about a draft JSON there; many models say "Sure! Here is the JSON:"
and fence it; some stop mid-object or leave a trailing comma. Reasoning is removed first, so a draft inside it is
never taken for the answer; then the JSON is looked for as a whole, in fences, then as the first object or array
that parses. Near-JSON is repaired by json-repair (a kept library that handles unclosed brackets, missing commas,
single quotes, comments and trailing prose far better than a hand-written fixer would) before the model is asked
again: a repaired answer still has to pass the schema, so a repair can only save a call, never admit bad data.
"""

import json
import re
from typing import Any

import json_repair

# Reasoning blocks by tag: <think>, <thinking>, <reasoning>, <reflection>, and the <|thinking|>-style special
# tokens some templates leave in the text. An unclosed block at the end (the answer was cut while thinking) counts
# as reasoning too.
_TAGS = r"think|thinking|reasoning|reflection|thought"
_BLOCK = re.compile(rf"<(\|?)({_TAGS})\1>.*?(?:<\1/\2\1>|<\|end_?\2\|>|\Z)", re.IGNORECASE | re.DOTALL)
# DeepSeek-R1 style templates put the opening tag in the prompt: the answer starts inside the block and only the
# closing tag appears.
_ORPHAN_CLOSE = re.compile(rf"\A.*?<\|?/({_TAGS})\|?>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json5?|javascript|js)?[ \t]*\n?(.*?)(?:```|\Z)", re.IGNORECASE | re.DOTALL)


class NoJSON(ValueError):
    """The answer holds nothing that reads as JSON, even repaired."""


def strip_reasoning(text: str) -> str:
    """The answer without its reasoning blocks."""
    text = _BLOCK.sub("", text)
    if _ORPHAN_CLOSE.search(text):
        text = _ORPHAN_CLOSE.sub("", text, count=1)
    return text.strip()


def has_reasoning(text: str) -> bool:
    """Whether the answer carried a reasoning block (what `check_model` calls reasoning noise)."""
    return bool(_BLOCK.search(text) or _ORPHAN_CLOSE.search(text))


def find_json(content: str) -> tuple[Any, bool]:
    """(the JSON value in the answer, whether it had to be repaired); NoJSON when there is none.

    Objects are preferred to arrays, and an answer whose only JSON is a bare number or string is not an answer:
    every schema the agents ask for is an object.
    """
    text = strip_reasoning(content)
    parsed = [value for value in _parsed(text) if isinstance(value, dict | list)]
    for value in parsed:
        if isinstance(value, dict):
            return value, False
    if parsed:
        return parsed[0], False
    start = _first_bracket(text)
    if start is not None:
        fenced = _FENCE.search(text)
        source = fenced.group(1) if fenced and fenced.start() <= start else text[start:]
        repaired = json_repair.loads(source)
        if isinstance(repaired, dict | list) and repaired:
            return repaired, True
    raise NoJSON("the answer holds no JSON object")


# Brackets tried as the start of an embedded value: enough for any chatty preamble, bounded for a huge answer.
_MAX_STARTS = 64


def _parsed(text: str) -> list[Any]:
    """The whole text, each fenced block, then values starting at a bracket, each that parses."""
    values = []
    for candidate in [text, *(match.group(1).strip() for match in _FENCE.finditer(text))]:
        try:
            values.append(json.loads(candidate))
        except ValueError:
            continue
    if any(isinstance(value, dict) for value in values):
        return values
    decoder = json.JSONDecoder()
    for count, match in enumerate(re.finditer(r"[\[{]", text)):
        if count >= _MAX_STARTS:
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        values.append(value)
        if isinstance(value, dict):
            break
    return values


def _first_bracket(text: str) -> int | None:
    match = re.search(r"[\[{]", text)
    return match.start() if match else None
