"""Whole researches against model servers as teams run them, on the real stack (worker processes, PostgreSQL,
Redis): each behaviour of the fake model alone, then all of them at once with a 16k window."""

import json
import time
from collections.abc import Callable

import pytest

from devtools.fakes import FakeLLM, FakeWeb
from research.models import Document, Extract, ResearchStatus, SerpQuery
from tests.support.e2e import wait_finished
from workers.agents.report_writer import sources_block
from workers.clients import model_window
from workers.pipeline.citations import cited_urls
from workers.pipeline.report import collect_sources

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "How do heat pumps perform in cold climates?"
MODEL = "gpt-4o-mini"  # the model the test settings name for every agent


def no_json_schema(fake: FakeLLM) -> None:
    fake.supports_json_schema = False


def no_structured_output(fake: FakeLLM) -> None:
    fake.supports_json_schema = False
    fake.supports_json_object = False


def window_16k(fake: FakeLLM) -> None:
    fake.context_window = 16384
    fake.chars_per_token = 3.0


def window_unreported(fake: FakeLLM) -> None:
    # vLLM's 400 on overflow, but the window shown nowhere: learned from the error
    fake.context_window = 12000
    fake.window_api = None
    fake.chars_per_token = 3.0


def ollama_default_context(fake: FakeLLM) -> None:
    fake.truncate_prompt_to = 4096
    fake.chars_per_token = 4.0


def answers_cut(fake: FakeLLM) -> None:
    fake.cut_next(4)


def slow_first_answer(fake: FakeLLM) -> None:
    fake.first_delay = 3.0


BEHAVIOURS: dict[str, Callable[[FakeLLM], None]] = {
    "think": lambda fake: setattr(fake, "think", True),
    "reasoning_field": lambda fake: setattr(fake, "reasoning_field", True),
    "prose": lambda fake: setattr(fake, "prose", True),
    "no_json_schema": no_json_schema,
    "no_structured_output": no_structured_output,
    "window_16k": window_16k,
    "window_unreported": window_unreported,
    "ollama_default_context": ollama_default_context,
    "answers_cut": answers_cut,
    "slow_first_answer": slow_first_answer,
}


def ask_questions(api, count: int = 2) -> tuple[str, list[str]]:
    """The questions through the API: at once (201), or once the worker has them (202, then the snapshot)."""
    response = api.post(
        "/api/research/questions",
        data=json.dumps({"prompt": PROMPT, "num_questions": count}),
        content_type="application/json",
    )
    assert response.status_code in (201, 202), response.content
    research_id = response.json()["research_id"]
    if response.status_code == 201:
        return research_id, response.json()["questions"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        snapshot = api.get(f"/api/research/{research_id}").json()
        questions = [q["question"] for q in snapshot.get("questions", [])]
        if questions:
            return research_id, questions
        assert snapshot["research"]["status"] != "failed", snapshot["research"]
        time.sleep(0.2)
    raise AssertionError("the questions never arrived")


def research_through_the_api(api, breadth: int, depth: int) -> tuple[str, list[str]]:
    research_id, questions = ask_questions(api)
    response = api.post(
        "/api/research/start",
        data=json.dumps(
            {"research_id": research_id, "answers": ["Nordic", "since 2015"], "breadth": breadth, "depth": depth}
        ),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    return research_id, questions


def assert_cited_report(research_id: str) -> Document:
    report = Document.objects.get(research_id=research_id, kind="report")
    assert report.stats["citations"] > 0, report.stats
    assert "## Sources" in report.markdown
    assert Extract.objects.filter(research_id=research_id).exists()
    return report


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_each_model_behaviour_alone_runs_questions_research_and_report(
    api, workers, research_model, fake_llm: FakeLLM, behaviour: str
) -> None:
    # given a model server with one habit of the servers teams run
    BEHAVIOURS[behaviour](fake_llm)
    # when a user asks for questions, answers them and runs a 2x2 research
    research_id, questions = research_through_the_api(api, 2, 2)
    research = wait_finished(research_id, timeout=180)
    # then
    assert len(questions) == 2 and all(questions)
    assert all("not this one" not in q for q in questions)  # a draft inside a reasoning block is never the answer
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert SerpQuery.objects.filter(research_id=research_id).count() == 4
    assert_cited_report(research_id)


def reasoning_16k_prose_no_json_schema(fake: FakeLLM) -> None:
    # vLLM with a 16k window it reports, a reasoning model that thinks aloud and answers in prose, no json_schema
    window_16k(fake)
    no_json_schema(fake)
    fake.think = True
    fake.prose = True


def fills_every_array_in_16k(fake: FakeLLM) -> None:
    # a model that writes as much as the schema allows: every array to its maxItems (long where there is none)
    window_16k(fake)
    fake.fill_to_max = True


def window_8k_unreported(fake: FakeLLM) -> None:
    # an 8k window the server shows nowhere: learned from its first overflow error
    window_unreported(fake)
    fake.context_window = 8192


def answers_capped_at_1024(fake: FakeLLM) -> None:
    # a server that cuts every answer at 1,024 tokens, whatever max_tokens asks, and a model that writes long
    fake.output_limit = 1024
    fake.chars_per_token = 3.0
    fake.fill_to_max = True


# What each server leaves to be learned, as the workers stored it for the fleet.
LEARNED: dict[str, Callable[[model_window.ModelFacts], bool]] = {
    "window_8k_unreported": lambda facts: facts.learned_window == 8192,
    "answers_capped_at_1024": lambda facts: facts.output_limit == 1024,
}


SERVERS: dict[str, Callable[[FakeLLM], None]] = {
    "reasoning_16k_prose_no_json_schema": reasoning_16k_prose_no_json_schema,
    "fills_every_array_in_16k": fills_every_array_in_16k,
    "window_8k_unreported": window_8k_unreported,
    "answers_capped_at_1024": answers_capped_at_1024,
}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_a_3x3_research_gets_its_report_whatever_the_window_or_answer_limit(
    api, workers, research_model, fake_llm: FakeLLM, fake_web: FakeWeb, server: str
) -> None:
    # given a model server with a small window or a cap on answers, findings enough to overflow it, and pages
    # longer than any prompt (each analysed in parts, several at once on every worker)
    SERVERS[server](fake_llm)
    research_model.facts_per_page = 6
    fake_web.long_pages = 150
    # when a 3x3 research runs through the API
    research_id, _ = research_through_the_api(api, 3, 3)
    research = wait_finished(research_id, timeout=300)
    # then it completes with a cited report, citing only analysed pages
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert SerpQuery.objects.filter(research_id=research_id).count() == 15
    report = assert_cited_report(research_id)
    analysed = set(Extract.objects.filter(research_id=research_id).values_list("website__url", flat=True))
    assert len(analysed) >= 100
    assert set(cited_urls(report.markdown)) <= analysed
    # and every finding reached a report writer's prompt (or, where the model could not write it, the report)
    outlines, sections = writer_prompts(fake_llm)
    written = "\n".join(sections) + report.markdown
    facts = list(Extract.objects.filter(research_id=research_id).values_list("fact", flat=True))
    missing = [fact for fact in facts if fact not in written]
    assert not missing, f"{len(missing)} of {len(facts)} findings reached no writer"
    # and the window was learned or kept with at most three requests refused for it
    assert fake_llm.overflows <= 3, fake_llm.overflows
    # and what the server did not say was learned
    learned = model_window.facts(MODEL)
    assert LEARNED.get(server, lambda facts: True)(learned), learned
    # and the window mattered: every source with every finding would not have fit in one prompt
    everything, _ = collect_sources(research_id, 10**9)
    assert fake_llm.tokens(sources_block(everything)) > 16384


def writer_prompts(fake: FakeLLM) -> tuple[list[str], list[str]]:
    """The user texts of the outline requests and of the section requests the fake received."""

    def texts(name: str) -> list[str]:
        return ["\n".join(m["content"] for m in body["messages"] if m["role"] == "user") for body in fake.calls(name)]

    return texts("report_outline"), texts("report_section")


@pytest.mark.slow
@pytest.mark.parametrize(("breadth", "depth"), [(3, 3), (5, 5)])
def test_every_finding_reaches_a_writer_within_a_16k_window(
    api, workers, research_model, fake_llm: FakeLLM, breadth: int, depth: int
) -> None:
    # given a 16k-window model whose analyser returns as many facts as it may
    window_16k(fake_llm)
    research_model.facts_per_page = 12
    # when a research runs through the API
    research_id, questions = research_through_the_api(api, breadth, depth)
    research = wait_finished(research_id, timeout=900)
    # then it completes with a cited report, and no request overflowed the window
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert_cited_report(research_id)
    assert fake_llm.overflows <= 0.05 * fake_llm.count(), (fake_llm.overflows, fake_llm.count())
    # every finding's text is in at least one outline or section prompt
    outlines, sections = writer_prompts(fake_llm)
    assert outlines and sections
    everything = "\n".join(sections)
    facts = list(Extract.objects.filter(research_id=research_id).values_list("fact", flat=True))
    assert len(facts) > 100
    missing = [fact for fact in facts if fact not in everything]
    assert not missing, f"{len(missing)} of {len(facts)} findings reached no section prompt"
    # and every section prompt holds the follow-up questions and answers and the rest of the outline
    for text in sections:
        assert all(question in text for question in questions)
        assert "Nordic" in text and "since 2015" in text
        assert "The report's other sections" in text
