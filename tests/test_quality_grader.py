"""The quality bench's grader (bench/quality/grade.py) on small hand-written reports: what counts as a cited
sentence, and each verdict."""

from bench.quality.grade import (
    Checkpoint,
    contains,
    current_figure_urls,
    grade,
    grade_checkpoint,
    load,
    sentences,
    totals,
)

MARGIN = Checkpoint("gross-margin", "Gross margin in 2025", ("44 %",), ("52 %", "47 %"), "finance/ar-2025.pdf")
CUSTOMER = Checkpoint("largest-customer", "Largest customer", ("Nordhavn Energi", "18 %"), ("22 %",), "c.docx")
AR_2025 = "http://app/collection/1/"
AR_2024 = "http://app/collection/2/"
DECK = "http://app/collection/3/"


def cite(number: int, url: str, quote: str = "a quote") -> str:
    return f'[[{number}]]({url} "{quote}")'


def report(*paragraphs: str, sources: str = "") -> str:
    body = "\n\n".join(paragraphs)
    return f"# Due diligence\n\n## Summary\n\n{body}\n\n## Sources\n\n{sources or '1. [AR](' + AR_2025 + ')'}\n"


def test_a_cited_sentence_is_its_text_up_to_its_citations() -> None:
    markdown = report(
        f"Gross margin was 44 % in 2025. {cite(1, AR_2025)}{cite(2, DECK)} The plant ramped up. {cite(1, AR_2025)}",
        "A closing remark with no source.",
        f"- A list item citing the deck. {cite(2, DECK)}",
    )
    found = sentences(markdown)
    assert [(s.text, s.urls, s.block) for s in found] == [
        ("Gross margin was 44 % in 2025.", (AR_2025, DECK), 0),
        ("The plant ramped up.", (AR_2025,), 0),
        ("A closing remark with no source.", (), 1),
        ("A list item citing the deck.", (DECK,), 2),
    ]


def test_correct_when_the_figure_is_in_a_cited_sentence() -> None:
    markdown = report(f"Gross margin was 44% of revenue in 2025. {cite(1, AR_2025)}")
    verdict = grade_checkpoint(MARGIN, markdown)
    assert verdict.verdict == "correct"
    assert verdict.found == ("44 %",) and verdict.urls == (AR_2025,)
    assert verdict.evidence == "Gross margin was 44% of revenue in 2025."


def test_correct_when_the_items_are_in_two_adjacent_cited_sentences() -> None:
    markdown = report(
        f"The largest customer is Nordhavn Energi A/S. {cite(1, DECK)} "
        f"Its share of revenue was 18 %. {cite(2, AR_2025)}"
    )
    verdict = grade_checkpoint(CUSTOMER, markdown)
    assert verdict.verdict == "correct" and verdict.urls == (DECK, AR_2025)


def test_partial_when_the_items_never_meet_in_one_or_two_adjacent_sentences() -> None:
    markdown = report(
        f"Nordhavn Energi is a customer. {cite(1, DECK)}",
        f"One customer bought 18 % of the units. {cite(2, AR_2025)}",
    )
    verdict = grade_checkpoint(CUSTOMER, markdown)
    assert verdict.verdict == "partial" and verdict.found == ("Nordhavn Energi", "18 %")


def test_partial_when_only_some_items_are_cited() -> None:
    markdown = report(f"Nordhavn Energi recovers heat from a data centre. {cite(1, DECK)}")
    verdict = grade_checkpoint(CUSTOMER, markdown)
    assert verdict.verdict == "partial" and verdict.found == ("Nordhavn Energi",) and verdict.urls == (DECK,)


def test_missing_when_no_item_is_in_a_cited_sentence() -> None:
    # the figure is in the report, but in a sentence that cites nothing, and in the sources list's quotes
    markdown = report(
        f"Margins matter to investors. {cite(1, AR_2025)}",
        "Gross margin was 44 % in 2025.",
        sources=f"1. [AR]({AR_2025}) — quoted: “Gross margin was 44 % of revenue in 2025.”",
    )
    verdict = grade_checkpoint(MARGIN, markdown)
    assert verdict.verdict == "missing" and verdict.evidence == "" and verdict.urls == ()


def test_wrong_when_a_stale_figure_is_cited_even_beside_the_current_one() -> None:
    markdown = report(
        f"Gross margin was 44 % in 2025. {cite(1, AR_2025)}",
        f"Gross margin was 52 % of revenue. {cite(2, AR_2024)}",
    )
    verdict = grade_checkpoint(MARGIN, markdown)
    assert verdict.verdict == "wrong"
    assert verdict.stale == ("52 %",) and verdict.found == ("44 %",) and verdict.urls == (AR_2024,)


def test_a_stale_figure_named_superseded_is_not_a_claim_of_the_report() -> None:
    # the extractive engine's note, and a writer's own sentence naming the older figure superseded
    for superseded in (
        f"Gross margin was 52 % of revenue. (from an archived document of 31 Dec 2024; superseded) {cite(2, AR_2024)}",
        f"The 2024 report's 52 % gross margin is superseded. {cite(2, AR_2024)}",
    ):
        markdown = report(f"Gross margin was 44 % in 2025. {cite(1, AR_2025)}", "## Superseded figures", superseded)
        verdict = grade_checkpoint(MARGIN, markdown)
        assert verdict.verdict == "correct", superseded
        assert verdict.urls == (AR_2025,)
    # and one naming itself superseded does not state the current figure either
    markdown = report(f"Gross margin was 44 %, superseded since. {cite(1, AR_2025)}")
    assert grade_checkpoint(MARGIN, markdown).verdict == "missing"


def test_a_stale_figure_in_uncited_text_keeps_a_correct_figure_partial() -> None:
    markdown = report(f"Gross margin was 44 % in 2025. {cite(1, AR_2025)}", "## Margin fell from 52 %")
    assert grade_checkpoint(MARGIN, markdown).verdict == "partial"


def test_figures_match_whole_never_inside_a_longer_number() -> None:
    assert contains("Gross margin: 44 %.", "44 %") and contains("margin of 44%", "44 %")
    assert contains("margin of 44\u00a0%", "44 %")
    assert not contains("retention was 144 %", "44 %")
    assert not contains("4.44 %", "44 %")
    assert contains("Employees: 212.", "212")
    assert not contains("2,212 units", "212") and not contains("212.5", "212") and not contains("212,000", "212")
    assert contains("EUR 86,000 per unit", "EUR 86,000") and not contains("EUR 86,0001", "EUR 86,000")
    assert not contains("Ouluntie 4", "Oulu") and contains("the hall in Oulu, Finland", "Oulu")


def test_grade_and_totals_over_every_checkpoint() -> None:
    markdown = report(
        f"Gross margin was 44 % in 2025. {cite(1, AR_2025)}",
        f"Nordhavn Energi A/S buys heat pumps. {cite(2, DECK)}",
    )
    verdicts = grade([MARGIN, CUSTOMER], markdown)
    assert [v.verdict for v in verdicts] == ["correct", "partial"]
    assert totals(verdicts) == {"correct": 1, "partial": 1, "missing": 0, "wrong": 0}


def test_current_figure_urls_are_the_sources_of_the_sentences_stating_it() -> None:
    markdown = report(
        f"Gross margin was 44 % in 2025. {cite(1, AR_2024)}",
        f"Nordhavn Energi is a customer. {cite(2, DECK)}",
    )
    assert current_figure_urls(MARGIN, markdown) == (AR_2024,)
    assert current_figure_urls(CUSTOMER, markdown) == ()  # the name alone states no figure


def test_the_benchmark_has_ten_checkpoints_or_more_each_with_a_figure_or_name() -> None:
    benchmark = load()
    assert len(benchmark.checkpoints) >= 10
    assert len({c.id for c in benchmark.checkpoints}) == len(benchmark.checkpoints)
    assert all(c.required and c.source and c.source not in benchmark.outdated for c in benchmark.checkpoints)
    assert sum(1 for c in benchmark.checkpoints if c.stale) >= 10
