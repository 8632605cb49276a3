"""Research memory: the de-duplication key of an item, and what planning and the report read of it.

Items are only inserted (workers/pipeline/memory.py), one row each, unique per research, kind and key: the key is
the text with case, punctuation and spacing normalised away, so the same insight said twice is one item, and two
workers that find it at once insert it once.
"""

import re
from typing import Any

from research.models import MemoryItem, MemoryKind

MAX_KEY_CHARS = 200
# Anything that is not a letter or a digit separates words; "Cost: 5 %" and "cost 5%" are one key.
_NOT_WORD = re.compile(r"[\W_]+")


def memory_key(text: str) -> str:
    """The item's de-duplication key: lower case, words separated by single spaces, at most 200 characters."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())[:MAX_KEY_CHARS].rstrip()


def open_gaps(research_id: Any) -> list[str]:
    """The research's open gaps, oldest first: what planning should close before anything else."""
    rows = MemoryItem.objects.filter(research_id=research_id, kind=MemoryKind.GAP, closed=False).order_by("id")
    return list(rows.values_list("text", flat=True))
