"""Adaptive mode on the real stack: each branch is reviewed when its websites are done and goes deeper only while
the evaluator finds it short of the threshold and improving; the whole research's coverage may add gap-filling
rounds before the report. The evaluator's scores are scripted in the fake model (devtools/fakes/behaviours.py)."""

import json
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.utils import timezone

from devtools.processes import wait_until
from devtools.servers import WorkerPool, celery_app_for, process_env
from research.models import (
    Document,
    Event,
    Extract,
    FollowUpQuestion,
    LlmCall,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record.planning import gap_round_queries, total_queries
from tests.support.e2e import WORKER_ENV, wait_finished
from tests.support.private_services import Beat, PrivateRedis
from workers.agents import extractive
from workers.agents.evaluator import Learning
from workers.pipeline import review

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "How do heat pumps perform in cold climates?"
UNFINISHED = [QueryStatus.PENDING, QueryStatus.SEARCHING, QueryStatus.SCRAPING, QueryStatus.REVIEWING]


def post_start(api, breadth: int, depth: int, **fields) -> object:
    body = {
        "prompt": PROMPT,
        "questions": [{"question": "Which climates?", "answer": "Nordic"}],
        "breadth": breadth,
        "depth": depth,
        **fields,
    }
    return api.post("/api/research/start", data=json.dumps(body), content_type="application/json")


def start_adaptive(api, breadth: int, depth: int, **fields) -> str:
    response = post_start(api, breadth, depth, mode="adaptive", **fields)
    assert response.status_code == 202, response.content
    return response.json()["research_id"]


def events(research_id: str, event_type: str) -> list[dict]:
    rows = Event.objects.filter(research_id=research_id, type=event_type).order_by("seq")
    return list(rows.values_list("data", flat=True))


def assert_reported_once_with_verified_citations(research: Research) -> None:
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert Document.objects.filter(research=research, kind="report").count() == 1
    assert len(events(research.pk, "report_writing_start")) == 1
    report = Document.objects.get(research=research, kind="report")
    assert report.stats["citations"] > 0 and report.stats["citations_dropped"] == 0
    for extract in Extract.objects.filter(research=research).select_related("website__page"):
        assert " ".join(extract.quote.split()) in " ".join(extract.website.page.text.split())
    assert not SerpQuery.objects.filter(research=research, status__in=UNFINISHED).exists()
    assert research.pending_queries == 0
    seqs = list(Event.objects.filter(research=research).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_adaptive_scoring_9_stops_every_branch_at_depth_1(api, workers, research_model, fake_llm) -> None:
    # given an evaluator that finds every branch, and the research as a whole, good (9 of 10)
    research_model.branch_score = lambda depth, round_: 9
    research_model.research_score = lambda rounds: 9
    # when an adaptive 4x4 research runs
    research = wait_finished(start_adaptive(api, 4, 4))
    # then every top-level branch stops at once on the threshold: 4 queries, no deeper level
    assert_reported_once_with_verified_citations(research)
    queries = list(SerpQuery.objects.filter(research=research))
    assert len(queries) == 4 and {q.depth for q in queries} == {1}
    assert {(q.status, q.decision, q.decision_reason, q.score) for q in queries} == {("done", "stop", "threshold", 9)}
    assert all(
        q.gaps and set(q.dimensions) == {"completeness", "depth", "reliability", "actionability"} for q in queries
    )
    evaluated = events(research.pk, "query_evaluated")
    assert sorted(e["query_id"] for e in evaluated) == sorted(q.pk for q in queries)
    assert {(e["decision"], e["decision_reason"]) for e in evaluated} == {("stop", "threshold")}
    assert [e["round_added"] for e in events(research.pk, "research_evaluated")] == [None]
    assert research.mode == "adaptive" and research.min_depth == 1 and research.quality_threshold == 7
    assert research.score == 9 and research.gap_rounds == 0


def test_adaptive_rising_scores_reach_the_maximum_depth(api, workers, research_model) -> None:
    # given branch scores that rise by a point per level from 3 (3 at depth 1, 4 at depth 2, ...)
    research_model.branch_score = lambda depth, round_: 2 + depth
    research_model.research_score = lambda rounds: 9
    # when an adaptive research with maximum depth 4 runs
    research = wait_finished(start_adaptive(api, 2, 4))
    # then every branch goes on to depth 4 and stops there, on max_depth: the fixed tree's exact size
    assert_reported_once_with_verified_citations(research)
    queries = list(SerpQuery.objects.filter(research=research))
    assert len(queries) == total_queries(2, 4)
    for query in queries:
        assert query.score == 2 + query.depth
        if query.depth < 4:
            assert (query.decision, query.decision_reason) == ("continue", "continue"), query.depth
        else:
            assert (query.decision, query.decision_reason) == ("stop", "max_depth")
    leaves = [q for q in queries if not any(c.parent_id == q.pk for c in queries)]
    assert {q.depth for q in leaves} == {4}


def test_adaptive_flat_scores_stop_on_diminishing_returns(api, workers, research_model, fake_llm) -> None:
    # given an evaluator that scores every branch 3, below the threshold, and never better
    research_model.branch_score = lambda depth, round_: 3
    research_model.research_score = lambda rounds: 9
    # when an adaptive 2x4 research runs
    research = wait_finished(start_adaptive(api, 2, 4))
    # then every branch goes past depth 1 (no parent to compare with) and stops at depth 2: no improvement
    assert_reported_once_with_verified_citations(research)
    queries = list(SerpQuery.objects.filter(research=research))
    by_depth = Counter(q.depth for q in queries)
    assert by_depth == {1: 2, 2: 2}
    assert {(q.decision, q.decision_reason) for q in queries if q.depth == 1} == {("continue", "continue")}
    assert {(q.decision, q.decision_reason) for q in queries if q.depth == 2} == {("stop", "diminishing_returns")}
    # the children were planned from their parent's gaps and directions
    child_prompts = [
        call["messages"][-1]["content"] for call in fake_llm.calls("serp_queries") if "Depth 1 query:" in str(call)
    ]
    assert child_prompts and all("gap at depth 1" in p and "direction at depth 1" in p for p in child_prompts)


def test_adaptive_min_depth_keeps_branches_going(api, workers, research_model) -> None:
    # given an evaluator that finds every branch good, and a minimum depth of 2
    research_model.branch_score = lambda depth, round_: 9
    research_model.research_score = lambda rounds: 9
    # when the research runs
    research = wait_finished(start_adaptive(api, 2, 3, min_depth=2, quality_threshold=8))
    # then depth 1 may not stop on quality; depth 2 does
    assert_reported_once_with_verified_citations(research)
    queries = list(SerpQuery.objects.filter(research=research))
    assert Counter(q.depth for q in queries) == {1: 2, 2: 2}
    assert {q.decision_reason for q in queries if q.depth == 2} == {"threshold"}


@pytest.mark.parametrize(
    ("research_scores", "rounds"),
    [([3, 3, 3, 3], 2), ([3, 8], 1)],
    ids=["always-short", "good-after-one-round"],
)
def test_adaptive_coverage_adds_gap_rounds_up_to_the_maximum(
    api, workers, research_model, fake_llm, research_scores, rounds
) -> None:
    # given branches that stop at once, and a research-level score below the threshold (then, maybe, above it)
    research_model.branch_score = lambda depth, round_: 9
    research_model.research_score = lambda done: research_scores[done]
    # when an adaptive 2x2 research runs
    research = wait_finished(start_adaptive(api, 2, 2))
    # then each short evaluation adds half the breadth (rounded up) of new depth-1 branches, never more than
    # ADAPTIVE_MAX_GAP_ROUNDS rounds
    assert settings.ADAPTIVE_MAX_GAP_ROUNDS == 2
    assert_reported_once_with_verified_citations(research)
    queries = list(SerpQuery.objects.filter(research=research))
    assert gap_round_queries(2) == 1
    assert Counter(q.round for q in queries) == {0: 2, **{r: 1 for r in range(1, rounds + 1)}}
    assert {q.depth for q in queries} == {1} and len({q.position for q in queries}) == len(queries)
    assert research.gap_rounds == rounds
    added = [e["round_added"] for e in events(research.pk, "research_evaluated")]
    expected = list(range(1, rounds + 1)) + ([None] if rounds < settings.ADAPTIVE_MAX_GAP_ROUNDS else [])
    assert added == expected
    # the gap-filling queries were planned from the research-level gaps
    gap_prompts = [c for c in fake_llm.calls("serp_queries") if "coverage gap after round" in str(c)]
    assert len(gap_prompts) >= rounds


def test_fixed_mode_keeps_exact_totals_and_never_calls_the_evaluator(api, workers, research_model, fake_llm) -> None:
    # given an evaluator that would stop every branch
    research_model.branch_score = lambda depth, round_: 10
    # when a fixed-mode research runs (the default)
    response = post_start(api, 3, 3)
    assert response.status_code == 202, response.content
    research = wait_finished(response.json()["research_id"])
    # then its tree has exactly its planned size, every query was reviewed without being scored
    assert_reported_once_with_verified_citations(research)
    assert SerpQuery.objects.filter(research=research, status="done").count() == total_queries(3, 3) == 15
    assert not SerpQuery.objects.filter(research=research).exclude(decision="").exists()
    assert fake_llm.count("branch_evaluation") == 0 and fake_llm.count("research_evaluation") == 0
    assert research.mode == "fixed" and research.min_depth is None and research.quality_threshold is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"mode": "adaptive", "min_depth": 4}, "min_depth"),
        ({"mode": "adaptive", "min_depth": 0}, "min_depth"),
        ({"mode": "adaptive", "min_depth": "2"}, "min_depth"),
        ({"mode": "adaptive", "quality_threshold": 11}, "quality_threshold"),
        ({"mode": "adaptive", "quality_threshold": 0}, "quality_threshold"),
        ({"mode": "adaptive", "quality_threshold": True}, "quality_threshold"),
        ({"mode": "deep"}, "mode"),
        ({"mode": ["adaptive"]}, "mode"),
        ({"min_depth": 1}, "min_depth"),
        ({"mode": "fixed", "quality_threshold": 7}, "quality_threshold"),
    ],
)
def test_adaptive_start_validation_names_the_field(api, published, fields, field) -> None:
    # when a start asks for a mode or adaptive settings it cannot have (depth 3)
    response = post_start(api, 2, 3, **fields)
    # then it is refused with the field's name, and nothing is queued
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field
    assert not published
    assert not Research.objects.exclude(status=ResearchStatus.DRAFT).exists()


def test_adaptive_start_stores_its_settings(api, published) -> None:
    response = post_start(api, 2, 3, mode="adaptive", min_depth=3, quality_threshold=10)
    assert response.status_code == 202, response.content
    research = Research.objects.get(pk=response.json()["research_id"])
    assert (research.mode, research.min_depth, research.quality_threshold) == ("adaptive", 3, 10)


def test_adaptive_cancel_during_evaluation_stops_everything(api, workers, research_model, fake_llm) -> None:
    # given an adaptive research whose branch evaluations are slow
    fake_llm.delays["branch_evaluation"] = 2.0
    research_id = start_adaptive(api, 2, 3)
    wait_until(lambda: fake_llm.count("branch_evaluation") >= 1, timeout=60, message="an evaluation under way")
    # when it is cancelled while a branch is being evaluated
    assert api.post(f"/api/research/{research_id}/cancel").status_code == 200
    # every evaluation asked for has come back (each model call is recorded as it ends, cancelled or not)
    wait_until(
        lambda: (
            LlmCall.objects.filter(research_id=research_id, agent="evaluator").count()
            >= fake_llm.count("branch_evaluation")
        ),
        timeout=60,
        message="the evaluations in flight to end",
    )
    # then nothing lands after the cancel: no evaluation, no query, no report, nothing left unfinished
    research = Research.objects.get(pk=research_id)
    assert research.status == ResearchStatus.CANCELLED
    seq = Event.objects.get(research_id=research_id, type="research_cancelled").seq
    later = set(Event.objects.filter(research_id=research_id, seq__gt=seq).values_list("type", flat=True))
    assert not later & {"query_evaluated", "new_serp_query", "report_writing_start"}
    assert not SerpQuery.objects.filter(research_id=research_id, status__in=UNFINISHED).exists()
    assert not Document.objects.filter(research_id=research_id, kind="report").exists()


def test_adaptive_duplicate_reviews_and_coverage_change_nothing(api, workers, research_model) -> None:
    # given a finished adaptive research
    research_model.branch_score = lambda depth, round_: 3
    research_model.research_score = lambda rounds: 9
    research = wait_finished(start_adaptive(api, 2, 2))
    assert_reported_once_with_verified_citations(research)
    before = list(Event.objects.filter(research=research).values_list("seq", "type"))
    # when every review and the coverage evaluation are delivered again
    for query_id in SerpQuery.objects.filter(research=research).values_list("pk", flat=True):
        review.review_query(query_id, task_id="again")
    review.evaluate_coverage(str(research.pk), task_id="again")
    # then nothing changes
    assert list(Event.objects.filter(research=research).values_list("seq", "type")) == before


RECOVERY_ENV = {"LEASE_SECONDS": "4", "SWEEP_INTERVAL": "1", "MAX_ATTEMPTS": "5", "QUEUE_GRACE_SECONDS": "4"}


@pytest.fixture
def stack(internet, transactional_db, research_model) -> Iterator[tuple[WorkerPool, PrivateRedis]]:
    """Workers and the sweeper on a private Redis, so a killed worker disturbs no other test."""
    private = PrivateRedis().start()
    env = process_env({**WORKER_ENV, **internet, **RECOVERY_ENV, "REDIS_URL": private.url})
    pool = WorkerPool(env, count=2, concurrency=4, name=f"a{uuid.uuid4().hex[:4]}").start()
    beat = Beat(env).start()
    yield pool, private
    beat.stop()
    pool.stop()
    private.stop()


@pytest.mark.slow
def test_adaptive_worker_killed_mid_evaluation(stack, user, research_model, fake_llm) -> None:
    pool, private = stack
    # given an adaptive research whose evaluations are slow, and branches that go one level deeper
    fake_llm.delays["branch_evaluation"] = 1.5
    research_model.branch_score = lambda depth, round_: 2 + 3 * depth  # 5, then 8: stop on the threshold
    research_model.research_score = lambda rounds: 9
    research = Research.objects.create(
        owner=user,
        prompt=PROMPT,
        title="Heat pumps",
        status=ResearchStatus.QUEUED,
        breadth=2,
        depth=3,
        mode="adaptive",
        min_depth=1,
        quality_threshold=7,
        num_questions=1,
        claimed_at=timezone.now(),
    )
    FollowUpQuestion.objects.create(research=research, position=0, question="Which climates?", answer="Nordic")
    celery_app_for(private.url).send_task("workers.tasks.start_research_task", args=[str(research.pk)])
    # when the worker evaluating a branch is killed with SIGKILL during the model call
    pids = {process.pid: index for index, process in enumerate(pool.processes)}

    def evaluating_worker() -> int | None:
        for claimed_by in SerpQuery.objects.filter(research=research, status=QueryStatus.REVIEWING).values_list(
            "claimed_by", flat=True
        ):
            for pid, index in pids.items():
                if f":{pid}:" in claimed_by:
                    return index
        return None

    wait_until(lambda: evaluating_worker() is not None, timeout=60, message="a branch under evaluation")
    pool.kill(evaluating_worker())
    # then the other worker and the sweeper finish it: every branch reviewed once in the end, one report
    research = wait_finished(str(research.pk), timeout=180)
    assert_reported_once_with_verified_citations(research)
    queries = list(SerpQuery.objects.filter(research=research))
    assert Counter(q.depth for q in queries) == {1: 2, 2: 2}
    assert {(q.depth, q.decision_reason) for q in queries} == {(1, "continue"), (2, "threshold")}
    assert Counter(e["query_id"] for e in events(research.pk, "query_evaluated")) == {q.pk: 1 for q in queries}
    assert not Website.objects.filter(
        research=research, status__in=[WebsiteStatus.PENDING, WebsiteStatus.SCRAPING]
    ).exists()


def test_extractive_evaluator_scores_coverage_and_agreement() -> None:
    # given a branch about heat pump efficiency and defrost cycles, whose learnings cover only the efficiency
    objective = "What the sources state about heat pump efficiency and defrost cycles."
    learned = [
        Learning("Heat pump efficiency falls to a COP of 2.1 at -15 C.", "https://a.example/"),
        Learning("Field tests found heat pump efficiency above 2 in Nordic winters.", "https://b.example/"),
    ]
    # when the offline evaluator judges it, and a branch that learned nothing
    covered = extractive.evaluate_branch(PROMPT, [], "heat pump efficiency", objective, 1, 0, learned)
    empty = extractive.evaluate_branch(PROMPT, [], "heat pump efficiency", objective, 1, 0, [])
    # then what no learning mentions is a gap, and learning more from agreeing pages scores higher
    assert any("defrost" in gap for gap in covered.gaps)
    assert not any("efficiency" in gap for gap in covered.gaps)
    assert covered.score > empty.score and 1 <= empty.score <= covered.score <= 10
    assert set(covered.dimensions) == {"completeness", "depth", "reliability", "actionability"}
