"""The budget of POST /api/research/start: checked like every other input (400 naming the key at fault, nothing
created or queued), stored on the research, the server's defaults standing in for the keys not given."""

import json
from decimal import Decimal

import pytest

from research.control import budgets
from research.models import Research
from research.record.usage import Usage

# Transactional, so on_commit hooks (where tasks are queued) really run: "nothing queued" can fail.
pytestmark = pytest.mark.django_db(transaction=True)

START = {"prompt": "Solid-state batteries", "questions": [{"question": "Why?", "answer": "Curious"}], "breadth": 1}


def start(api, budget, **extra):
    body = {**START, "depth": 1, "budget": budget, **extra}
    return api.post("/api/research/start", data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ([60], "budget"),
        ("60", "budget"),
        (5, "budget"),
        ({"minutes": 5}, "budget.minutes"),
        ({"seconds": 60, "euros": 1}, "budget.euros"),
        ({"seconds": True}, "budget.seconds"),
        ({"seconds": "60"}, "budget.seconds"),
        ({"seconds": 60.5}, "budget.seconds"),
        ({"seconds": 0}, "budget.seconds"),
        ({"seconds": -1}, "budget.seconds"),
        ({"seconds": 86_401}, "budget.seconds"),
        ({"tokens": False}, "budget.tokens"),
        ({"tokens": 0}, "budget.tokens"),
        ({"tokens": 100_000_001}, "budget.tokens"),
        ({"tokens": 1e6}, "budget.tokens"),
        ({"usd": True}, "budget.usd"),
        ({"usd": "1.00"}, "budget.usd"),
        ({"usd": 0}, "budget.usd"),
        ({"usd": -0.5}, "budget.usd"),
        ({"usd": 0.00001}, "budget.usd"),
        ({"usd": 100.01}, "budget.usd"),
    ],
)
def test_bad_budget_is_400_naming_the_key_and_nothing_is_created(api, published, budget, field) -> None:
    response = start(api, budget)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field
    assert not Research.objects.exists()
    assert published == []


def test_usd_budget_with_an_unpriced_model_in_use_is_400(api, published, settings) -> None:
    # given a model without a price for one agent
    settings.LLM_AGENT_MODELS = {**settings.LLM_AGENT_MODELS, "website_analyzer": "house-model-7b"}
    # when
    response = start(api, {"usd": 1})
    # then
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["field"] == "budget.usd" and "house-model-7b" in error["message"]
    assert not Research.objects.exists() and published == []
    # while the other budgets are still fine, and the default dollar budget is left out rather than refused
    settings.RESEARCH_USD_BUDGET = 5
    response = start(api, {"tokens": 1000})
    assert response.status_code == 202, response.content
    research = Research.objects.get(pk=response.json()["research_id"])
    assert (research.budget_tokens, research.budget_usd) == (1000, None)


def test_budget_is_stored_and_defaults_fill_in(api, published, settings) -> None:
    settings.RESEARCH_TIME_BUDGET, settings.RESEARCH_TOKEN_BUDGET, settings.RESEARCH_USD_BUDGET = 600, 0, 2.5
    # a budget with some keys: the others are the defaults (a zero default is no budget)
    response = start(api, {"tokens": 40_000, "usd": 0.25})
    assert response.status_code == 202, response.content
    research = Research.objects.get(pk=response.json()["research_id"])
    assert (research.budget_seconds, research.budget_tokens, research.budget_usd) == (600, 40_000, Decimal("0.25"))
    assert not research.partial and research.stop_reason == ""
    # no budget at all: every default
    response = start(api, None, prompt="Sodium batteries")
    research = Research.objects.get(pk=response.json()["research_id"])
    assert (research.budget_seconds, research.budget_tokens, research.budget_usd) == (600, None, Decimal("2.5"))
    # the snapshot shows it
    snapshot = api.get(f"/api/research/{research.pk}").json()
    assert snapshot["research"]["budget"] == {"seconds": 600, "tokens": None, "usd": 2.5}
    assert snapshot["research"]["partial"] is False and snapshot["research"]["stop_reason"] == ""


def test_the_report_takes_what_is_left_of_a_budget(settings) -> None:
    # given a report writer at $0.15 / $0.60 per million tokens and a 60,000-token report allowance
    settings.LLM_AGENT_MODELS = {**settings.LLM_AGENT_MODELS, "report_writer": "m"}
    settings.LLM_PRICES = {"m": (0.15, 0.60)}
    settings.REPORT_TOKEN_BUDGET = 60_000
    research = Research()
    used = Usage(prompt_tokens=10_000, completion_tokens=2_000, cost_usd=Decimal("0.002"), unpriced_calls=0)
    # no budget: the whole allowance
    assert budgets.report_prompt_tokens(research, used=used) == 60_000
    # tokens: what is left, less the completion's share
    research.budget_tokens = 20_000
    assert budgets.report_prompt_tokens(research, used=used) == 20_000 - 12_000 - budgets.REPORT_COMPLETION_TOKENS
    # dollars: what is left, less the completion's price, at the prompt price
    research.budget_tokens = None
    research.budget_usd = Decimal("0.005")
    completion = Decimal("0.60") * budgets.REPORT_COMPLETION_TOKENS / 1_000_000
    left = int((Decimal("0.003") - completion) * 1_000_000 / Decimal("0.15"))
    assert budgets.report_prompt_tokens(research, used=used) == left
    # nothing left: still enough for a report that says something
    used = used._replace(cost_usd=Decimal("0.005"))
    assert budgets.report_prompt_tokens(research, used=used) == budgets.MIN_REPORT_TOKENS
