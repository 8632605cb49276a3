"""The report writer's packets: every finding in some writer prompt, whatever the window."""

from hypothesis import given
from hypothesis import strategies as st

from workers.agents import report_writer
from workers.agents.report_writer import SourceNote, _packets, _place_every_finding

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=120)
shapes = st.lists(st.lists(texts, max_size=12), max_size=12)


@given(shapes=shapes, max_chars=st.integers(min_value=50, max_value=3000))
def test_packets_keep_every_line_in_order_under_its_header_and_within_size(shapes, max_chars) -> None:
    # given sources (a header each) with their finding lines, all told apart by their prefixes
    blocks = [
        (f"[{i}] header", [f"  L{i}.{j} {text}" for j, text in enumerate(found)]) for i, found in enumerate(shapes)
    ]
    # when they are split into packets
    packets = _packets(blocks, max_chars)
    # then every finding line is in one packet, in order, under its own source's header
    seen = []
    for packet in packets:
        header = None
        packet_lines = packet.split("\n")
        for line in packet_lines:
            if line.startswith("["):
                header = line
                continue
            assert header == f"[{line.split('.')[0][3:]}] header"
            seen.append(line)
        # a packet over the size holds one header and one line: a line that alone is larger
        assert len(packet) <= max_chars or len(packet_lines) <= 2
    assert seen == [line for _, found in blocks for line in found]


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
