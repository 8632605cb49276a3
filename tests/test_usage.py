"""Every model request is recorded and priced, whatever came of it: failed, retried and re-asked ones too."""

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import psycopg
import pytest
from django.db import connection
from django.db.models import Sum

from devtools.fakes import FakeLLM
from research.control import services
from research.models import CallOutcome, LlmCall, Research, UsageTally
from research.record.usage import Usage, budget_state, cost_of, record_call, totals, usage_of, with_usage
from tests.support.databases import database_dsn
from tests.support.factories import running_research, spend
from workers.pipeline.followups import generate_followups

pytestmark = pytest.mark.django_db


def write_questions(user, n: int = 2) -> Research:
    """A draft with its follow-up questions written by their step, run here (no worker: this test is not
    transactional, so the draft's own step is never queued)."""
    research = services.create_draft(user, "How do heat pumps perform in cold climates?", n)
    assert len(generate_followups(research.pk)) == n
    return Research.objects.with_usage().get(pk=research.pk)


def test_failed_and_retried_requests_are_recorded_and_counted(user, fakes, fake_llm: FakeLLM, settings) -> None:
    # given a model that fails twice with a 503, then answers once with invalid JSON, then answers well
    settings.LLM_PRICES = {**settings.LLM_PRICES, settings.LLM_MODEL: (0.15, 0.60)}
    fake_llm.fail_next(2, status=503, retry_after=0.01)
    fake_llm.invalid_json_next(1)
    # when the follow-up questions are written
    research = write_questions(user)
    # then all four requests were recorded in order, each with its outcome
    calls = list(LlmCall.objects.filter(research=research).order_by("id"))
    assert [(call.attempt, call.outcome) for call in calls] == [
        (1, CallOutcome.ERROR),
        (2, CallOutcome.ERROR),
        (3, CallOutcome.INVALID_OUTPUT),
        (4, CallOutcome.OK),
    ]
    assert {call.agent for call in calls} == {"prompt_analyzer"}
    assert all(call.user_id == research.owner_id for call in calls)
    # the failed requests cost nothing; the invalid answer was paid for, and counts
    assert calls[0].prompt_tokens == calls[1].prompt_tokens == 0
    assert calls[2].prompt_tokens > 0 and calls[3].prompt_tokens > 0
    totals = LlmCall.objects.filter(research=research).aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert (research.prompt_tokens, research.completion_tokens) == (totals["p"], totals["c"])


def test_cost_is_the_price_table_applied_to_each_recorded_request(
    api, user, fakes, fake_llm: FakeLLM, settings
) -> None:
    # given a known price: $0.15 per million prompt tokens, $0.60 per million completion tokens
    settings.LLM_PRICES = {settings.LLM_MODEL: (0.15, 0.60)}
    fake_llm.invalid_json_next(1)
    research = write_questions(user)
    calls = list(LlmCall.objects.filter(research=research))
    assert len(calls) == 2
    # then every call's cost is exact, and the research's cost is their sum
    for call in calls:
        expected = (Decimal("0.15") * call.prompt_tokens + Decimal("0.60") * call.completion_tokens) / 1_000_000
        assert call.cost_usd == expected.quantize(Decimal("0.000001"))
    assert research.cost_usd == sum(call.cost_usd for call in calls)
    snapshot = api.get(f"/api/research/{research.pk}").json()
    assert snapshot["research"]["usage"]["cost_usd"] == float(research.cost_usd)


def test_a_model_without_a_price_has_an_unknown_cost(api, user, fakes, fake_llm: FakeLLM, settings) -> None:
    settings.LLM_PRICES = {}
    research = write_questions(user)
    assert LlmCall.objects.get(research=research).cost_usd is None
    assert research.unpriced_calls == 1
    snapshot = api.get(f"/api/research/{research.pk}").json()
    assert snapshot["research"]["usage"]["cost_usd"] is None
    assert snapshot["research"]["usage"]["prompt_tokens"] > 0


def test_cost_of_rounds_to_the_micro_dollar(settings) -> None:
    settings.LLM_PRICES = {"m": (2.5, 10.0)}
    assert cost_of("m", 1_000_000, 0) == Decimal("2.5")
    assert cost_of("m", 1, 1) == Decimal("0.000012")  # 0.0000125, rounded half to even
    assert cost_of("unknown", 1, 1) is None


@pytest.mark.django_db(transaction=True)
def test_recording_a_call_waits_on_no_research_row(user, settings) -> None:
    # given a research whose row another transaction holds, as a tree transaction's last statement holds it to
    # its commit, and a budget, so that the check after the call reads the sums
    settings.LLM_PRICES = {"m": (1.0, 2.0)}
    research = Research.objects.create(owner=user, prompt="p", title="t", budget_tokens=10_000, budget_usd=1)
    record_call(research.pk, "website_analyzer", "m", 100, 10, 1, CallOutcome.OK)
    with psycopg.connect(**database_dsn()) as holder:
        holder.execute("UPDATE research_research SET quotes_dropped = quotes_dropped + 1 WHERE id = %s", [research.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # waiting on the row would fail, not hang
        # when a call ends meanwhile
        state = record_call(research.pk, "website_analyzer", "m", 200, 20, 1, CallOutcome.OK)
        holder.rollback()
    # then it was recorded at once, and the budgets read the sums of both calls
    assert state is not None and (state.prompt_tokens, state.completion_tokens) == (300, 30)
    assert state.cost_usd == Decimal("0.000360")
    assert totals(research.pk) == (300, 30, Decimal("0.000360"), 0)
    assert budget_state(research.pk) == state
    # and a research with no such budget reads no call at all: nothing could be reached
    Research.objects.filter(pk=research.pk).update(budget_tokens=None, budget_usd=None)
    assert budget_state(research.pk)[-3:] == (0, 0, 0)


def test_totals_sum_every_call_and_count_the_unpriced_ones(user, settings) -> None:
    # given a research with two priced calls and one of a model without a price, and another research's call
    settings.LLM_PRICES = {"m": (1.0, 2.0)}
    research = Research.objects.create(owner=user, prompt="p", title="t")
    other = Research.objects.create(owner=user, prompt="p", title="t")
    record_call(research.pk, "website_analyzer", "m", 100, 10, 1, CallOutcome.OK)
    record_call(research.pk, "website_analyzer", "m", 200, 20, 1, CallOutcome.OK)
    record_call(research.pk, "report_writer", "unpriced", 1000, 100, 1, CallOutcome.OK)
    record_call(other.pk, "website_analyzer", "m", 7, 7, 1, CallOutcome.OK)
    # then the totals are the research's own, the unknown price counted apart
    assert totals(research.pk) == (1300, 130, Decimal("0.000360"), 1)
    assert totals(Research.objects.create(owner=user, prompt="p", title="t").pk) == (0, 0, Decimal(0), 0)


@pytest.mark.parametrize("calls", [[], [(100, 20, "0.001250"), (7, 3, None), (1, 0, "0.000002")]])
def test_with_usage_reads_the_research_and_its_totals_as_the_orm_does(user, calls) -> None:
    # given a research with values of every kind a column holds, and some calls (none; priced and unpriced)
    research = running_research(user, breadth=2, depth=1)
    Research.objects.filter(pk=research.pk).update(budget_usd="1.2500", report_outline={"sections": [{"t": "Ä"}]})
    for prompt, completion, usd in calls:
        spend(research, prompt, completion, usd)
    # when the push and the snapshot read it with its totals
    read = with_usage(research.pk)
    # then it holds what the ORM's annotated read gives, field by field and total by total, of the same types
    expected = Research.objects.with_usage().get(pk=research.pk)
    assert not read._state.adding
    for field in Research._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
    for name in Usage._fields:
        assert (getattr(read, name), type(getattr(read, name))) == (
            getattr(expected, name),
            type(getattr(expected, name)),
        ), name
    assert usage_of(read) == totals(research.pk)
    # and a research that is gone is not found, as with the ORM
    Research.objects.filter(pk=research.pk).delete()
    with pytest.raises(Research.DoesNotExist):
        with_usage(research.pk)


@pytest.mark.django_db(transaction=True)
def test_calls_from_many_connections_add_up_in_a_few_tallies(user, settings) -> None:
    # given a research with budgets, so that every call reads the sums back
    settings.LLM_PRICES = {"m": (1.0, 2.0)}
    research = Research.objects.create(owner=user, prompt="p", title="t", budget_tokens=10**6, budget_usd=10)

    def calls(worker: int) -> None:
        try:
            for i in range(25):
                model = "unpriced" if i == 0 else "m"
                record_call(research.pk, "website_analyzer", model, 10 + worker, i, 1, CallOutcome.OK)
        finally:
            connection.close()

    # when 8 threads, each on its own database connection, record 25 calls each at once
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(calls, range(8)))
    # then the totals read from the tallies are the sums over the 200 calls, unpriced ones counted apart
    rows = LlmCall.objects.filter(research=research)
    assert rows.count() == 200
    expected = rows.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"), usd=Sum("cost_usd"))
    assert totals(research.pk) == (expected["p"], expected["c"], expected["usd"], 8)
    assert with_usage(research.pk).prompt_tokens == expected["p"]
    assert budget_state(research.pk).prompt_tokens == expected["p"]
    # in one tally row per connection at most, however many calls
    assert 1 <= UsageTally.objects.filter(research=research).count() <= 8
