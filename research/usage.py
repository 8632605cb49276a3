"""What model calls cost: every request is recorded as it ends, and the research's totals move with it.

A request that failed, timed out or answered with unusable output was still paid for (or may have been), so it
is recorded like any other; the totals on the research row are what budgets and the snapshot read.
"""

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from research.models import LlmCall, Research

MILLION = Decimal(1_000_000)
MICRO_DOLLAR = Decimal("0.000001")


def price_of(model: str) -> tuple[Decimal, Decimal] | None:
    """Dollars per million (input, output) tokens for the model; None when unknown."""
    price = settings.LLM_PRICES.get(model)
    if price is None:
        return None
    return Decimal(str(price[0])), Decimal(str(price[1]))


def cost_of(model: str, prompt_tokens: int, completion_tokens: int) -> Decimal | None:
    """The dollars a request cost, to the micro-dollar; None when the model's price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    cost = (price[0] * prompt_tokens + price[1] * completion_tokens) / MILLION
    return cost.quantize(MICRO_DOLLAR)


def record_call(
    research_id: Any,
    agent: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    attempt: int,
    outcome: str,
) -> None:
    """Record one request and add it to the research's totals (its own short transaction)."""
    cost = cost_of(model, prompt_tokens, completion_tokens)
    with transaction.atomic():
        owner_id = Research.objects.filter(pk=research_id).values_list("owner_id", flat=True).first()
        if owner_id is None:
            return  # the research was deleted while the model answered
        LlmCall.objects.create(
            research_id=research_id,
            user_id=owner_id,
            agent=agent[:40],
            model=model[:200],
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            attempt=attempt,
            outcome=outcome,
        )
        Research.objects.filter(pk=research_id).update(
            prompt_tokens=F("prompt_tokens") + prompt_tokens,
            completion_tokens=F("completion_tokens") + completion_tokens,
            cost_usd=F("cost_usd") + (cost or 0),
            unpriced_calls=F("unpriced_calls") + (0 if cost is not None else 1),
        )


def research_cost(research: Research) -> float | None:
    """The research's cost in dollars for the snapshot; None while any of its calls has no known price."""
    if research.unpriced_calls:
        return None
    return float(research.cost_usd)


def models_in_use() -> set[str]:
    """Every model a research may call: the default and each agent's."""
    return {settings.LLM_MODEL, *settings.LLM_AGENT_MODELS.values()}


def unpriced_models() -> list[str]:
    return sorted(model for model in models_in_use() if price_of(model) is None)
