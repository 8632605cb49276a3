"""Ask: answer a question about a completed research from what it stored, never from the web.

The answer is written from the research's findings that match the question best, and from passages of the stored
text of the pages they came from (what an analysis left out may still answer it). It goes through the report's
checks (workers/pipeline/citations.py): a citation holds only for an analysed page of this research, a quote only
when it is on that page, a sentence only with a citation that holds, and any other link is dropped. When the
sources do not answer, the answer says so, cites nothing, and offers a query to dig deeper with.
"""

import logging

from django.db.models import F
from django.utils import timezone

from research.models import AnswerStatus, AskedQuestion, EventType, Page, PageStatus, Research
from research.record.events import record_event
from research.record.transactions import research_transaction
from research.text.lexical import BM25, counts, sentences, terms
from research.text.quotes import is_quotable
from research.types import ResearchId
from workers.agents.engines import engine_for
from workers.agents.report_writer import SourceNote
from workers.clients.llm import charged_to
from workers.pipeline import fencing, heartbeat
from workers.pipeline.citations import drop_stray_links, render_answer
from workers.pipeline.fencing import Lease
from workers.pipeline.locks import claim_owner, claimable, lease_token
from workers.pipeline.report import PageTexts, current_findings

log = logging.getLogger(__name__)

# What the writer is given, best first: findings, the pages whose stored text is searched for passages, and the
# passages taken from them. Small, so that a model with a small window still gets the best of them whole.
MAX_FINDINGS = 24
MAX_PASSAGE_PAGES = 6
MAX_PASSAGES = 8
UNANSWERED = "The sources of this research do not answer this question."
PARTLY = "The sources of this research answer this question only in part."

_OPEN = [AnswerStatus.PENDING, AnswerStatus.WRITING]


def answer_question(question_id: int, task_id: str | None = None) -> None:
    """Claim the question (once), answer it from the research's sources, check the answer and store it."""
    owner = claim_owner(task_id)
    row = AskedQuestion.objects.filter(pk=question_id).values("research_id", "status").first()
    if row is None or row["status"] not in _OPEN:
        return
    research_id = row["research_id"]
    current = AskedQuestion.objects.filter(pk=question_id, status__in=_OPEN)
    token = lease_token(owner)
    with research_transaction(research_id):
        if not current.filter(claimable(owner)).update(
            status=AnswerStatus.WRITING, claimed_by=token, claimed_at=timezone.now()
        ):
            return  # answered, or held by another delivery
        record_event(research_id, EventType.ANSWER_WRITING_START, {"id": question_id})
    heartbeat.took_up()
    with fencing.holding(Lease(AskedQuestion, question_id, token)):
        _answer(question_id, research_id)


def _answer(question_id: int, research_id: ResearchId) -> None:
    asked = AskedQuestion.objects.get(pk=question_id)
    research = Research.objects.get(pk=research_id)
    sources, page_texts = relevant_sources(research_id, asked.question)
    with charged_to(research_id):
        result = engine_for(research.engine).answer(asked.question, research.prompt, sources)
    page_texts.load(source.url for source in sources)
    markdown, stats = render_answer(result.paragraphs, sources, page_texts)
    markdown, stats["stray_links_dropped"] = drop_stray_links(markdown, [source.url for source in sources])
    answered = bool(markdown) and result.sources_answer != "no"
    suggested = result.suggested_query if result.sources_answer != "yes" or not answered else ""
    if not answered:
        markdown = UNANSWERED + "\n"
    elif result.sources_answer == "partly":
        markdown = f"{PARTLY}\n\n{markdown}"
    stats["sources_given"] = len(sources)
    with research_transaction(research_id):
        fencing.check()
        if not AskedQuestion.objects.filter(pk=question_id, status=AnswerStatus.WRITING).update(
            status=AnswerStatus.ANSWERED,
            answer=markdown,
            sources_answer=answered,
            suggested_query=suggested[:300],
            stats=stats,
            answered_at=timezone.now(),
            claimed_at=timezone.now(),
        ):
            return  # another delivery stored it first
        record_event(
            research_id,
            EventType.ANSWER_WRITTEN,
            {"id": question_id, "status": AnswerStatus.ANSWERED, "sources_answer": answered},
        )


def answer_failed(question_id: int, error: BaseException) -> None:
    """A question whose answer could not be written (the model failed past its retries): failed, with why."""
    row = AskedQuestion.objects.filter(pk=question_id).values("research_id").first()
    if row is None:
        return
    with research_transaction(row["research_id"]):
        if AskedQuestion.objects.filter(pk=question_id, status__in=_OPEN).update(
            status=AnswerStatus.FAILED, error=str(error)[:2000]
        ):
            record_event(
                row["research_id"], EventType.ANSWER_WRITTEN, {"id": question_id, "status": AnswerStatus.FAILED}
            )


def relevant_sources(research_id: ResearchId, question: str) -> tuple[list[SourceNote], PageTexts]:
    """The research's analysed pages that bear on the question, best first, numbered from 1: each with its findings
    that match the question (BM25 over fact and quote) and the sentences of its stored text that match it best.
    Pages are ranked by their best finding."""
    wanted = {term: 1.0 for term in terms(question)}
    rows = list(
        current_findings(research_id)
        .order_by("website__query__depth", "website_id", "position")
        .values_list(
            "website__url", "website__title", "fact", "quote", "website__page__dated", "website__page__standing"
        )
    )
    if not wanted or not rows:
        return [], PageTexts(research_id, [])
    chosen = _best([counts(terms(f"{row[2]} {row[3]}")) for row in rows], wanted, MAX_FINDINGS)
    # A question in other words than the pages' matches little: the first findings of the tree (the top-level
    # branches' first) fill the rest, so that a model can still answer it, or say that they do not.
    taken = set(chosen)
    chosen += [index for index in range(len(rows)) if index not in taken][: MAX_FINDINGS - len(chosen)]
    by_url: dict[str, SourceNote] = {}
    for index in chosen:
        url, title, fact, quote, dated, standing = rows[index]
        note = by_url.get(url)
        if note is None:
            # Its date and standing: the answer, like the report, names which of its sources are old.
            note = by_url[url] = SourceNote(
                number=len(by_url) + 1, url=url, title=title, dated=dated, standing=standing or "current"
            )
        if (fact, quote) not in note.findings:
            note.findings.append((fact, quote))
    _add_passages(research_id, wanted, list(by_url.values())[:MAX_PASSAGE_PAGES])
    return list(by_url.values()), PageTexts(research_id, by_url)


def _add_passages(research_id: ResearchId, wanted: dict[str, float], notes: list[SourceNote]) -> None:
    """The sentences of these pages' stored text that match the question best, added to their pages' findings
    (each its own quote: a sentence of the page is on the page)."""
    texts = dict(
        Page.objects.filter(
            research_id=research_id,
            url__in=[n.url for n in notes],
            status=PageStatus.FETCHED,
            run_round=F("research__run_round"),
        ).values_list("url", "text")
    )
    candidates: list[tuple[SourceNote, str]] = []
    for note in notes:
        quoted = {" ".join(quote.split()) for _, quote in note.findings}
        for sentence in sentences(texts.get(note.url, "")):
            text = " ".join(sentence.split())
            if text not in quoted and is_quotable(text):
                candidates.append((note, text))
    if not candidates:
        return
    for index in _best([counts(terms(text)) for _, text in candidates], wanted, MAX_PASSAGES):
        note, text = candidates[index]
        note.findings.append((text, text))


def _best(bags: list[dict[str, int]], wanted: dict[str, float], limit: int) -> list[int]:
    """The indexes of the `limit` bags that match `wanted` best (BM25), best first; none that match nothing."""
    scores = BM25(bags).scores(wanted)
    return sorted((i for i, score in enumerate(scores) if score > 0), key=lambda i: (-scores[i], i))[:limit]
