"""Agents through the real openai client against the fake model: exact counts, fallbacks, token trimming."""

import pytest

from workers.agents import query_generator, website_analyzer
from workers.agents.common import trim_to_tokens
from workers.agents.query_generator import Ancestor


@pytest.mark.parametrize("array_len", [None, 1, 0, 9])
def test_query_generator_returns_exactly_n_distinct(fakes, fake_llm, array_len) -> None:  # noqa: ANN001
    fake_llm.array_len = array_len
    planned, prompt_tokens, _ = query_generator.plan_queries("Tidal energy costs", [("Where?", "UK")], [], 4)
    assert len(planned) == 4
    assert len({p.query.casefold() for p in planned}) == 4
    assert all(p.objective for p in planned)


def test_query_generator_sends_the_whole_ancestor_chain(fakes, fake_llm) -> None:  # noqa: ANN001
    chain = [Ancestor("tidal costs", "find LCOE", ["LCOE is 200 GBP/MWh"]), Ancestor("tidal LCOE UK", "find CfD", [])]
    query_generator.plan_queries("Tidal energy costs", [("Where?", "UK")], chain, 2)
    text = fake_llm.calls("serp_queries")[-1]["messages"][-1]["content"]
    assert "Depth 1 query: tidal costs" in text and "LCOE is 200 GBP/MWh" in text
    assert "Depth 2 query: tidal LCOE UK" in text and "A: UK" in text


def test_website_analyzer_trims_page_to_token_budget(fakes, fake_llm, settings) -> None:  # noqa: ANN001
    settings.PAGE_TOKEN_BUDGET = 500
    website_analyzer.analyze("objective", "query", "https://x.example", "X", "word " * 50_000)
    sent = fake_llm.calls("website_analysis")[-1]["messages"][-1]["content"]
    assert len(sent) < 500 * 4 + 500


def test_trim_to_tokens_cuts_at_a_boundary() -> None:
    text = "First sentence here. " * 100
    trimmed = trim_to_tokens(text, 50)
    assert len(trimmed) <= 200 and trimmed.endswith(".")
    assert trim_to_tokens("short", 50) == "short"
