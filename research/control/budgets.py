"""Per-research budgets (seconds, tokens, dollars): what a start may ask for, and the stop when one is reached.

A budget does not fail a research. Once one is reached no new step starts: the research is marked partial with
its reason, its unfinished websites and queries are stopped, and the report is handed on, to be written from what
was analysed by then. Model calls already in flight still land (and are paid for); their steps' final writes find
their rows stopped and store nothing, so they are all a research can spend past its budget.

The stop takes three short transactions, like a cancel (research/control/lifecycle.py): the research row first (mark it
stopped, record `budget_reached`), then the tree in its lock order (stop_unfinished), then the research row again
(count every query off and queue the report). Each is conditional, so running it twice, or concurrently, does the
work once; the sweeper finishes a stop whose worker died half-way.
"""

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from research.control import dispatch
from research.control.lifecycle import stop_unfinished
from research.models import EventType, Research, ResearchStatus
from research.record import transitions
from research.record.events import record_event
from research.record.transactions import research_transaction
from research.record.usage import MILLION, BudgetState, Usage, budget_state, price_of, totals, unpriced_models
from research.types import ResearchId

log = logging.getLogger(__name__)

KEYS = ("seconds", "tokens", "usd")
USD_PLACES = Decimal("0.0001")  # the budget_usd column's scale

SECONDS, TOKENS, USD = "budget_seconds", "budget_tokens", "budget_usd"


class BudgetError(ValueError):
    """A budget the start refuses; `field` names the key at fault (`budget.tokens`)."""

    def __init__(self, message: str, field: str = "budget") -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass(frozen=True)
class Budget:
    seconds: int | None = None
    tokens: int | None = None
    usd: Decimal | None = None


def resolve(requested: Any) -> Budget:
    """The budget a research starts with: the keys asked for, checked, and the server's defaults for the others."""
    if requested is None:
        requested = {}
    if not isinstance(requested, Mapping):
        raise BudgetError("must be an object with optional keys seconds, tokens and usd")
    unknown = sorted(str(key) for key in requested if key not in KEYS)
    if unknown:
        raise BudgetError(f"unknown key; allowed: {', '.join(KEYS)}", f"budget.{unknown[0]}")
    seconds = _integer(requested.get("seconds"), "seconds", settings.MAX_BUDGET_SECONDS)
    tokens = _integer(requested.get("tokens"), "tokens", settings.MAX_BUDGET_TOKENS)
    usd = _dollars(requested.get("usd"))
    if usd is not None and unpriced_models():
        raise BudgetError(
            f"a dollar budget needs known prices; no price for: {', '.join(unpriced_models())}", "budget.usd"
        )
    return Budget(
        seconds=seconds if seconds is not None else _default_int(settings.RESEARCH_TIME_BUDGET, "MAX_BUDGET_SECONDS"),
        tokens=tokens if tokens is not None else _default_int(settings.RESEARCH_TOKEN_BUDGET, "MAX_BUDGET_TOKENS"),
        usd=usd if usd is not None else _default_usd(),
    )


def _integer(value: Any, key: str, maximum: int) -> int | None:
    if value is None:
        return None
    # bool is an int in Python; JSON true is not a number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError("must be an integer", f"budget.{key}")
    if not 1 <= value <= maximum:
        raise BudgetError(f"must be between 1 and {maximum}", f"budget.{key}")
    return value


def _dollars(value: Any) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BudgetError("must be a number", "budget.usd")
    amount = Decimal(str(value)).quantize(USD_PLACES, rounding=ROUND_HALF_UP)
    if amount <= 0:
        raise BudgetError(f"must be at least {USD_PLACES}", "budget.usd")
    if amount > Decimal(str(settings.MAX_BUDGET_USD)):
        raise BudgetError(f"must be at most {settings.MAX_BUDGET_USD:g}", "budget.usd")
    return amount


def _default_int(default: int, maximum_name: str) -> int | None:
    return min(default, getattr(settings, maximum_name)) if default else None


def _default_usd() -> Decimal | None:
    # A default dollar budget cannot be kept while a model's price is unknown; the other budgets still apply.
    if not settings.RESEARCH_USD_BUDGET or unpriced_models():
        return None
    default = min(settings.RESEARCH_USD_BUDGET, settings.MAX_BUDGET_USD)
    return Decimal(str(default)).quantize(USD_PLACES, rounding=ROUND_HALF_UP)


def reached(research: BudgetState) -> tuple[str, Any, Any] | None:
    """The first budget the research has reached, as (stop reason, limit, spent); None while within all."""
    if research.budget_seconds and research.started_at:
        elapsed = (timezone.now() - research.started_at).total_seconds()
        if elapsed >= research.budget_seconds:
            return SECONDS, research.budget_seconds, int(elapsed)
    # The report is written after the stop, by a model call of its own: the steps stop short of a token or dollar
    # budget by the share held back for it, so that the report, too, fits within the budget as far as it can.
    steps_share = Decimal(1) - Decimal(str(settings.BUDGET_REPORT_SHARE))
    tokens = research.prompt_tokens + research.completion_tokens
    if research.budget_tokens and tokens >= research.budget_tokens * steps_share:
        return TOKENS, research.budget_tokens, tokens
    if research.budget_usd is not None and research.cost_usd >= research.budget_usd * steps_share:
        return USD, float(research.budget_usd), float(research.cost_usd)
    return None


def spent(research: Research) -> str | None:
    """The token or dollar budget a research has spent whole (its stop reason), None while it has some left: a
    question asked of a finished research is a model call charged to it, and its budget bounds those too."""
    if not research.budget_tokens and research.budget_usd is None:
        return None
    used = totals(research.pk)
    if research.budget_tokens and used.prompt_tokens + used.completion_tokens >= research.budget_tokens:
        return TOKENS
    if research.budget_usd is not None and used.cost_usd >= research.budget_usd:
        return USD
    return None


def check(research_id: ResearchId, known: BudgetState | None = None) -> bool:
    """Stop the research if it is running and has reached a budget; True if it is stopped (now or before).

    `known`: the research's budget columns as a statement just returned them (research/record/usage.py record_call),
    so they need not be read again."""
    if connection.in_atomic_block:
        return False  # the stop's lock order needs transactions of its own; the next step's check will do
    # Only what the budgets read, as a row: this runs before and after every model request.
    research = known or budget_state(research_id)
    if research is None or research.status != ResearchStatus.RUNNING:
        return False
    if research.stop_reason:
        return True
    hit = reached(research)
    if hit is None:
        return False
    stop(research_id, *hit)
    return True


def stop(research_id: ResearchId, reason: str, limit: Any, spent: Any) -> bool:
    """Stop a running research on a budget; False if it was not running or was stopped already."""
    with research_transaction(research_id, ending=True):
        # A research whose every query is counted off already has its whole report coming: nothing to stop.
        if not transitions.stop_on_budget(research_id, reason):
            return False
        record_event(research_id, EventType.BUDGET_REACHED, {"reason": reason, "limit": limit, "spent": spent})
    log.info("research %s reached its budget (%s: %s of %s)", research_id, reason, spent, limit)
    finish_stop(research_id)
    return True


def finish_stop(research_id: ResearchId) -> None:
    """Stop the tree of a research marked stopped, and hand its report on (once, however often this runs)."""
    stop_unfinished(research_id, timezone.now())
    # No query can be counted off any more (none is unfinished, and planning adds none to a stopped research),
    # so zero stays zero. A research whose last query was counted off meanwhile had its report queued then.
    with research_transaction(research_id):
        if transitions.hand_stopped_tree_to_report(research_id):
            dispatch.REPORT.on_commit(str(research_id))


def half_stopped() -> list[Any]:
    """Running researches marked stopped whose tree was not stopped or report not handed on (a worker died)."""
    rows = Research.objects.filter(status=ResearchStatus.RUNNING, pending_queries__gt=0).exclude(stop_reason="")
    return list(rows.values_list("pk", flat=True))


# The report is written after a stop, with what is left of the budget: its completion is expected to take about
# this many tokens, held back from what its sources may take; and however little is left, the sources may take
# this many, so that the report can still say something (spending that much past the budget).
REPORT_COMPLETION_TOKENS = 2000
MIN_REPORT_TOKENS = 1000


def report_prompt_tokens(research: Research, cap: int | None = None, used: Usage | None = None) -> int:
    """Tokens the report writer's sources may take: `cap` (REPORT_TOKEN_BUDGET by default), or less when a budget
    has less left. `used`: what its calls spent so far (summed from them when it has a budget and this is None)."""
    allowed = settings.REPORT_TOKEN_BUDGET if cap is None else cap
    if used is None and (research.budget_tokens or research.budget_usd is not None):
        used = totals(research.pk)
    if research.budget_tokens and used is not None:
        spent = used.prompt_tokens + used.completion_tokens
        allowed = min(allowed, research.budget_tokens - spent - REPORT_COMPLETION_TOKENS)
    price = price_of(settings.LLM_AGENT_MODELS["report_writer"])
    if research.budget_usd is not None and price is not None and price[0] > 0 and used is not None:
        left = research.budget_usd - used.cost_usd - price[1] * REPORT_COMPLETION_TOKENS / MILLION
        allowed = min(allowed, int(left * MILLION / price[0]))
    return max(MIN_REPORT_TOKENS, allowed)


REASON_WORDS = {SECONDS: "time budget", TOKENS: "token budget", USD: "dollar budget"}
# Not a budget: a cancelled research whose user asked for the report of what it found (research/control/services.py).
CANCELLED = "cancelled"


def describe(reason: str, research: Research) -> str:
    """The budget in words, for the report's note: "token budget (40,000 tokens)"."""
    if reason == SECONDS:
        amount = f"{research.budget_seconds:,} seconds"
    elif reason == TOKENS:
        amount = f"{research.budget_tokens:,} tokens"
    else:
        amount = f"${research.budget_usd.normalize():f}" if research.budget_usd is not None else "dollars"
    return f"{REASON_WORDS.get(reason, 'budget')} ({amount})"
