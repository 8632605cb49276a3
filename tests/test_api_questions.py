"""POST /api/research/questions: exactly N questions, stored, with events 1 and 2."""

import json

import pytest

from research.models import Event, FollowUpQuestion, Research, ResearchStatus
from tests.fakes import FakeLLM

pytestmark = pytest.mark.django_db


def post_questions(api, prompt: str = "How do heat pumps perform in cold climates?", n: int = 3):
    return api.post(
        "/api/research/questions",
        data=json.dumps({"prompt": prompt, "num_questions": n}),
        content_type="application/json",
    )


@pytest.mark.parametrize("model_returns", ["too_many", "too_few", "exact"])
def test_questions_returns_exactly_n(api, fakes, fake_llm: FakeLLM, model_returns: str) -> None:
    # given
    n = 4
    fake_llm.array_len = {"too_many": n + 2, "too_few": 1, "exact": None}[model_returns]
    # when
    response = post_questions(api, n=n)
    # then
    assert response.status_code == 201, response.content
    body = response.json()
    assert len(body["questions"]) == n
    assert len(set(body["questions"])) == n
    research = Research.objects.get(pk=body["research_id"])
    assert research.status == ResearchStatus.AWAITING_ANSWERS
    stored = list(
        FollowUpQuestion.objects.filter(research=research).order_by("position").values_list("question", flat=True)
    )
    assert stored == body["questions"]
    events = list(Event.objects.filter(research=research).order_by("seq").values_list("seq", "type"))
    assert events == [(1, "generating_followups"), (2, "followups_generated")]
    assert research.prompt_tokens > 0


def test_questions_sends_json_schema_to_the_model(api, fakes, fake_llm: FakeLLM) -> None:
    post_questions(api, n=2)
    calls = fake_llm.calls("followup_questions")
    assert calls, "the prompt analyzer never reached the model"
    response_format = calls[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["properties"]["questions"]["maxItems"] == 2


def test_questions_falls_back_to_json_object_mode(api, fakes, fake_llm: FakeLLM) -> None:
    fake_llm.supports_json_schema = False
    try:
        response = post_questions(api, n=2)
    finally:
        from workers.clients import llm

        llm._json_object_only.clear()
    assert response.status_code == 201
    assert len(response.json()["questions"]) == 2
    assert fake_llm.calls("followup_questions")[-1]["response_format"]["type"] == "json_object"


def test_questions_retries_transient_model_errors(api, fakes, fake_llm: FakeLLM, settings) -> None:
    fake_llm.fail_next(1, status=429, retry_after=0.1)
    fake_llm.fail_next(1, status=500)
    fake_llm.invalid_json_next(1)
    response = post_questions(api, n=2)
    assert response.status_code == 201
    assert len(response.json()["questions"]) == 2
    assert fake_llm.count() >= 4


def test_questions_model_down_is_502_and_research_failed(api, fakes, fake_llm: FakeLLM, settings) -> None:
    settings.LLM_MAX_RETRIES = 1
    fake_llm.fail_always(503)
    response = post_questions(api, n=2)
    assert response.status_code == 502
    assert "error" in response.json()
    research = Research.objects.get()
    assert research.status == ResearchStatus.FAILED
    # an ended research has its end time, as every other way of ending sets it (the sidebar and the log show it)
    assert research.finished_at is not None and research.finished_at >= research.created_at
    assert list(Event.objects.filter(research=research).values_list("type", flat=True)) == [
        "generating_followups",
        "research_failed",
    ]
