"""Which agents a research uses: the LLM agents, or the extractive engine that needs no model.

Both engines offer the same eight functions with the same signatures and return shapes, so the pipeline never
knows which one it calls. What a model call costs is recorded by the LLM client as it is made
(workers/clients/llm.py), not returned by the agents.
"""

from types import ModuleType
from typing import Protocol

LLM = "llm"
EXTRACTIVE = "extractive"


class Engine(Protocol):
    ask_questions: object
    plan_queries: object
    analyze: object
    outline: object
    write_section: object
    update_memory: object
    evaluate_branch: object
    evaluate_research: object


class _LLMEngine:
    """The LLM agents, seen as one engine."""

    def __init__(self) -> None:
        from workers.agents import (
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


def engine_for(name: str) -> Engine | ModuleType:
    if name == EXTRACTIVE:
        from workers.agents import extractive

        return extractive
    return _LLMEngine()
