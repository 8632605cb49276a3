"""Reviews: a branch's, when its websites are all settled, and the whole research's coverage before its report.

A query whose last website is analysed or failed goes to `reviewing` (workers/pipeline/progress.py). Its review
updates the research memory and, in adaptive mode, asks the evaluator to score the branch's learnings; the score
decides alone whether the branch goes deeper (no level barrier: every branch decides the moment it is done).
The query then ends `done` and is counted off as before: a branch that stops counts off its unplanned subtree,
like a failed one.

When every branch has stopped, an adaptive research's coverage is evaluated (`evaluate_coverage`): below the
quality threshold it adds a round of new depth-1 branches from the gaps, at most ADAPTIVE_MAX_GAP_ROUNDS times,
then hands on to the report.
"""

import logging
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import Max

from research.control import dispatch
from research.models import (
    EventType,
    Extract,
    FollowUpQuestion,
    QueryStatus,
    Research,
    ResearchMode,
    ResearchStatus,
    SerpQuery,
)
from research.record import database, transitions
from research.record.events import record_event
from research.record.memory import open_gaps
from research.record.planning import descendants, gap_round_queries
from research.record.transactions import research_transaction
from research.record.usage import state_of
from workers.agents.common import distinct
from workers.agents.engines import EXTRACTIVE, engine_for
from workers.agents.evaluator import BranchEvaluation, Learning
from workers.clients.llm import charged_to
from workers.pipeline import fencing, heartbeat, memory, progress
from workers.pipeline.fencing import Lease, LeaseLost
from workers.pipeline.lifecycle import running_research
from workers.pipeline.locks import claim_owner, claimable, lease_token, take_lease
from workers.pipeline.progress import CONTINUE, STOP
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)

# Decision reasons of a branch's review.
THRESHOLD, DIMINISHING, MAX_DEPTH = "threshold", "diminishing_returns", "max_depth"
# Learnings of the whole research shown to the coverage evaluation (the earliest, shallowest first).
MAX_RESEARCH_LEARNINGS = 400


def review_query(query_id: int, task_id: str | None = None) -> None:
    """Claim a reviewing query, update the memory, evaluate the branch (adaptive mode), and finish it."""
    query = database.read_instance(SerpQuery, query_id)
    if query is None or query.status != QueryStatus.REVIEWING:
        return
    research = running_research(query.research_id)
    if research is None:
        return
    owner = claim_owner(task_id)
    if not take_lease(SerpQuery, query_id, owner, status=QueryStatus.REVIEWING):
        return  # another delivery is reviewing it
    heartbeat.took_up()  # the claim replaced the task's reservation
    with fencing.holding(Lease(SerpQuery, query_id, lease_token(owner))):
        _review(research, query, research.engine)


def review_failed(query_id: int, error: BaseException) -> None:
    """The review's model calls failed for good: the branch is judged without a model, so it still decides."""
    query = SerpQuery.objects.filter(pk=query_id, status=QueryStatus.REVIEWING).first()
    research = running_research(query.research_id) if query is not None else None
    if query is None or research is None:
        return
    log.warning("review of query %s failed (%s); judged by the extractive evaluator", query_id, error)
    _review(research, query, EXTRACTIVE, remember=False)


def _review(research: Research, query: SerpQuery, engine: str, remember: bool = True) -> None:
    if remember:
        try:
            memory.remember(query.pk, research, query.objective, state_of(research))
        except (OperationalError, InterfaceError, LeaseLost):
            raise  # the database, not the memory, failed (or the lease was taken over): not the memory's failure
        except Exception:
            # The memory serves later planning and the report; the branch's own result stands without it.
            log.exception("memory update of query %s failed", query.pk)
    verdict: dict[str, Any] = {}
    if research.mode == ResearchMode.ADAPTIVE:
        evaluation = _evaluate_branch(research, query, engine)
        decision, reason = decide(research, query, evaluation.score)
        verdict = {
            "score": evaluation.score,
            "dimensions": evaluation.dimensions,
            "gaps": evaluation.gaps,
            "directions": evaluation.directions,
            "decision": decision,
            "decision_reason": reason,
        }
    with tree_transaction(research.pk):
        finished = progress.query_finished(
            query.pk, QueryStatus.DONE, from_statuses=[QueryStatus.REVIEWING], review=verdict
        )
        if finished and verdict:
            record_event(
                research.pk,
                EventType.QUERY_EVALUATED,
                {
                    "query_id": query.pk,
                    "score": verdict["score"],
                    "decision": verdict["decision"],
                    "decision_reason": verdict["decision_reason"],
                    "gaps": verdict["gaps"],
                },
            )


def _evaluate_branch(research: Research, query: SerpQuery, engine: str) -> BranchEvaluation:
    rows = Extract.objects.filter(website__query_id=query.pk).order_by("website__position", "position")
    learnings = [Learning(fact, url) for fact, url in rows.values_list("fact", "website__url")[:40]]
    with charged_to(research.pk):
        evaluation = engine_for(engine).evaluate_branch(
            research.prompt,
            FollowUpQuestion.answers_of(research.pk),
            query.query,
            query.objective,
            query.depth,
            query.round,
            learnings,
        )
    return evaluation


def decide(research: Research, query: SerpQuery, score: float) -> tuple[str, str]:
    """Stop or go deeper, and why: good enough (from min_depth on), no longer improving on its parent (from
    min_depth on; a depth-1 query has no parent), or at the maximum depth; otherwise continue."""
    min_depth = research.min_depth or 1
    threshold = research.quality_threshold or settings.ADAPTIVE_QUALITY_THRESHOLD
    deep_enough = query.depth >= min_depth
    if deep_enough and score >= threshold:
        return STOP, THRESHOLD
    parent_score = (
        SerpQuery.objects.filter(pk=query.parent_id).values_list("score", flat=True).first()
        if query.parent_id
        else None
    )
    if deep_enough and parent_score is not None and score - parent_score < settings.ADAPTIVE_MIN_IMPROVEMENT:
        return STOP, DIMINISHING
    if query.depth >= (research.depth or 1):
        return STOP, MAX_DEPTH
    return CONTINUE, CONTINUE


def evaluate_coverage(research_id: str, task_id: str | None = None) -> None:
    """Every branch has stopped: score the research's learnings as a whole; below the threshold add a round of
    gap-filling depth-1 branches, else hand on to the report. Conditional on the round it read, under the
    research row lock, so a duplicate delivery adds nothing."""
    research = Research.objects.filter(pk=research_id).first()
    if research is None or research.status != ResearchStatus.RUNNING or research.pending_queries > 0:
        return
    if dispatch.tree_finished_step(research_id) != dispatch.COVERAGE:
        return  # evaluated already (the report is queued), or stopped by a budget
    owner = claim_owner(task_id)
    token = lease_token(owner)
    if not transitions.claim(
        research_id, claimable(owner), token, status=ResearchStatus.RUNNING, pending_queries__lte=0
    ):
        return  # another delivery is evaluating it
    with fencing.holding(Lease(Research, research_id, token)):
        _cover(research, research.engine)


def coverage_failed(research_id: str, error: BaseException) -> None:
    """The coverage evaluation failed for good: the report is written from what the branches found."""
    log.warning("coverage evaluation of research %s failed (%s); writing the report", research_id, error)
    with research_transaction(research_id):
        if transitions.hand_on(research_id, status=ResearchStatus.RUNNING, pending_queries__lte=0):
            dispatch.REPORT.on_commit(str(research_id))


def _cover(research: Research, engine: str) -> None:
    rounds = research.gap_rounds
    rows = Extract.objects.filter(research_id=research.pk).order_by("website__query__depth", "website_id", "position")
    learnings = [Learning(fact, url) for fact, url in rows.values_list("fact", "website__url")[:MAX_RESEARCH_LEARNINGS]]
    answers = FollowUpQuestion.answers_of(research.pk)
    threshold = research.quality_threshold or settings.ADAPTIVE_QUALITY_THRESHOLD
    with charged_to(research.pk):
        evaluation = engine_for(engine).evaluate_research(research.prompt, answers, rounds, learnings)
    planned = []
    if evaluation.score < threshold:
        focus = distinct([*open_gaps(research.pk), *evaluation.gaps])
        with charged_to(research.pk):
            planned = engine_for(engine).plan_queries(
                research.prompt, answers, [], gap_round_queries(research.breadth or 1), focus=focus
            )

    with research_transaction(research.pk):
        fencing.check()
        still = Research.objects.filter(
            pk=research.pk, status=ResearchStatus.RUNNING, stop_reason="", pending_queries__lte=0, gap_rounds=rounds
        ).exists()
        if not still or dispatch.tree_finished_step(research.pk) != dispatch.COVERAGE:
            return  # cancelled, stopped or evaluated by another delivery meanwhile
        data: dict[str, Any] = {"score": evaluation.score, "gaps": evaluation.gaps, "round_added": None}
        if not planned:
            transitions.evaluated(research.pk, evaluation.score)
            record_event(research.pk, EventType.RESEARCH_EVALUATED, data)
            dispatch.REPORT.on_commit(str(research.pk))
            return
        round_ = rounds + 1
        breadth, depth = research.breadth or 1, research.depth or 1
        per_branch = 1 + descendants(breadth, depth, 1)
        last = SerpQuery.objects.filter(research_id=research.pk, parent__isnull=True).aggregate(last=Max("position"))
        offset = (last["last"] if last["last"] is not None else -1) + 1
        transitions.add_gap_round(research.pk, evaluation.score, round_, per_branch * len(planned))
        created = SerpQuery.objects.bulk_create(
            SerpQuery(
                research_id=research.pk,
                depth=1,
                position=offset + index,
                round=round_,
                query=item.query,
                objective=item.objective,
            )
            for index, item in enumerate(planned)
        )
        record_event(research.pk, EventType.RESEARCH_EVALUATED, {**data, "round_added": round_})
        for query in created:
            record_event(
                research.pk,
                EventType.NEW_SERP_QUERY,
                {
                    "query_id": query.pk,
                    "parent_id": None,
                    "depth": 1,
                    "round": round_,
                    "query": query.query,
                    "objective": query.objective,
                },
            )
        dispatch.SEARCH.each_on_commit([query.pk for query in created], research.pk)
