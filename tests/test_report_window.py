"""The agents against any window, any characters per token, any cap on answers, and a model that writes as much as
the schema allows: driven without the stack (the agents' functions against the loopback model)."""

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from devtools.fakes import FakeLLM
from devtools.fakes.behaviours import ResearchModel
from research.text.quotes import PageText
from workers.agents import (
    answer_writer,
    evaluator,
    memory_agent,
    prompt_analyzer,
    query_generator,
    report_writer,
    website_analyzer,
)
from workers.agents.types import Ancestor, KnownMemory, Learning, MemorySource, SourceNote
from workers.clients import model_window
from workers.pipeline.citations import render_section
from workers.pipeline.report import _packet, _section_plan

PROMPT = "How do heat pumps perform in cold climates?"
ANSWERS = [("Which region?", "Nordic"), ("Since when?", "since 2015")]


def research_sources(count: int, per_source: int) -> list[SourceNote]:
    """Sources as a research stores them: URLs, titles and figures (dense for a tokenizer), numbered findings."""
    sources = []
    for n in range(1, count + 1):
        findings, ids = [], []
        for k in range(per_source):
            quote = f"At site {n}-{k} the unit kept a COP of {2 + k % 3}.{n % 10} at -{10 + k} °C over {n * 7} days."
            findings.append((f"Source {n} finding {k}: the measured COP stayed above {2 + k % 3} in winter.", quote))
            ids.append(n * 100 + k)
        url = f"https://lab{n}.example.org/reports/2024/q{n % 4}?id={n * 31}"
        sources.append(SourceNote(n, url, "Report", findings, ids))
    return sources


def serve(fake: FakeLLM, settings, window: int, ratio: float, output_limit: int, fill: bool) -> None:
    """A fresh working model on a server of this window (set, as LLM_CONTEXT_TOKENS sets it), tokenizer (characters
    a token), cap on answers and habit (`fill`: every array to its maxItems); nothing learned of it yet."""
    fake.reset()
    model_window.forget()
    ResearchModel(fake).install()
    fake.context_window, fake.window_api = window, None
    fake.chars_per_token, fake.output_limit, fake.fill_to_max = ratio, output_limit, fill
    settings.LLM_CONTEXT_TOKENS = window


def user_texts(fake: FakeLLM, name: str) -> list[str]:
    return ["\n".join(m["content"] for m in body["messages"] if m["role"] == "user") for body in fake.calls(name)]


@given(
    window=st.integers(min_value=4096, max_value=131072),
    ratio=st.floats(min_value=2.5, max_value=5.0),
    output_limit=st.integers(min_value=512, max_value=8192),
    fill=st.booleans(),
    shape=st.tuples(st.integers(min_value=1, max_value=24), st.integers(min_value=1, max_value=8)),
)
@hypothesis_settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_report_prompt_exceeds_the_window_and_no_finding_is_dropped(
    fakes, fake_llm: FakeLLM, settings, window: int, ratio: float, output_limit: int, fill: bool, shape
) -> None:
    # given a model server with this window, tokenizer, cap on answers and habit
    serve(fake_llm, settings, window, ratio, output_limit, fill)
    sources = research_sources(*shape)
    # when the report is planned and each section written from the findings the outline gave it
    outline = report_writer.outline(PROMPT, ANSWERS, ["Find measured figures"], sources)
    headings = [str(item["heading"]) for item in outline["sections"]]
    offline_text = []
    for item in outline["sections"]:
        plan = _section_plan(item, sources)
        packet = _packet(sources, plan)
        content = report_writer.write_section(
            PROMPT, str(item["heading"]), plan["learnings"], packet, answers=ANSWERS, outline_headings=headings
        )
        if content.get("extractive"):
            offline_text.append(str(content))
        # and what a section holds renders with its citations checked, whoever wrote it
        texts = {source.url: PageText("\n".join(q for _, q in source.findings)) for source in sources}
        render_section(str(item["heading"]), content, sources, texts)
    # then no request overflowed the window
    assert fake_llm.overflows == 0
    # and every finding reached a section writer's prompt, or was written without the model where it could not be
    prompts = "\n".join(user_texts(fake_llm, "report_section"))
    written = prompts + "\n".join(offline_text)
    missing = [fact for source in sources for fact, _ in source.findings if fact not in written]
    assert not missing, f"{len(missing)} findings reached no writer"
    # and every finding was in an outline prompt, by its id
    digests = "\n".join(user_texts(fake_llm, "report_outline"))
    assert all(f"F{pk}:" in digests for source in sources for pk in source.ids) or not digests


@pytest.mark.parametrize("capacity", [1, 2, 5, 13, 40])
def test_a_section_schema_asks_for_no_more_sentences_than_the_answer_holds(capacity: int) -> None:
    schema = report_writer.section_schema(capacity)
    paragraphs = schema["properties"]["paragraphs"]
    sentences = paragraphs["items"]["maxItems"]
    subsections = schema["properties"]["subsections"]["maxItems"]
    assert 1 <= sentences * (paragraphs["maxItems"] + subsections) <= max(1, capacity)


@given(
    window=st.integers(min_value=4096, max_value=65536),
    ratio=st.floats(min_value=2.5, max_value=5.0),
    output_limit=st.integers(min_value=512, max_value=8192),
    fill=st.booleans(),
)
@hypothesis_settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_agent_builds_its_prompt_for_the_window_and_answers_within_its_limit(
    fakes, fake_llm: FakeLLM, settings, window: int, ratio: float, output_limit: int, fill: bool
) -> None:
    # given the same kinds of server, and material far larger than any window
    serve(fake_llm, settings, window, ratio, output_limit, fill)
    sources = research_sources(30, 6)
    page = " ".join(quote for source in sources for _, quote in source.findings)
    long_prompt = PROMPT + " Consider in particular " + ", ".join(f"site {n} at -{n} °C" for n in range(3000)) + "."
    ancestors = [
        Ancestor(f"query {d}", f"objective {d}", [fact for fact, _ in sources[d].findings] * 20) for d in range(3)
    ]
    learnings = [Learning(fact, source.url) for source in sources for fact, _ in source.findings]
    # when every agent is asked with it
    questions = prompt_analyzer.ask_questions(long_prompt, 3)
    queries = query_generator.plan_queries(PROMPT, ANSWERS, ancestors, 3)
    findings = website_analyzer.analyze("Find measured figures", "heat pump COP", sources[0].url, "Report", page)
    update = memory_agent.update_memory(
        PROMPT,
        "Find measured figures",
        [MemorySource(source.number, source.url, source.title, source.findings) for source in sources],
        KnownMemory(gaps=[(n, f"gap {n}") for n in range(50)], insights=[f"insight {n}" for n in range(50)]),
    )
    evaluation = evaluator.evaluate_branch(PROMPT, ANSWERS, "heat pump COP", "Find figures", 2, 0, learnings)
    answer = answer_writer.answer("What COP did the units keep?", PROMPT, sources)
    # then each answered within its limits, and no request overflowed the window
    assert len(questions) == 3 and len(queries) == 3
    assert findings and update.insights and evaluation.score and answer.paragraphs
    assert fake_llm.overflows == 0


def test_a_part_the_model_cannot_write_is_halved_then_written_offline_and_marked(
    fakes, fake_llm: FakeLLM, settings
) -> None:
    # given a server that caps answers at 300 tokens, and a model whose sections about source 2 never end
    serve(fake_llm, settings, 16384, 3.0, 300, False)
    model = ResearchModel(fake_llm)
    model.install()

    def section(body, schema):
        written = model.section(body, schema)
        if "[2] " in user_texts_of(body):
            written["subsections"] = [{"heading": "More", "paragraphs": [[{"text": "x " * 2000, "sources": [2]}]]}]
        return written

    fake_llm.handlers["report_section"] = section
    sources = research_sources(3, 4)
    # when the section is written from all three sources
    content = report_writer.write_section(PROMPT, "Figures", [], sources, answers=ANSWERS, outline_headings=["Figures"])
    # then source 2's findings were split down to one per call, then written offline: the section says so
    assert content["extractive"] == "part"
    sentences = [s for paragraph in content["paragraphs"] for s in paragraph]
    for fact, quote in sources[1].findings:
        assert {"text": fact, "sources": [2], "quotes": [{"source": 2, "quote": quote}]} in sentences
    single = [text for text in user_texts(fake_llm, "report_section") if "[2] " in text and text.count("  - ") == 1]
    assert len(single) == len(sources[1].findings)
    # and the model's parts (sources 1 and 3) are in it as it wrote them
    assert any(s["sources"] == [1] for s in sentences) and any(s["sources"] == [3] for s in sentences)
    # and the reader is told, under the heading
    texts = {source.url: PageText("\n".join(q for _, q in source.findings)) for source in sources}
    markdown, _ = render_section("Figures", content, sources, texts)
    assert markdown.splitlines()[2].startswith("> Partly written without the model")


def user_texts_of(body) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
