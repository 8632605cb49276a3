"""Ask a completed research (POST /api/research/<id>/ask): a worker answers from the research's own findings and
stored page text, every sentence cited and checked as the report's are, and says so when the sources do not
answer."""

import html
import json
import re

import pytest

from devtools.fakes.behaviours import FABRICATED_QUOTE, FABRICATED_URL
from devtools.processes import wait_until
from research.models import AnswerStatus, AskedQuestion, Event, LlmCall, Page, Research, ResearchStatus, Website
from research.text.quotes import PageText
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import build_tree, running_research, spend
from tests.support.snapshot_schema import validate_snapshot
from workers.pipeline.ask import UNANSWERED
from workers.pipeline.citations import cited_urls

pytestmark = pytest.mark.django_db(transaction=True)

# A citation with the quote it rests on as its link title: [[n]](url "quote").
_CITATION_TITLE = re.compile(r'\]\(\S+ "([^"]*)"\)')


def ask(client, research_id, **body):
    return client.post(f"/api/research/{research_id}/ask", json.dumps(body), content_type="application/json")


def test_a_question_joins_the_conversation_and_goes_to_a_worker(api, user, published) -> None:
    # given a completed research
    research = build_tree(user, 2, 1)
    # when its owner asks a question
    response = ask(api, research.pk, question="  How cold can it get?  ")
    # then it waits for a worker, in the snapshot's conversation
    assert response.status_code == 202, response.content
    asked = AskedQuestion.objects.get(pk=response.json()["id"])
    assert (asked.question, asked.status, asked.position) == ("How cold can it get?", AnswerStatus.PENDING, 1)
    assert published == ["workers.tasks.answer_question_task"]
    snapshot = api.get(f"/api/research/{research.pk}").json()
    validate_snapshot(snapshot)
    assert snapshot["version"] == 4
    assert [(c["id"], c["question"], c["status"], c["answer"]) for c in snapshot["conversation"]] == [
        (asked.pk, "How cold can it get?", "pending", "")
    ]
    # and a second question comes after it
    assert AskedQuestion.objects.get(pk=ask(api, research.pk, question="And why?").json()["id"]).position == 2


def test_ask_refuses_what_it_cannot_do(api, stranger, user, published) -> None:
    done = build_tree(user, 2, 1)
    for body, field in (
        ({}, "question"),
        ({"question": "   "}, "question"),
        ({"question": "x" * 2001}, "question"),
        ({"question": 3}, "question"),
        ({"question": "q", "model": "x"}, "model"),
    ):
        response = ask(api, done.pk, **body)
        assert response.status_code == 400 and response.json()["error"]["field"] == field, (body, response.content)
    assert api.post(f"/api/research/{done.pk}/ask", "nope", content_type="application/json").status_code == 400
    assert ask(stranger, done.pk, question="mine?").status_code == 404
    assert ask(api, running_research(user, 1, 1).pk, question="too soon?").status_code == 409
    assert api.get(f"/api/research/{done.pk}/ask").status_code == 405
    Research.objects.filter(pk=done.pk).update(budget_tokens=1000)
    spend(done, 900, 100)
    refused = ask(api, done.pk, question="one more?")
    assert refused.status_code == 409 and "token budget (1,000 tokens)" in refused.json()["error"]["message"]
    assert not AskedQuestion.objects.exists() and published == []


def answer_of(api, research_id, question: str) -> AskedQuestion:
    response = ask(api, research_id, question=question)
    assert response.status_code == 202, response.content
    question_id = response.json()["id"]
    wait_until(
        lambda: AskedQuestion.objects.get(pk=question_id).status in (AnswerStatus.ANSWERED, AnswerStatus.FAILED),
        timeout=60,
        message="the answer",
    )
    return AskedQuestion.objects.get(pk=question_id)


def test_questions_are_answered_from_the_research_and_checked_like_the_report(
    api, user, workers, research_model, fake_llm
) -> None:
    # given a completed 2x2 research
    research_id = start_research(api, 2, 2)
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    analysed = set(Website.objects.filter(research_id=research_id, status="analyzed").values_list("url", flat=True))
    texts = {
        url: PageText(text) for url, text in Page.objects.filter(research_id=research_id).values_list("url", "text")
    }
    calls = LlmCall.objects.filter(user=user).count()

    # when its owner asks about what it found
    asked = answer_of(api, research_id, "What did the sources measure?")
    # then every sentence cites an analysed page of this research, every quote is on its page
    assert asked.status == AnswerStatus.ANSWERED and asked.sources_answer is True, asked.error
    urls = cited_urls(asked.answer, analysed)
    assert urls and set(urls) <= analysed
    quotes = [html.unescape(title) for title in _CITATION_TITLE.findall(asked.answer)]
    assert quotes
    for quote in quotes:
        assert any(texts[url].contains(quote.removesuffix("…")) for url in set(urls)), quote
    # and the model call was charged to the research and its user, and the thread was told
    assert LlmCall.objects.filter(user=user).count() > calls
    types = list(Event.objects.filter(research_id=research_id).values_list("type", flat=True))
    assert types[-2:] == ["answer_writing_start", "answer_written"]
    snapshot = api.get(f"/api/research/{research_id}").json()
    validate_snapshot(snapshot)
    assert snapshot["conversation"][0]["status"] == "answered" and snapshot["conversation"][0]["answer"] == asked.answer
    assert api.get(f"/api/research/{research_id}/conversation/{asked.pk}.html").status_code == 200

    # when the sources do not answer a question
    research_model.answerable = False
    unanswered = answer_of(api, research_id, "What will it cost in 2040?")
    # then the answer says so, cites nothing, and suggests a query to dig deeper with
    assert unanswered.status == AnswerStatus.ANSWERED and unanswered.sources_answer is False
    assert unanswered.answer.strip() == UNANSWERED and not cited_urls(unanswered.answer)
    assert unanswered.suggested_query

    # when a fabricating model answers
    research_model.answerable, research_model.fabricate = True, True
    fabricated = answer_of(api, research_id, "What did the sources measure, again?")
    # then neither its fabricated URL nor its fabricated quote reaches the answer
    assert fabricated.status == AnswerStatus.ANSWERED
    assert FABRICATED_URL not in fabricated.answer and FABRICATED_QUOTE not in fabricated.answer
    assert set(cited_urls(fabricated.answer, analysed)) <= analysed
    assert fabricated.stats["quotes_dropped"] >= 1 and fabricated.stats["citations_dropped"] >= 1
    assert [c["position"] for c in AskedQuestion.objects.filter(research_id=research_id).values("position")] == [
        1,
        2,
        3,
    ]
