"""Whether a research's findings bear on its request: the words check both engines share, and the model's verdict."""

from hypothesis import given
from hypothesis import strategies as st

from workers.pipeline.relevance import OFF_TOPIC, ON_TOPIC, assess, off_topic_note, request_terms

HEAT_PUMPS = "How do air-source heat pumps perform below -20 °C? I want measured field data and what limits efficiency."
ON = [
    "Seasonal COP stayed above 2.5 in the field trial. The heat pumps kept working at minus twenty degrees.",
    "Output fell by a third at -25 °C. Measured output of the pump fell by a third.",
]
OFF = [
    "Return True if the future was cancelled. Return True if the future was cancelled.",
    "The optional limit gives the maximum number of frames to return.",
    "Release the lock, allowing another thread that is blocked waiting for the lock to acquire it.",
]


def test_findings_that_name_the_request_bear_on_it() -> None:
    found = assess(HEAT_PUMPS, ON, ["Cold-climate heat pump trials"])
    assert found is not None and found.verdict == ON_TOPIC and found.judged_by == "words"
    assert {"heat", "pump", "measured", "field"} <= set(found.terms_found)


def test_findings_about_something_else_do_not() -> None:
    # given the findings of Python's documentation for a question about heat pumps
    found = assess(HEAT_PUMPS, OFF, ["Python: module asyncio.tasks", "Python: built-in module _thread"])
    # then the sources do not cover it, and the note says what little they named
    assert found is not None and found.verdict == OFF_TOPIC
    assert found.terms_found == ["limit"] and found.findings == 3
    note = off_topic_note(found, 4)
    assert note.startswith("> **The sources found do not cover this request.** The 4 pages analysed")
    assert "“limit”" in note
    assert "none of what it asks" in off_topic_note(assess("capital of France", OFF), 1)


def test_the_models_verdict_settles_it() -> None:
    # a request in another language than its sources: the words miss, the model reads meaning
    said_yes = assess("Wie arbeiten Wärmepumpen bei Kälte?", ON, model_says=True)
    assert said_yes is not None and said_yes.verdict == ON_TOPIC and said_yes.judged_by == "model"
    said_no = assess(HEAT_PUMPS, ON, model_says=False)
    assert said_no is not None and said_no.verdict == OFF_TOPIC
    assert "the report writer judged" in off_topic_note(said_no, 2)


def test_a_request_of_asking_words_only_is_not_judged_by_words() -> None:
    assert request_terms("What is the best way to do it, and how?") == []
    assert assess("What is the best way to do it, and how?", OFF) is None
    assert assess("How do heat pumps work?", []).verdict == OFF_TOPIC  # nothing found bears on anything


@given(
    prompt=st.text(max_size=200),
    findings=st.lists(st.text(max_size=200), max_size=8),
    titles=st.lists(st.text(max_size=80), max_size=4),
)
def test_any_text_gets_a_verdict_consistent_with_the_words_found(prompt, findings, titles) -> None:
    found = assess(prompt, findings, titles)
    if found is None:
        assert request_terms(prompt) == []
        return
    assert set(found.terms_found) <= set(found.terms) and found.findings == len(findings)
    assert (found.verdict == ON_TOPIC) == (bool(findings) and len(found.terms_found) >= 0.2 * len(found.terms))
    assert off_topic_note(found, 1).startswith("> **The sources found do not cover this request.**")
