"""The bench part `quality`: a due-diligence research over the share, graded against the checkpoints.

Two runs of the same request, at breadth 4 and depth 2, on real worker processes, with daphne serving the
collection's documents to them as it does in production:

1. the extractive engine (no model): its report graded per checkpoint (grade.py), with the share's file each
   verdict's sentence cites;
2. the loopback model (devtools FakeLLM with the research model), its queries at every depth those the extractive
   run planned, and an analyst that reports each page's sentences holding figures first, up to the analyser's limit.
   The fake writer only copies what it is given, so this run measures the pipeline, not a model: for each
   checkpoint, whether its source file was analysed, whether the passage holding the current figure reached a
   report writer's prompt (the outline's digest or a section's packet, read from the fake's request log), whether a
   stale figure reached one, and whether the current figure's only citations in the report are archived or
   superseded files.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.quality.grade import Benchmark, Checkpoint, Verdict, contains, current_figure_urls, grade, load
from bench.quality.share import IndexedShare, build_and_index

SHAPE = (4, 2)
# A worker of a few threads: the runs are small, and the machine's cores are what the timings share.
WORKER_THREADS = 8
# Workers research the collection alone, with no web search; the extractive run has no model at all.
LOCAL_SEARCH = {"SEARCH_PROVIDERS": "local", "SEARXNG_URL": ""}
EXTRACTIVE_ENV = {**LOCAL_SEARCH, "RESEARCH_ENGINE": "extractive", "OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
LOOPBACK_ENV = {**LOCAL_SEARCH, "RESEARCH_ENGINE": "llm"}
# The writer's requests: the outline (with its digest of every finding), the sections' packets, and the report in
# one piece where a research writes it so.
WRITER_SCHEMAS = ("report_outline", "report_section", "research_report")
ANALYSER_SCHEMA = "website_analysis"
# The analyser's fenced page (workers/agents/website_analyzer.py): marker lines with a token of their own, then
# the URL and title lines, a blank line, the text.
_FENCED_PAGE = re.compile(r"^<<<PAGE-(\w+)>>>\n.*?\n\n(.*)\n<<<END-PAGE-\1>>>$", re.MULTILINE | re.DOTALL)


@dataclass
class QualityRun:
    engine: str
    research_id: str
    status: str
    wall: float
    markdown: str
    verdicts: list[Verdict]
    analysed: set[str]  # the share's files the research analysed
    queries: list[str]  # its top-level queries, in order
    children: dict[str, list[str]]  # each parent query's children, by the parent's text, in order


@dataclass
class Reach:
    """Where one checkpoint's current passage got to in the loopback run."""

    checkpoint: str
    analysed: bool  # its source file was analysed
    shown_to_analyst: bool  # a page shown to the analyser held every required item
    in_writer_prompt: bool  # one line of a writer's prompt held every required item
    stale_in_writer_prompt: tuple[str, ...]  # stale items some writer's prompt line held
    verdict: str  # the loopback report's grade
    figure_sources: tuple[str, ...]  # the files the report cites for the current figure
    only_outdated: bool  # ... and all of them archived or superseded


@dataclass
class QualityResult:
    benchmark: Benchmark
    share: IndexedShare
    extractive: QualityRun
    loopback: QualityRun
    reach: list[Reach] = field(default_factory=list)


def user_text(body: dict[str, Any]) -> str:
    from devtools.fakes.llm import message_text

    return "\n".join(message_text(m) for m in body.get("messages", []) if m.get("role") == "user")


def figure_analyst(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The analyser as a model that looks for figures: the page's sentences holding a digit first, then the rest,
    in page order, up to the schema's limit; each sentence its own fact and quote (so the quote is on the page)."""
    from research.text.lexical import sentences

    fenced = _FENCED_PAGE.search(user_text(body))
    found = sentences(fenced.group(2)) if fenced else []
    limit = schema["properties"]["facts"].get("maxItems", 12)
    figures = [s for s in found if any(ch.isdigit() for ch in s)]
    chosen = (figures + [s for s in found if s not in figures])[:limit]
    ordered = [s for s in found if s in chosen]
    return {"facts": [{"fact": sentence, "quote": sentence} for sentence in ordered]}


def run_research(owner: Any, benchmark: Benchmark, engine: str, timeout: float, share: IndexedShare) -> QualityRun:
    """The due-diligence request, its follow-up questions answered, started as the API starts it; waits for it."""
    from bench import engine as engines
    from research.control import services
    from research.models import Document, Research, SerpQuery, Website, WebsiteStatus

    research = services.create_with_answers(owner, benchmark.prompt, list(benchmark.answers))
    # The engine is fixed when a research is created, from this process's settings (the bench's point at the fakes).
    Research.objects.filter(pk=research.pk).update(engine=engine)
    research_id = str(research.pk)
    began = time.monotonic()
    engines.start(research_id, *SHAPE)
    engines.wait(research_id, timeout)
    wall = time.monotonic() - began
    research = Research.objects.get(pk=research_id)
    report = Document.objects.filter(research_id=research_id, kind="report").order_by("-version").first()
    markdown = report.markdown if report else ""
    analysed = Website.objects.filter(research_id=research_id, status=WebsiteStatus.ANALYZED)
    queries = SerpQuery.objects.filter(research_id=research_id, parent=None).order_by("position")
    children: dict[str, list[str]] = {}
    for parent, child in (
        SerpQuery.objects.filter(research_id=research_id, parent__isnull=False)
        .order_by("parent_id", "position")
        .values_list("parent__query", "query")
    ):
        children.setdefault(parent, []).append(child)
    return QualityRun(
        engine=engine,
        research_id=research_id,
        status=research.status,
        wall=wall,
        markdown=markdown,
        verdicts=grade(benchmark.checkpoints, markdown),
        analysed={share.path_of(url) for url in analysed.values_list("url", flat=True)},
        queries=list(queries.values_list("query", flat=True)),
        children=children,
    )


def prompt_lines(bodies: Iterable[dict[str, Any]]) -> list[str]:
    return [line for body in bodies for line in user_text(body).splitlines() if line.strip()]


def reach(
    checkpoint: Checkpoint, run: QualityRun, share: IndexedShare, benchmark: Benchmark, llm: Any
) -> Reach:  # llm: a devtools.fakes.FakeLLM
    pages = [fenced.group(2) for body in llm.calls(ANALYSER_SCHEMA) if (fenced := _FENCED_PAGE.search(user_text(body)))]
    writer = prompt_lines(body for name in WRITER_SCHEMAS for body in llm.calls(name))
    sources = tuple(dict.fromkeys(share.path_of(url) for url in current_figure_urls(checkpoint, run.markdown)))
    verdict = next(v.verdict for v in run.verdicts if v.checkpoint == checkpoint.id)
    return Reach(
        checkpoint=checkpoint.id,
        analysed=checkpoint.source in run.analysed,
        shown_to_analyst=any(all(contains(page, item) for item in checkpoint.required) for page in pages),
        in_writer_prompt=any(all(contains(line, item) for item in checkpoint.required) for line in writer),
        stale_in_writer_prompt=tuple(item for item in checkpoint.stale if any(contains(line, item) for line in writer)),
        verdict=verdict,
        figure_sources=sources,
        only_outdated=bool(sources) and all(source in benchmark.outdated for source in sources),
    )


def measure(stack: Any, owner: Any, timeout: float, say: Any) -> QualityResult:
    """Both runs on `stack` (bench/stack.py), with a daphne of their own serving the collection."""
    from bench.latency import ZERO
    from devtools.servers import PLAIN_HTTP, DaphneServer, process_env

    benchmark = load()
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as folder:
        share = build_and_index(Path(folder))
        if share.failed or share.unsupported:
            raise RuntimeError(f"the share did not index completely: {share.failed} {share.unsupported}")
        say(f"quality: the share indexed, {len(share.files)} files")
        daphne = DaphneServer(process_env({**PLAIN_HTTP, "DEBUG": "false"}), name="daphne-bench-quality").start()
        try:
            # Workers fetch the collection's documents from daphne, through the signed links the scrape step makes.
            served = {"APP_BASE_URL": daphne.url, "SCRAPE_ALLOWED_PRIVATE_HOSTS": f"127.0.0.1:{daphne.port}"}
            with stack.workers(1, WORKER_THREADS, "bench-quality-x-", env={**EXTRACTIVE_ENV, **served}):
                extractive = run_research(owner, benchmark, "extractive", timeout, share)
            say(f"quality: extractive run {extractive.status} in {extractive.wall:.1f} s")
            model = stack.fakes.prepare(ZERO)
            # The same searches as the extractive run, at every depth: this run measures what the pipeline does
            # with what they find, not the fake's follow-up queries.
            model.top_names = list(extractive.queries)
            model.child_names = extractive.children
            stack.fakes.llm.handlers[ANALYSER_SCHEMA] = figure_analyst
            with stack.workers(1, WORKER_THREADS, "bench-quality-m-", env={**LOOPBACK_ENV, **served}):
                loopback = run_research(owner, benchmark, "llm", timeout, share)
            say(f"quality: loopback-model run {loopback.status} in {loopback.wall:.1f} s")
            result = QualityResult(benchmark, share, extractive, loopback)
            result.reach = [reach(c, loopback, share, benchmark, stack.fakes.llm) for c in benchmark.checkpoints]
        finally:
            daphne.stop()
    return result
