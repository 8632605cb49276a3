"""The report writer's packets: every finding in some writer prompt, whatever the window."""

from hypothesis import given
from hypothesis import strategies as st

from workers.agents import report_writer
from workers.agents.report_writer import SourceNote, _place_every_finding, finding_line, sources_text, split_sources

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=120)
shapes = st.lists(st.lists(texts, max_size=12), max_size=12)


@given(
    shapes=shapes,
    max_chars=st.integers(min_value=0, max_value=3000),
    max_findings=st.integers(min_value=0, max_value=30),
)
def test_parts_keep_every_finding_once_in_order_under_its_source_and_within_limits(
    shapes, max_chars, max_findings
) -> None:
    # given sources with findings (some with none), each finding told apart by its source and position
    sources = [
        SourceNote(i + 1, f"https://s{i}.example/", "T", [(f"F{i}.{j} {text}", "q") for j, text in enumerate(found)])
        for i, found in enumerate(shapes)
    ]
    # when they are split into parts
    parts = split_sources(sources, finding_line, max_chars, max_findings)
    # then every finding is in exactly one part, in order, under its own source's number
    seen = [(source.number, fact) for part in parts for source in part for fact, _ in source.findings]
    assert seen == [(source.number, fact) for source in sources for fact, _ in source.findings]
    assert all(fact.startswith(f"F{number - 1}.") for number, fact in seen)
    # and every source is shown, a source with no findings too
    assert {source.number for part in parts for source in part} == {source.number for source in sources}
    for part in parts:
        findings = sum(len(source.findings) for source in part)
        # a part over a limit holds a single finding: one that alone is larger
        assert findings <= max(1, max_findings)
        assert len(sources_text(part, finding_line)) <= max_chars or findings <= 1


def test_every_finding_the_outline_left_out_is_placed() -> None:
    # given two sources and an outline that placed one finding twice, one not at all, and one that does not exist
    sources = [
        SourceNote(1, "https://a.example/", "A", [("a1", "q"), ("a2", "q")], [11, 12]),
        SourceNote(2, "https://b.example/", "B", [("b1", "q")], [21]),
    ]
    sections = [
        {"heading": "One", "findings": [11, 999], "learnings": []},
        {"heading": "Two", "findings": [11], "learnings": []},
    ]
    # when
    _place_every_finding(sections, sources)
    # then each finding is in one section: a left-out one beside its source's, else in a last section
    assert sections[0]["findings"] == [11, 12]
    assert sections[1]["findings"] == []
    assert sections[2] == {"heading": report_writer.FURTHER_HEADING, "findings": [21], "learnings": []}
