"""Scripted model behaviours for FakeLLM: a model that does its job plausibly, so the pipeline runs end to end.

- query generator: distinct queries named after their parent (`<parent> / <k>`), top level named by `top_names`;
- website analyzer: facts whose quotes are real sentences of the page it was shown;
- report writer: sections citing the numbered sources it was given, with their quotes; as an outline (from the
  digest of findings, `F<id>` lines under `[n] url` lines), one section per SOURCES_PER_SECTION sources with their
  findings' ids, each then written from its own packet (at least two sections from two sources);
- memory agent: an insight per website it was shown (citing its id), a gap for the branch's objective, a
  contradiction between the first two websites when it was shown two or more, and another branch's gap answered.
- evaluator (adaptive mode): a branch's score from `branch_score(depth, round)`, the research's from
  `research_score(rounds_done)`, both scriptable; by default a middling 6 with one gap.
- answer writer (Ask): sentences citing the first findings it was given, with their quotes; with `answerable=False`
  it says the sources do not answer, writes no sentence and suggests a query.
`fabricate=True` adds a fabricated URL, source number and quote to every answer, to prove they are dropped.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devtools.fakes.llm import FakeLLM, message_text

_COUNT = re.compile(r"Write exactly (\d+) search queries")
_DEPTH_LINE = re.compile(r"^Depth (\d+) query: (.+)$", re.MULTILINE)
_SOURCE_LINE = re.compile(r"^\[(\d+)\] (\S+) — ", re.MULTILINE)
_FINDING_LINE = re.compile(r'^  - (.*) \(quote: "(.*)"\)$', re.MULTILINE)
_DIGEST_LINE = re.compile(r"^  F(\d+): ", re.MULTILINE)
_WEBSITE_LINE = re.compile(r"^\[website (\d+)\] \S+ — ", re.MULTILINE)
_GAP_LINE = re.compile(r"^  \[gap (\d+)\] (.*)$", re.MULTILINE)
_OBJECTIVE_LINE = re.compile(r"^Objective of this branch:\n(.+)$", re.MULTILINE)
_BRANCH_LINE = re.compile(r"query depth: (\d+)\nround: (\d+)")
_ROUNDS_LINE = re.compile(r"gap-filling rounds done: (\d+)")
_SENTENCE = re.compile(r"[^.!?\n]{20,}[.!?]")
# The analyzer's fenced page: marker lines with a token of their own, then URL and title lines, a blank line, text.
_FENCED_PAGE = re.compile(r"^<<<PAGE-(\w+)>>>\n.*?\n\n(.*)\n<<<END-PAGE-\1>>>$", re.MULTILINE | re.DOTALL)

FABRICATED_URL = "https://fabricated.example/made-up-study"
FABRICATED_QUOTE = "This sentence appears on no page that was ever fetched."
# Unlike the renderer's fallback title ("Research report"), so a test can tell the model's title reached the page.
REPORT_TITLE = "What the analysed sources measured"
# Sources per section of the outline: small, so a small research's report has several sections.
SOURCES_PER_SECTION = 2


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(message_text(m) for m in body.get("messages", []) if m.get("role") == "user")


@dataclass
class ResearchModel:
    """Install with `ResearchModel(fake_llm).install()`; attributes can be changed between tests."""

    llm: FakeLLM
    top_names: list[str] = field(default_factory=list)
    # A parent query's children by the parent's text, where a test or bench wants a tree planned as another run
    # planned it; any other parent's children are named after it.
    child_names: dict[str, list[str]] = field(default_factory=dict)
    fabricate: bool = False
    facts_per_page: int = 2
    # The outline's verdict on whether the findings answer the request (None: the model leaves it out).
    sources_answer: str | None = "yes"
    # Whether the answer writer finds the question answered by the sources it is given.
    answerable: bool = True
    # (depth, round) -> a branch's overall score; rounds done -> the research's.
    branch_score: Callable[[int, int], float] = lambda depth, round_: 6
    research_score: Callable[[int], float] = lambda rounds: 6
    _counter: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> ResearchModel:
        self.llm.handlers["serp_queries"] = self.queries
        self.llm.handlers["website_analysis"] = self.analysis
        self.llm.handlers["research_report"] = self.report
        self.llm.handlers["report_outline"] = self.outline
        self.llm.handlers["report_section"] = self.section
        self.llm.handlers["memory_update"] = self.memory
        self.llm.handlers["branch_evaluation"] = self.branch_evaluation
        self.llm.handlers["research_evaluation"] = self.research_evaluation
        self.llm.handlers["research_answer"] = self.answer
        return self

    def branch_evaluation(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        match = _BRANCH_LINE.search(_user_text(body))
        depth, round_ = (int(match.group(1)), int(match.group(2))) if match else (1, 0)
        score = self.branch_score(depth, round_)
        dimension = max(1, min(10, round(score)))
        return {
            "completeness": dimension,
            "depth": dimension,
            "reliability": dimension,
            "actionability": dimension,
            "score": score,
            "gaps": [f"gap at depth {depth}"],
            "directions": [f"direction at depth {depth}"],
        }

    def research_evaluation(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        match = _ROUNDS_LINE.search(_user_text(body))
        rounds = int(match.group(1)) if match else 0
        return {"score": self.research_score(rounds), "gaps": [f"coverage gap after round {rounds}"]}

    def _count(self, text: str, schema: dict[str, Any]) -> int:
        match = _COUNT.search(text)
        wanted = int(match.group(1)) if match else schema["properties"]["queries"].get("maxItems", 3)
        array_len = self.llm.array_len
        if callable(array_len):
            return max(0, int(array_len("serp_queries", "queries", wanted)))
        return wanted if array_len is None else int(array_len)

    def queries(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        text = _user_text(body)
        count = self._count(text, schema)
        chain = _DEPTH_LINE.findall(text)
        with self._lock:
            serial = next(self._counter)
        if chain:
            parent = chain[-1][1].strip()
            names = self.child_names.get(parent, [])[:count] or [f"{parent} / {k + 1}.{serial}" for k in range(count)]
        else:
            names = [self.top_names[k] if k < len(self.top_names) else f"topic {k + 1}.{serial}" for k in range(count)]
        return {"queries": [{"query": name, "objective": f"Find measured figures about {name}"} for name in names]}

    def analysis(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        fenced = _FENCED_PAGE.search(_user_text(body))
        page = fenced.group(2) if fenced else ""
        sentences = [s.strip() for s in _SENTENCE.findall(page)]
        facts = [{"fact": f"The page reports: {s}", "quote": s} for s in sentences[: self.facts_per_page]]
        if self.fabricate:
            facts.append({"fact": f"A study at {FABRICATED_URL} proves it.", "quote": FABRICATED_QUOTE})
        return {"facts": facts}

    def report(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        text = _user_text(body)
        sources = [(int(n), url) for n, url in _SOURCE_LINE.findall(text)]
        blocks = re.split(r"^\[\d+\] ", text, flags=re.MULTILINE)[1:]
        findings = {n: _FINDING_LINE.findall(block) for (n, _), block in zip(sources, blocks, strict=False)}
        sections = []
        for start in range(0, len(sources), 4):
            group = sources[start : start + 4]
            paragraph = []
            for number, _url in group:
                for fact, quote in findings.get(number, [])[:2]:
                    paragraph.append(
                        {"text": fact, "sources": [number], "quotes": [{"source": number, "quote": quote}]}
                    )
            sections.append({"heading": f"Findings {start // 4 + 1}", "paragraphs": [paragraph], "subsections": []})
        summary = [
            {"text": "The sources agree on the main figures.", "sources": [n for n, _ in sources[:3]], "quotes": []}
        ]
        if self.fabricate:
            summary.append(
                {
                    "text": f"See also [the study]({FABRICATED_URL}) and {FABRICATED_URL} for more.",
                    "sources": [1],
                    "quotes": [{"source": 1, "quote": FABRICATED_QUOTE}],
                }
            )
            summary.append({"text": "An invented source supports this.", "sources": [999], "quotes": []})
        return {"title": REPORT_TITLE, "summary": summary, "sections": sections}

    def outline(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        text = _user_text(body)
        sources = list(dict.fromkeys(int(n) for n, _url in _SOURCE_LINE.findall(text)))
        blocks = re.split(r"^\[\d+\] ", text, flags=re.MULTILINE)[1:]
        findings: dict[int, list[int]] = {}
        for (number, _url), block in zip(_SOURCE_LINE.findall(text), blocks, strict=False):
            findings.setdefault(int(number), []).extend(int(n) for n in _DIGEST_LINE.findall(block))
        report = self.report(body, schema)
        per = SOURCES_PER_SECTION
        sections: list[dict[str, Any]] = [
            {
                "heading": f"Findings {start // per + 1}",
                "findings": [pk for n in sources[start : start + per] for pk in findings.get(n, [])],
                "learnings": [],
            }
            for start in range(0, len(sources), per)
        ]
        if self.fabricate and sections:
            sections[0]["findings"].append(999_999)
        outline = {"title": report["title"], "summary": report["summary"], "sections": sections}
        if self.sources_answer is not None:
            outline["sources_answer_request"] = self.sources_answer
        return outline

    def section(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        text = _user_text(body)
        sources = [int(n) for n, _url in _SOURCE_LINE.findall(text)]
        blocks = re.split(r"^\[\d+\] ", text, flags=re.MULTILINE)[1:]
        findings = {n: _FINDING_LINE.findall(block) for n, block in zip(sources, blocks, strict=False)}
        paragraph = [
            {"text": fact, "sources": [number], "quotes": [{"source": number, "quote": quote}]}
            for number in sources
            for fact, quote in findings.get(number, [])[:2]
        ]
        if self.fabricate:
            paragraph.append(
                {
                    "text": f"See also [the study]({FABRICATED_URL}) and {FABRICATED_URL} for more.",
                    "sources": sources[:1],
                    "quotes": [{"source": sources[0] if sources else 1, "quote": FABRICATED_QUOTE}],
                }
            )
            paragraph.append({"text": "An invented source supports this.", "sources": [999], "quotes": []})
        return {"paragraphs": [paragraph], "subsections": []}

    def answer(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        if not self.answerable:
            return {"sources_answer": "no", "paragraphs": [], "suggested_query": "what the sources leave open"}
        section = self.section(body, schema)
        sentences = [sentence for paragraph in section["paragraphs"] for sentence in paragraph]
        kept = [s for s in sentences if not s["sources"] or s["sources"][0] != 999][:3]
        if self.fabricate:  # the fabricated sentences, after the real ones
            kept += [s for s in sentences if s not in kept and ("fabricated" in s["text"] or s["sources"] == [999])]
        return {"sources_answer": "yes" if kept else "no", "paragraphs": [kept], "suggested_query": ""}

    def memory(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        text = _user_text(body)
        ids = [int(n) for n in _WEBSITE_LINE.findall(text)]
        blocks = re.split(r"^\[website \d+\] ", text, flags=re.MULTILINE)[1:]
        facts = {n: _FINDING_LINE.findall(block) for n, block in zip(ids, blocks, strict=False)}
        insights = [{"text": f"Insight: {facts[n][0][0]}", "website_ids": [n]} for n in ids if facts.get(n)]
        contradictions = []
        if len(ids) >= 2:
            first, second = ids[0], ids[1]
            contradictions.append(
                {
                    "text": f"Website {first} and website {second} report different figures for the same measure.",
                    "website_ids": [first, second],
                }
            )
        objective = _OBJECTIVE_LINE.search(text)
        own_gap = f"Still unmeasured: {objective.group(1).strip()}" if objective else ""
        gaps = [{"text": own_gap}] if own_gap else []
        # A branch answers an earlier branch's gap, never the one it leaves open itself.
        answered = [int(n) for n, gap in _GAP_LINE.findall(text) if gap != own_gap][:1]
        return {"insights": insights, "gaps": gaps, "contradictions": contradictions, "answered_gaps": answered}
