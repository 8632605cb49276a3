"""What model calls cost: every request is recorded as it ends, and the research's totals move with it.

A request that failed, timed out or answered with unusable output was still paid for (or may have been), so it
is recorded like any other; the totals on the research row are what budgets and the snapshot read.
"""

from datetime import datetime
from decimal import Decimal
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from research import database, transitions
from research.models import LlmCall, Research
from research.types import ResearchId

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


class BudgetState(NamedTuple):
    """What the budgets (research/budgets.py) read of a research row, as a row tuple: no model instance."""

    status: str
    stop_reason: str
    started_at: datetime | None
    budget_seconds: int | None
    budget_tokens: int | None
    budget_usd: Decimal | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal


def budget_state(research_id: ResearchId) -> BudgetState | None:
    # Read before every model request.
    sql = f"SELECT {', '.join(BudgetState._fields)} FROM {Research._meta.db_table} WHERE id = %s"
    row = database.read_row(Research, research_id, BudgetState._fields, sql)
    return BudgetState(*row) if row is not None else None


def record_call(
    research_id: ResearchId,
    agent: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    attempt: int,
    outcome: str,
) -> BudgetState | None:
    """Record one request and add it to the research's totals (one statement, or its own short transaction);
    what the budgets read of the research after it, None if the research is gone."""
    cost = cost_of(model, prompt_tokens, completion_tokens)
    if database.one_statement_writes():
        # One statement, one commit: the totals move, the call is inserted with the owner the same row gives, and
        # the budgets' columns come back, so the check after the call reads nothing (this runs per model request).
        columns = ", ".join(BudgetState._fields)
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH research AS (UPDATE {Research._meta.db_table} SET prompt_tokens = prompt_tokens + %s, "
                "completion_tokens = completion_tokens + %s, cost_usd = cost_usd + %s, "
                f"unpriced_calls = unpriced_calls + %s WHERE id = %s RETURNING id, owner_id, {columns}), "
                f"call AS (INSERT INTO {LlmCall._meta.db_table} (research_id, user_id, agent, model, prompt_tokens, "
                "completion_tokens, cost_usd, attempt, outcome, created_at) "
                "SELECT id, owner_id, %s, %s, %s, %s, %s, %s, %s, %s FROM research) "
                f"SELECT {columns} FROM research",
                [
                    prompt_tokens,
                    completion_tokens,
                    cost or 0,
                    0 if cost is not None else 1,
                    Research._meta.pk.get_db_prep_value(research_id, connection),
                    agent[:40],
                    model[:200],
                    prompt_tokens,
                    completion_tokens,
                    cost,
                    attempt,
                    outcome,
                    timezone.now(),
                ],
            )
            row = cursor.fetchone()
        return BudgetState(*row) if row is not None else None  # None: deleted while the model answered
    with transaction.atomic():
        owner_id = Research.objects.filter(pk=research_id).values_list("owner_id", flat=True).first()
        if owner_id is None:
            return None  # the research was deleted while the model answered
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
        transitions.add_usage(research_id, prompt_tokens, completion_tokens, cost)
        return budget_state(research_id)


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
