"""Research memory: the de-duplication key of an item, and what planning and the report read of it.

Items are only inserted (workers/pipeline/memory.py), one row each, unique per research, kind and key: the key is
the text with case, punctuation and spacing normalised away, so the same insight said twice is one item, and two
workers that find it at once insert it once.
"""

import re

from research.models import MemoryItem, MemoryKind
from research.types import ResearchId

MAX_KEY_CHARS = 200
# Open gaps a planning prompt gets, oldest first, ahead of the evaluator's own gaps and directions: an adaptive
# branch's children (workers/pipeline/plan.py) and a gap-filling round (workers/pipeline/review.py). Five, the cap
# both had: the oldest gaps are the ones no branch has closed for longest, and a planner asked for a handful of
# queries cannot cover more, while more would crowd out the parent's own gaps and directions in the focus list.
MAX_MEMORY_GAPS = 5
# Anything that is not a letter or a digit separates words; "Cost: 5 %" and "cost 5%" are one key.
_NOT_WORD = re.compile(r"[\W_]+")


def memory_key(text: str) -> str:
    """The item's de-duplication key: lower case, words separated by single spaces, at most 200 characters."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())[:MAX_KEY_CHARS].rstrip()


def open_gaps(research_id: ResearchId) -> list[str]:
    """The research's open gaps, oldest first, at most MAX_MEMORY_GAPS: what planning should close first."""
    rows = MemoryItem.objects.filter(research_id=research_id, kind=MemoryKind.GAP, closed=False).order_by("id")
    return list(rows.values_list("text", flat=True)[:MAX_MEMORY_GAPS])
