"""Token usage accounting per research."""

from typing import Any

from django.db.models import F

from research.models import Research


def add_usage(research_id: Any, prompt_tokens: int, completion_tokens: int) -> None:
    if prompt_tokens or completion_tokens:
        Research.objects.filter(pk=research_id).update(
            prompt_tokens=F("prompt_tokens") + prompt_tokens,
            completion_tokens=F("completion_tokens") + completion_tokens,
        )
