"""What model calls cost: every request is recorded as it ends, as one LlmCall row.

A request that failed, timed out or answered with unusable output was still paid for (or may have been), so it
is recorded like any other. A research's totals are the sums of its calls, read when wanted (the budgets before
and after each request, the snapshot, the admin). The database adds each call into one of a few UsageTally rows of
its research as the call is inserted (a trigger), and the totals are summed over those: summing the calls
themselves grew with every call, three sums over 1,300 calls by the end of a (5,5), before and after each call.
Recording a call waits on no row but, rarely, its tally shard (another connection's insert, one statement).
The totals used to be counters on the research row, and every model call of every worker then queued on that
row's lock (with the tree's writes) to move them.
"""

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.utils import timezone

from research.models import LlmCall, Research, UsageTally
from research.record import database
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
    """What the budgets (research/control/budgets.py) read of a research, as a row tuple: no model instance."""

    status: str
    stop_reason: str
    started_at: datetime | None
    budget_seconds: int | None
    budget_tokens: int | None
    budget_usd: Decimal | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal


_COLUMNS = BudgetState._fields[:6]


def spent_sql(alias: str) -> str:
    """The totals of BudgetState for the research joined as `alias`, as three columns (of the budgets' read, or of
    a step's one read: workers/pipeline/lifecycle.py). Summed only where the research has a budget of that kind, 0
    where none could be reached: a model call or a fetch then reads no call at all."""
    return ", ".join(_spent(alias))


def state_of(research: Research) -> BudgetState:
    """What the budgets read of a research read with the sums `spent_sql` reads (`research_with`)."""
    return BudgetState(*(getattr(research, name) for name in BudgetState._fields))


def _spent(alias: str, plus: str = "") -> list[str]:
    calls = f"FROM {UsageTally._meta.db_table} c WHERE c.research_id = {alias}.id"
    tokens = f"{alias}.budget_tokens IS NULL"
    return [
        f"CASE WHEN {unbounded} THEN 0 ELSE (SELECT COALESCE(SUM(c.{column}), 0){cast} {calls}){plus} END"
        for unbounded, column, cast in (  # (a sum of bigint is numeric: tokens are read back as integers)
            (tokens, "prompt_tokens", "::bigint"),
            (tokens, "completion_tokens", "::bigint"),
            (f"{alias}.budget_usd IS NULL", "cost_usd", ""),
        )
    ]


def budget_state(research_id: ResearchId) -> BudgetState | None:
    # Read before every model request: the research's budget columns and the sums of its calls, one statement.
    columns = ", ".join(f"research.{column}" for column in _COLUMNS)
    sql = f"SELECT {columns}, {spent_sql('research')} FROM {Research._meta.db_table} AS research WHERE research.id = %s"
    row = database.read_row(Research, research_id, sql)
    return BudgetState(*row) if row is not None else None


class Usage(NamedTuple):
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal  # of the priced calls
    unpriced_calls: int  # calls of a model with no known price: while any, the research's cost is unknown


# The sums of Usage over the calls of the research whose id is the one parameter (or a column, by substitution),
# read from its tallies.
_TOTALS = (
    "SELECT COALESCE(SUM(prompt_tokens), 0)::bigint, COALESCE(SUM(completion_tokens), 0)::bigint, "
    f"COALESCE(SUM(cost_usd), 0), COALESCE(SUM(unpriced_calls), 0)::bigint FROM {UsageTally._meta.db_table} "
    "WHERE research_id = "
)


def totals(research_id: ResearchId) -> Usage:
    """What a research's model calls spent, summed from them."""
    # Read before every report section: one statement without the ORM's aggregate machinery.
    with database.prepared_cursor() as cursor:
        cursor.execute(_TOTALS + "%s", [Research._meta.pk.get_db_prep_value(research_id, connection)])
        prompt, completion, usd, unpriced = cursor.fetchone()
    return Usage(int(prompt), int(completion), Decimal(usd), int(unpriced))


def with_usage(research_id: ResearchId) -> Research:
    """The research with the totals of its calls (`usage_of`), as `Research.objects.with_usage().get` reads it;
    raises Research.DoesNotExist. One hand-written statement that sums the calls in one pass: the ORM's read
    compiled four subqueries, each summing every call again, for each push and snapshot."""
    research = research_with(research_id, Usage._fields, "u.*", f"CROSS JOIN LATERAL ({_TOTALS}r.id) u")
    if research is None:
        raise Research.DoesNotExist(research_id)
    return research


def research_with(research_id: ResearchId, names: Sequence[str], select: str, join: str = "") -> Research | None:
    """The research as the ORM's instance, with the values `select` lists (the research joined as `r`,
    `join` after it) set as its attributes `names`, in one hand-written read; None if there is no such research."""
    fields = Research._meta.concrete_fields
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT {database.instance_columns(Research, 'r')}, {select} FROM {Research._meta.db_table} r {join} "
            "WHERE r.id = %s",
            [Research._meta.pk.get_db_prep_value(research_id, connection)],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    research = database.instance_from_row(Research, row[: len(fields)])
    for name, value in zip(names, row[len(fields) :], strict=True):
        setattr(research, name, value)
    return research


def usage_of(research: Research) -> Usage:
    """The totals a research was read with (`Research.objects.with_usage()`)."""
    return Usage(*(getattr(research, name) for name in Usage._fields))


def record_call(
    research_id: ResearchId,
    agent: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    attempt: int,
    outcome: str,
) -> BudgetState | None:
    """Record one request; what the budgets read of the research after it, None if the research is gone."""
    cost = cost_of(model, prompt_tokens, completion_tokens)
    # One statement, one commit, no row locked but the call's own and its tally shard: the call is inserted
    # with the owner the research row gives, and the budgets' columns come back with the sums of the calls
    # before it and this one (a statement does not see its own insert, nor the tally its trigger adds to), so
    # the check after the call reads nothing.
    columns = ", ".join(f"research.{column}" for column in _COLUMNS)
    spent = ", ".join(_spent("research", plus=" + %s"))
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"WITH research AS (SELECT * FROM {Research._meta.db_table} WHERE id = %s), "
            f"call AS (INSERT INTO {LlmCall._meta.db_table} (research_id, user_id, agent, model, prompt_tokens, "
            "completion_tokens, cost_usd, attempt, outcome, created_at) "
            "SELECT id, owner_id, %s, %s, %s, %s, %s, %s, %s, %s FROM research) "
            f"SELECT {columns}, {spent} FROM research",
            [
                Research._meta.pk.get_db_prep_value(research_id, connection),
                agent[:40],
                model[:200],
                prompt_tokens,
                completion_tokens,
                cost,
                attempt,
                outcome,
                timezone.now(),
                prompt_tokens,
                completion_tokens,
                cost or 0,
            ],
        )
        row = cursor.fetchone()
    return BudgetState(*row) if row is not None else None  # None: deleted while the model answered


def research_cost(used: Usage) -> float | None:
    """The research's cost in dollars for the snapshot; None while any of its calls has no known price."""
    if used.unpriced_calls:
        return None
    return float(used.cost_usd)


def models_in_use() -> set[str]:
    """Every model a research may call: the default and each agent's."""
    return {settings.LLM_MODEL, *settings.LLM_AGENT_MODELS.values()}


def unpriced_models() -> list[str]:
    return sorted(model for model in models_in_use() if price_of(model) is None)
