"""The extractive engine picks the sentences a reader would: those that answer the objective (its rare words
weigh most), carry figures, names and dates, and are whole; policy and boilerplate lines lose; a table row is a
fact with its header. And the top-level queries cover the request's distinct questions."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from research.text import salience
from research.text.lexical import headed_sentences, sentences, terms
from research.text.quotes import normalise
from workers.agents import extractive
from workers.agents.query_generator import Ancestor


def test_a_policy_line_loses_to_the_sentence_with_the_asked_figure() -> None:
    # given a page where a rule shares the question's words and a plain sentence states the figure
    text = (
        "Employees must report every claim to Legal and must not discuss a dispute with the other party.\n\n"
        "Kallio Paper Oy has claimed EUR 2.1 million in damages, and the dispute goes to arbitration in 2026."
    )
    # when
    findings = extractive.analyze("What the sources state about open disputes.", "open disputes", "u", "t", text)
    # then the figure comes first, the rule after it
    assert findings[0].quote.startswith("Kallio Paper Oy has claimed EUR 2.1 million")
    assert salience.weight(findings[0].quote) > 2 * salience.weight(text.split("\n\n")[0])


def test_rules_win_when_the_objective_asks_about_rules() -> None:
    rule = "Employees must report every claim to Legal on the same day."
    assert salience.weight(rule, rules_wanted=True) > salience.weight(rule)
    assert salience.asks_about_rules("What is the policy on claims?")
    assert not salience.asks_about_rules("How large is the order backlog?")


def test_a_table_row_with_its_header_wins_for_a_figure_question() -> None:
    # given prose that talks about headcount and the table row that gives it, header and all
    text = (
        "Headcount planning is a shared responsibility of the managers and HR, and headcount is reviewed yearly.\n\n"
        "Headcount at 31 December 2025: Borealis Thermal group; Site: All sites; Employees: 212.\n"
    )
    row = "Headcount at 31 December 2025: Borealis Thermal group; Site: All sites; Employees: 212."
    assert salience.is_table_row(row) and salience.is_whole(row)
    # when the objective asks for employees: only the row's header says so
    findings = extractive.analyze("What the sources state about employees.", "employees", "u", "t", text)
    # then the row is the first finding, quoted whole with its headers
    assert findings[0].quote == row
    # and for headcount, it comes before the prose that says the word twice
    findings = extractive.analyze("What the sources state about headcount.", "headcount", "u", "t", text)
    assert findings[0].quote == row


def test_rare_words_outweigh_common_ones() -> None:
    # given a page where "revenue" is in every sentence and "backlog" in one
    text = "\n\n".join(
        [
            "Revenue from equipment grew in the north of the country during the year.",
            "Revenue from service contracts grew in the south of the country during the year.",
            "Revenue from subscriptions grew in the west of the country during the year.",
            "The order backlog at year end was large compared with the revenue of the year.",
        ]
    )
    findings = extractive.analyze("", "revenue backlog", "u", "t", text)
    assert findings[0].quote.startswith("The order backlog")


def test_headings_fragments_and_navigation_are_not_whole_sentences() -> None:
    assert not salience.is_whole("Revenue by segment, financial year 2025 (EUR thousand)")
    assert not salience.is_whole("Why Customers Choose Borealis Thermal Heat Pumps For District Heating Plants Today")
    assert not salience.is_whole("Home | Products | About us | Contact")
    assert not salience.is_whole("during shutdown when the pool is destroyed.")
    # a slide's line with a figure needs no full stop
    assert salience.is_whole("Order backlog at 31 December 2025: EUR 27 million, of which two thirds in 2026")
    assert salience.is_whole("The Rovaniemi plant has a capacity of 1,400 units a year on two shifts.")


def test_traits_count_figures_dates_and_names() -> None:
    found = salience.traits("Revenue grew by 24 percent to EUR 48.6 million in 2025 at Nordhavn Energi.")
    assert found.figures == 2 and found.dates == 1 and found.names >= 2 and found.rules == 0
    assert salience.traits("Contact us at sales@example.com for a quote.").boilerplate


def test_a_sentence_under_a_heading_is_found_by_the_heading_s_words() -> None:
    text = "Open disputes\n\nKallio Paper Oy has claimed EUR 2.1 million in damages under a warranty."
    assert headed_sentences(text)[-1] == (text.split("\n\n")[1], "Open disputes")
    findings = extractive.analyze("What the sources state about open disputes.", "open disputes", "u", "t", text)
    assert [f.quote for f in findings] == [text.split("\n\n")[1]]


PROSE = st.text(
    alphabet=st.sampled_from(list("abcdefghij ABCDE.,;:%€0123456789\n—-")), min_size=0, max_size=400
) | st.lists(
    st.sampled_from(
        [
            "Revenue was EUR 48.6 million in 2025.",
            "Employees must not share passwords.",
            "Segment: Equipment; Revenue: 33534; Share: 69 %.",
            "Open disputes",
            "Contact us at info@example.com.",
            "Gross margin was 44 % of revenue",
            "The plant in Rovaniemi has a capacity of 1,400 units a year.",
        ]
    ),
    max_size=12,
).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(text=PROSE, query=st.sampled_from(["revenue", "employees passwords", "gross margin", "capacity plant"]))
def test_any_text_gives_whole_sentences_each_a_verbatim_quote_of_its_source(text: str, query: str) -> None:
    findings = extractive.analyze(f"What the sources state about {query}.", query, "u", "t", text)
    flat = " ".join(text.split())
    for finding in findings:
        assert finding.fact == finding.quote
        assert " ".join(finding.quote.split()) in flat
        assert salience.is_whole(finding.quote)
    assert len({f.quote for f in findings}) == len(findings) <= extractive.MAX_GROUPED_FINDINGS
    for sentence, _heading in headed_sentences(text):
        assert normalise(sentence) in normalise(text)
    assert [s for s, _ in headed_sentences(text)] == sentences(text)


DUE_DILIGENCE = (
    "Due diligence on Borealis Thermal Oy, a Finnish maker of industrial heat pumps, before a minority investment: "
    "what were its revenue and gross margin in 2025, how much of its revenue is recurring, how much of it comes from "
    "its largest customer, what is the churn of its Frost Monitor subscriptions, how many employees does it have, "
    "where does it manufacture and with what capacity, who is its CEO, what are its cash and its debt, what is the "
    "list price of its main product, how large is its order backlog, and which legal disputes are open?"
)
ANSWERS = [("Which aspects matter most?", "Finance and legal risks; skip marketing copy and internal policies.")]
ASKED = ["revenue", "margin", "recurring", "customer", "churn", "employee", "manufacture", "capacity", "ceo", "cash"]
ASKED += ["debt", "price", "backlog", "dispute"]


def test_top_level_queries_cover_every_question_the_request_asks() -> None:
    planned = extractive.plan_queries(DUE_DILIGENCE, ANSWERS, [], 4)
    assert len(planned) == 4
    searched = set(terms(" ".join(q.query for q in planned)))
    assert [word for word in ASKED if word not in searched] == []
    # the request's subject is the company it names, not the words it opens with
    assert all("Borealis Thermal Oy" in q.objective for q in planned)
    # what the answers say to skip is no aspect
    assert not any(re.search(r"polic|marketing", q.query, re.IGNORECASE) for q in planned)


def test_deeper_queries_take_a_parent_s_aspects_apart() -> None:
    top = extractive.plan_queries(DUE_DILIGENCE, ANSWERS, [], 4)
    children = [
        child
        for parent in top
        for child in extractive.plan_queries(DUE_DILIGENCE, ANSWERS, [Ancestor(parent.query, parent.objective, [])], 2)
    ]
    assert len(children) == 8
    aspects = [a for q in top for a in extractive._objective_aspects(q.objective)]
    child_aspects = [a for q in children for a in extractive._objective_aspects(q.objective)]
    assert sorted(child_aspects) == sorted(aspects)
    assert all(len(extractive._objective_aspects(q.objective)) <= 2 for q in children)
