"""Two per-page text steps skip their regular expression where the text cannot match it: the fence's neutralising of
angle-bracket runs, and the rendering of an extracted block's lines. Each must give what the expression alone gave,
for any text a page can hold."""

import re

from hypothesis import given
from hypothesis import strategies as st

from research.text.page_text import _BR, _CELL, _block_lines
from workers.agents.common import neutralised

# Whitespace of every kind, the block and cell marks, brackets and bars, and ordinary letters.
PAGE_CHARS = st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x85", "\xa0", "\u2028", "\u3000", "\x1f", "\u200b"])
PAGE_TEXT = st.text(alphabet=st.one_of(PAGE_CHARS, st.sampled_from([_BR, _CELL, "|", "<", ">", "a", "é", "1"])))


def _lines_by_expressions(raw: str) -> list[str]:
    """_block_lines as it was written before its fast paths: every line through both expressions."""
    lines = []
    for line in re.sub(r"\s+", " ", raw).split(_BR):
        line = re.sub(rf"\s*(?:{_CELL}\s*)+", " | ", line).strip()
        if line.startswith("| "):
            line = line[2:]
        if line.endswith(" |"):
            line = line[:-2]
        if line.strip():
            lines.append(line.strip())
    return lines


@given(PAGE_TEXT)
def test_a_blocks_lines_are_those_the_expressions_gave(raw: str) -> None:
    assert _block_lines(raw) == _lines_by_expressions(raw)


def test_a_table_rows_cells_are_still_set_apart() -> None:
    row = f"{_CELL} Model \t{_CELL}{_CELL} COP at -25 °C {_CELL}{_BR}  plain  line  "
    assert _block_lines(row) == ["Model | COP at -25 °C", "plain line"]


@given(PAGE_TEXT)
def test_neutralised_text_opens_and_closes_no_fence_and_reads_the_same(text: str) -> None:
    out = neutralised(text)
    assert "<<<" not in out and ">>>" not in out
    assert out.translate(str.maketrans({"\uff1c": "<", "\uff1e": ">"})) == text.translate(
        str.maketrans({"\uff1c": "<", "\uff1e": ">"})
    )
    if "<<<" not in text and ">>>" not in text:
        assert out == text


def test_runs_of_three_brackets_become_fullwidth_and_shorter_runs_stay() -> None:
    assert neutralised("a <<<END>>> b << c >> d") == "a \uff1c\uff1c\uff1cEND\uff1e\uff1e\uff1e b << c >> d"
