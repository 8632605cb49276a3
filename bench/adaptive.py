"""Adaptive against fixed mode on the fakes: what each spends on a simple and on a complex request.

The fake evaluator is scripted per request: on the "simple" one every branch scores 8.5 at once (good enough at
depth 1) and so does the whole research; on the "complex" one a branch scores 3.5 at depth 1 and gains 1.5 a
level, and the research scores 5 until its first gap-filling round is done, then 8. Fixed mode never asks the
evaluator, so its runs are the same for both requests. Model calls and dollars are read from the recorded calls
(`LlmCall`), at the price table's gpt-4o-mini price, so they count the memory agent and the evaluator too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# name -> (branch score by (depth, round), research score by rounds done)
REQUESTS = {
    "simple": (lambda depth, round_: 8.5, lambda rounds: 8.5),
    "complex": (lambda depth, round_: 2.0 + 1.5 * depth, lambda rounds: 5.0 if rounds == 0 else 8.0),
}
MODES = ("fixed", "adaptive")


@dataclass
class ModeRun:
    request: str
    mode: str
    wall: float
    calls: int
    tokens: int
    cost_usd: float
    queries: int
    depth_reached: int
    gap_rounds: int
    status: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_one(stack: Any, owner: Any, latencies: Any, request: str, mode: str, shape: tuple[int, int], timeout: float):
    """One research of the request in the mode, on the running workers; returns its ModeRun."""
    from django.db.models import Max

    from bench import engine
    from research.models import LlmCall, Research, SerpQuery

    model = stack.fakes.prepare(latencies)
    model.branch_score, model.research_score = REQUESTS[request]
    research_id = engine.queue_research(owner)
    queued_at = engine.start(research_id, shape[0], shape[1], mode=mode)
    engine.wait(research_id, timeout)
    # Annotated with the sums of its calls (with_usage), which the model's type does not know.
    research: Any = Research.objects.with_usage().get(pk=research_id)
    queries = SerpQuery.objects.filter(research_id=research_id)
    end = research.finished_at or research.updated_at
    return ModeRun(
        request=request,
        mode=mode,
        wall=(end - queued_at).total_seconds(),
        # The follow-up questions were never asked (the bench starts from answers), so every call is the run's.
        calls=LlmCall.objects.filter(research_id=research_id).count(),
        tokens=research.prompt_tokens + research.completion_tokens,
        cost_usd=float(research.cost_usd),
        queries=queries.count(),
        depth_reached=queries.aggregate(deepest=Max("depth"))["deepest"] or 0,
        gap_rounds=research.gap_rounds,
        status=research.status,
    )


def verdict(runs: dict[tuple[str, str], list[ModeRun]], median: Any) -> tuple[float, float]:
    """(share of calls saved on the simple request, mean extra cost over both requests), adaptive vs fixed."""

    def med(request: str, mode: str, attribute: str) -> float:
        return median([getattr(run, attribute) for run in runs[(request, mode)]])

    saved = 1 - med("simple", "adaptive", "calls") / med("simple", "fixed", "calls")
    extra = [med(request, "adaptive", "cost_usd") / med(request, "fixed", "cost_usd") - 1 for request in REQUESTS]
    return saved, sum(extra) / len(extra)
