"""Which agents a research uses: the LLM agents, or the extractive engine that needs no model.

Both engines offer the same nine functions with the same signatures and return shapes, so the pipeline never
knows which one it calls. What a model call costs is recorded by the LLM client as it is made
(workers/clients/llm.py), not returned by the agents.
"""

from __future__ import annotations

from typing import Any, Protocol

from workers.agents.types import (
    Ancestor,
    Answer,
    BranchEvaluation,
    Finding,
    KnownMemory,
    Learning,
    MemorySource,
    MemoryUpdate,
    PlannedQuery,
    ResearchEvaluation,
    SourceNote,
)

LLM = "llm"
EXTRACTIVE = "extractive"


class Engine(Protocol):
    """What the pipeline calls. The extractive module and _LLMEngine both satisfy it (mypy checks `engine_for`)."""

    def ask_questions(self, prompt: str, count: int, *, deadline: float | None = None) -> list[str]: ...

    def plan_queries(
        self,
        prompt: str,
        answers: list[tuple[str, str]],
        ancestors: list[Ancestor],
        count: int,
        focus: list[str] | None = None,
    ) -> list[PlannedQuery]: ...

    def analyze(self, objective: str, query: str, url: str, title: str, text: str) -> list[Finding]: ...

    def outline(
        self, prompt: str, answers: list[tuple[str, str]], objectives: list[str], sources: list[SourceNote]
    ) -> dict[str, Any]: ...

    def write_section(
        self,
        prompt: str,
        heading: str,
        learnings: list[str],
        sources: list[SourceNote],
        *,
        answers: list[tuple[str, str]] | None = None,
        outline_headings: list[str] | None = None,
        words: int | None = None,
    ) -> dict[str, Any]: ...

    def update_memory(
        self, prompt: str, objective: str, sources: list[MemorySource], known: KnownMemory
    ) -> MemoryUpdate: ...

    def answer(self, question: str, prompt: str, sources: list[SourceNote]) -> Answer: ...

    def evaluate_branch(
        self,
        prompt: str,
        answers: list[tuple[str, str]],
        query: str,
        objective: str,
        depth: int,
        round_: int,
        learnings: list[Learning],
    ) -> BranchEvaluation: ...

    def evaluate_research(
        self, prompt: str, answers: list[tuple[str, str]], round_: int, learnings: list[Learning]
    ) -> ResearchEvaluation: ...


class _LLMEngine:
    """The LLM agents, seen as one engine."""

    def __init__(self) -> None:
        from workers.agents import (
            answer_writer,
            evaluator,
            memory_agent,
            prompt_analyzer,
            query_generator,
            report_writer,
            website_analyzer,
        )

        self.ask_questions = prompt_analyzer.ask_questions
        self.plan_queries = query_generator.plan_queries
        self.analyze = website_analyzer.analyze
        self.outline = report_writer.outline
        self.write_section = report_writer.write_section
        self.update_memory = memory_agent.update_memory
        self.evaluate_branch = evaluator.evaluate_branch
        self.evaluate_research = evaluator.evaluate_research
        self.answer = answer_writer.answer


def engine_for(name: str) -> Engine:
    if name == EXTRACTIVE:
        from workers.agents import extractive

        return extractive
    return _LLMEngine()
