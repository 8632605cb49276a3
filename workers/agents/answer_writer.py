"""The answer writer: answers a question about a finished research from its own findings, every sentence cited.

It is the report writer's role on a smaller scale (the same model settings, the same sentence shape, the same
checks afterwards in workers/pipeline/citations.py), with one thing more: it says whether the sources answer the
question at all, and when they do not, which web search would find what is missing.
"""

from typing import Any

from research.text.storable import storable_data
from workers.agents.common import Fence, trim_to_chars
from workers.agents.report_writer import (
    _PARAGRAPHS,
    capacity_for,
    finding_line,
    paragraphs_schema,
    sentence_tokens,
    sources_text,
    split_sources,
)
from workers.agents.report_writer import SYSTEM as REPORT_SYSTEM
from workers.agents.types import Answer, SourceNote
from workers.clients.llm import complete_json, prompt_room
from workers.clients.model_window import Room

NAME = "research_answer"
VERDICTS = ("yes", "partly", "no")

SYSTEM = (
    REPORT_SYSTEM + " Now the report is written and the user asks a question about it: answer that question only, "
    "in one to three short paragraphs, from the numbered sources given (the findings and passages of this "
    "research that bear on it most). Say in sources_answer whether they answer it: yes, partly or no. When they do "
    "not, write no sentence that pretends they do: leave the paragraphs empty and give, in suggested_query, a web "
    "search query that would find the answer."
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sources_answer": {"type": "string", "enum": list(VERDICTS)},
        "paragraphs": _PARAGRAPHS,
        "suggested_query": {"type": "string"},
    },
    "required": ["sources_answer", "paragraphs", "suggested_query"],
    "additionalProperties": False,
}

MAX_PARAGRAPHS = 3
# Tokens held back beside the fixed texts for the fence lines and the labels around the sources.
_RESERVE = 300


def answer(question: str, prompt: str, sources: list[SourceNote]) -> Answer:
    """The answer in SCHEMA's shape, from `sources` (best first): what does not fit the model's window is left
    out, from the end, so a small window still gets the best of them."""
    head = f"Research request:\n{prompt}\n\nQuestion about the finished research:\n{question}\n\n"
    ask = "Answer the question. Every sentence lists its source numbers and the exact quotes it rests on."
    fence = Fence.new("SOURCES")

    def build(room: Room) -> list[dict[str, str]]:
        # The sources as the report's sections are given them, cut where this call's room ends: the first part.
        budget = room.chars(room.left(SYSTEM, head, ask, reserve=_RESERVE))
        first = split_sources(sources, finding_line, budget, len(sources) * 1000)[0] if sources else []
        given = trim_to_chars(sources_text(first, finding_line), budget)
        user = (
            f"{head}Numbered sources with the facts and passages taken from them, between {fence.start} and "
            f"{fence.end}:\n{fence.around(given)}\n\n{ask}"
        )
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    sentence = sentence_tokens(prompt_room("report_writer"), sources[:20])

    def schema_for(writing: int) -> dict[str, Any]:
        # One to three paragraphs, with no more sentences than the answer's room holds.
        paragraphs = paragraphs_schema(capacity_for(writing, sentence), MAX_PARAGRAPHS)
        return {**SCHEMA, "properties": {**SCHEMA["properties"], "paragraphs": paragraphs}}

    result = complete_json("report_writer", build, NAME, schema_for, validation_schema=SCHEMA)
    data = storable_data(result.data)
    verdict = data.get("sources_answer")
    return Answer(
        paragraphs=[p for p in data.get("paragraphs", []) if isinstance(p, list)],
        sources_answer=verdict if verdict in VERDICTS else "partly",
        suggested_query=" ".join(str(data.get("suggested_query", "")).split())[:300],
    )
