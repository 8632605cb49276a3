"""Token usage accounting per research."""

from typing import Any

from django.db.models import F

from research.models import Research
from research.transactions import open_tally


def add_usage(research_id: Any, prompt_tokens: int, completion_tokens: int) -> None:
    tally = open_tally(research_id)
    if tally is not None:  # applied with the tree transaction's one update of the research row
        tally.prompt_tokens += prompt_tokens
        tally.completion_tokens += completion_tokens
    elif prompt_tokens or completion_tokens:
        Research.objects.filter(pk=research_id).update(
            prompt_tokens=F("prompt_tokens") + prompt_tokens,
            completion_tokens=F("completion_tokens") + completion_tokens,
        )
