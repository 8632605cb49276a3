"""The report's steps run in the test process, in the order the workers would run the tasks they queue."""

from typing import Any
from unittest import mock

from research.models import ReportSection, SectionStatus
from workers.pipeline.report import assemble_report, write_report, write_section


def sentence(text: str, sources: list[int], quotes: list[tuple[int, str]] = ()) -> dict:
    """A sentence of the report writer's answer: its text, the sources it cites and the quotes it rests on."""
    return {"text": text, "sources": sources, "quotes": [{"source": s, "quote": q} for s, q in quotes]}


def write_report_now(research_id: Any) -> None:
    """Plan the outline, write every section, then assemble the report, each as its task would. Nothing is
    published: a worker of the test session must not take a step up meanwhile."""
    with mock.patch("research.control.dispatch.queue"), mock.patch("research.control.dispatch.publish_batch"):
        write_report(str(research_id))
        unwritten = ReportSection.objects.filter(
            research_id=research_id, status__in=[SectionStatus.PENDING, SectionStatus.WRITING]
        ).order_by("position")
        for section_id in unwritten.values_list("pk", flat=True):
            write_section(section_id)
        assemble_report(str(research_id))


def outline_and_sections(report: Any) -> tuple[Any, Any]:
    """FakeLLM handlers for the outline and the section requests from a handler of the one-call report: the
    report's title and summary, one section per section of it, each written as that section."""

    def outline(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        whole = report(body, schema)
        sections = [{"heading": s["heading"], "findings": [], "learnings": []} for s in whole["sections"]]
        return {"title": whole["title"], "summary": whole["summary"], "sections": sections}

    def section(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        whole = report(body, schema)
        first = whole["sections"][0] if whole["sections"] else {"paragraphs": [], "subsections": []}
        return {"paragraphs": first["paragraphs"], "subsections": first.get("subsections", [])}

    return outline, section
