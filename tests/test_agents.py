"""Agents through the real openai client against the fake model: exact counts, fallbacks, token trimming."""

import re

import pytest

from workers.agents import query_generator, website_analyzer
from workers.agents.common import trim_to_tokens
from workers.agents.query_generator import Ancestor


@pytest.mark.parametrize("array_len", [None, 1, 0, 9])
def test_query_generator_returns_exactly_n_distinct(fakes, fake_llm, array_len) -> None:
    fake_llm.array_len = array_len
    planned = query_generator.plan_queries("Tidal energy costs", [("Where?", "UK")], [], 4)
    assert len(planned) == 4
    assert len({p.query.casefold() for p in planned}) == 4
    assert all(p.objective for p in planned)


def test_query_generator_sends_the_whole_ancestor_chain(fakes, fake_llm) -> None:
    chain = [Ancestor("tidal costs", "find LCOE", ["LCOE is 200 GBP/MWh"]), Ancestor("tidal LCOE UK", "find CfD", [])]
    query_generator.plan_queries("Tidal energy costs", [("Where?", "UK")], chain, 2)
    text = fake_llm.calls("serp_queries")[-1]["messages"][-1]["content"]
    assert "Depth 1 query: tidal costs" in text and "LCOE is 200 GBP/MWh" in text
    assert "Depth 2 query: tidal LCOE UK" in text and "A: UK" in text


def test_website_analyzer_trims_page_to_token_budget(fakes, fake_llm, settings) -> None:
    settings.PAGE_TOKEN_BUDGET = 500
    website_analyzer.analyze("objective", "query", "https://x.example", "X", "word " * 50_000)
    sent = fake_llm.calls("website_analysis")[-1]["messages"][-1]["content"]
    assert len(sent) < 500 * 4 + 500


def test_trim_to_tokens_cuts_at_a_boundary() -> None:
    text = "First sentence here. " * 100
    trimmed = trim_to_tokens(text, 50)
    assert len(trimmed) <= 200 and trimmed.endswith(".")
    assert trim_to_tokens("short", 50) == "short"


def test_query_generator_trims_the_ancestor_learnings_to_their_budget(fakes, fake_llm, settings) -> None:
    # given a long chain of ancestors with many learnings
    settings.LEARNINGS_TOKEN_BUDGET = 200
    learnings = [f"Learning number {i} says something long enough to count." for i in range(400)]
    chain = [Ancestor(f"query {d}", f"objective {d}", learnings) for d in range(3)]
    # when
    query_generator.plan_queries("Tidal energy costs", [], chain, 2)
    # then the branch is cut to about 200 tokens, from the top
    text = fake_llm.calls("serp_queries")[-1]["messages"][-1]["content"]
    branch = re.search(r"^<<<BRANCH-(\w+)>>>\n(.*)\n<<<END-BRANCH-\1>>>$", text, re.MULTILINE | re.DOTALL).group(2)
    assert len(branch) <= 200 * 4 and branch.startswith("Depth 1 query: query 0")


def test_report_sources_are_trimmed_to_the_budget_keeping_one_finding_each() -> None:
    from workers.agents.report_writer import SourceNote, sources_block
    from workers.pipeline.report import _trim

    # given 30 sources with 10 findings each
    sources = [
        SourceNote(number=i + 1, url=f"https://s{i}.example/", title=f"Source {i}", findings=[]) for i in range(30)
    ]
    for source in sources:
        source.findings.extend((f"fact {j} of {source.url}", f"quote {j}") for j in range(10))
    # when trimmed to a budget that holds about one finding per source
    _trim(sources, max_chars=3_000)
    # then every source that is kept has at least one finding, and the block fits
    assert len(sources_block(sources)) <= 3_000
    assert sources and all(1 <= len(s.findings) <= 10 for s in sources)
    assert [s.number for s in sources] == list(range(1, len(sources) + 1))  # trimmed from the end


def test_query_generator_keeps_the_nearest_learnings_when_trimming(fakes, fake_llm, settings) -> None:
    # given a depth-4 planning: three ancestors, each with more learnings than the budget holds
    settings.LEARNINGS_TOKEN_BUDGET = 300
    chain = [
        Ancestor(
            f"query {d}", f"objective {d}", [f"Depth {d} learning {i} is a fact of some length." for i in range(60)]
        )
        for d in range(1, 4)
    ]
    # when
    query_generator.plan_queries("Tidal energy costs", [], chain, 2)
    # then the parent's learnings are in the prompt, the top-level query's are cut first, and it fits the budget
    text = fake_llm.calls("serp_queries")[-1]["messages"][-1]["content"]
    branch = text.split("The research branch so far, from the top", 1)[1].split(":\n", 1)[1]
    branch = branch.split("\n\nWrite exactly", 1)[0]
    assert len(branch) <= 300 * 4 + 200  # the budget, and the fence around it
    assert "Depth 3 learning 0 is a fact" in branch
    assert "Depth 1 learning 0 is a fact" not in branch
    assert all(f"Depth {d} query: query {d}" in branch for d in range(1, 4))


def test_query_generator_lists_a_learning_once_where_it_is_nearest() -> None:
    shared = "Tidal stream LCOE fell to 178 GBP/MWh in 2023."
    chain = [Ancestor("q1", "o1", [shared, "only at the top"]), Ancestor("q2", "o2", [shared])]
    text = query_generator.branch_text(chain, 10_000)
    assert text.count(shared) == 1
    assert text.index(shared) > text.index("Depth 2 query: q2")
    assert "only at the top" in text
