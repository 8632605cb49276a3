"""The JSON API. Views check the shape of the input, then hand off to research/control/services.py. No view calls a
model: the follow-up questions are written by a worker, and their request only waits for them a while."""

import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from research.collection.documents import public_links
from research.control import ask, branches, plan_review, quotas, services, shares
from research.live.snapshot import build_snapshot, events_after, research_status, research_summary
from research.models import (
    AnswerStatus,
    AskedQuestion,
    Document,
    DocumentKind,
    FollowUpQuestion,
    ReportSection,
    Research,
    ResearchStatus,
    SectionStatus,
)
from research.types import ResearchId
from research.web import exports
from research.web.citation_links import quote_anchors
from research.web.rendering import render_markdown
from research.web.validation import (
    MAX_SEQ,
    ApiError,
    clean_text,
    int_field,
    json_body,
    list_field,
    seq_param,
    text_field,
    uuid_value,
)
from workers.pipeline.citations import report_title

log = logging.getLogger(__name__)

# The library's search: at most this many characters, of which the first words are matched.
MAX_SEARCH_CHARS = 200
MAX_SEARCH_WORDS = 8

# How often the questions request looks for its questions while it waits: one primary-key read each time.
QUESTIONS_POLL_SECONDS = 0.1

View = Callable[..., HttpResponse]

SERVICE_ERROR_STATUS = {
    services.InvalidInput: 400,
    services.NotStartable: 409,
    services.NotCancellable: 409,
    services.NothingToReport: 409,
    services.StillRunning: 409,
    services.TooManyActive: 429,
    quotas.Throttled: 429,
    branches.QueryNotFound: 404,
    branches.QueryConflict: 409,
    plan_review.NotUnderReview: 409,
    ask.NotAskable: 409,
    shares.NotShareable: 409,
}


def error_response(status: int, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": {"field": field, "message": message}}, status=status)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 handler (researchsite/urls.py): an /api/ path that matches no route (`/api/tokens/-1`, a typo) is a
    JSON error like every other answer of the API, as its clients and its OpenAPI document expect; any other path
    gets the site's page."""
    if request.path.startswith("/api/"):
        return error_response(404, "no such endpoint")
    return defaults.page_not_found(request, exception)


def service_error_response(exc: services.ServiceError) -> JsonResponse:
    if isinstance(exc, quotas.Throttled):  # when to come back: in the header for HTTP clients, in the body for pages
        error = {"field": exc.field, "message": exc.message, "retry_after": exc.retry_after}
        response = JsonResponse({"error": error}, status=SERVICE_ERROR_STATUS[type(exc)])
        response["Retry-After"] = str(exc.retry_after)
        return response
    return error_response(SERVICE_ERROR_STATUS[type(exc)], exc.message, exc.field)


def api_view(*methods: str) -> Callable[[View], View]:
    """Login required (401, not a redirect), allowed methods (405), ApiError → its 4xx JSON answer."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return error_response(401, "authentication required")
            if request.method not in methods:
                response = error_response(405, f"method {request.method} not allowed")
                response["Allow"] = ", ".join(methods)
                return response
            try:
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return error_response(exc.status, exc.message, exc.field)
            except services.ServiceError as exc:
                return service_error_response(exc)

        return wrapper

    return decorate


def own_research(request: HttpRequest, research_id: str) -> Research:
    """The user's research with that id; anyone else's (or none) is a 404, so ids reveal nothing."""
    pk = uuid_value(research_id, "research_id")
    research = Research.objects.filter(pk=pk, owner=cast(User, request.user)).first()  # signed in: api_view
    if research is None:
        raise ApiError(404, "research not found", "research_id")
    return research


def own_research_page(request: HttpRequest, research_id: uuid.UUID) -> Research:
    """For a page of its own (its shares, its schedule): the user's research with that id; anyone else's (or none)
    is the site's 404 page."""
    research = Research.objects.filter(pk=research_id, owner=cast(User, request.user)).first()  # login_required
    if research is None:
        raise Http404("research not found")
    return research


@api_view("POST")
@quotas.spends_money
def questions(request: HttpRequest) -> HttpResponse:
    data = json_body(request)
    prompt = text_field(data, "prompt", settings.MAX_PROMPT_CHARS)
    count = int_field(data, "num_questions", 1, settings.MAX_FOLLOWUP_QUESTIONS)
    research = services.create_draft(request.user, prompt, count)  # a worker writes its questions
    return _await_questions(research.pk, time.monotonic() + settings.QUESTIONS_WAIT_SECONDS)


def _await_questions(research_id: ResearchId, until: float) -> HttpResponse:
    """201 with the questions once a worker has stored them, 502 when writing them failed; at `until` (a
    `time.monotonic()` value) 202: a slow model holds no request, and the questions arrive in the snapshot and over
    the websocket. Each request runs in a thread of its own under daphne (Django's ASGI handler gives every request
    its own thread-sensitive context), so this wait holds up no other request (tests/test_api_questions.py)."""
    while True:
        row = Research.objects.filter(pk=research_id).values_list("status", "error").first()
        status, error = row if row is not None else (None, "")
        if status is None:
            return error_response(404, "research not found", "research_id")  # deleted meanwhile
        if status == ResearchStatus.FAILED:
            return error_response(502, f"the language model could not write the questions: {error}")
        if status == ResearchStatus.CANCELLED:
            return error_response(409, "research was cancelled", "research_id")
        if status != ResearchStatus.DRAFT:
            asked = FollowUpQuestion.objects.filter(research_id=research_id).order_by("position")
            questions = list(asked.values_list("question", flat=True))
            return JsonResponse({"research_id": str(research_id), "questions": questions}, status=201)
        left = until - time.monotonic()
        if left <= 0:
            return JsonResponse({"research_id": str(research_id), "status": "generating_followups"}, status=202)
        time.sleep(min(QUESTIONS_POLL_SECONDS, left))


@api_view("POST")
@quotas.spends_money
def start(request: HttpRequest) -> HttpResponse:
    data = json_body(request)
    breadth = int_field(data, "breadth", 1, settings.MAX_BREADTH)
    depth = int_field(data, "depth", 1, settings.MAX_DEPTH)
    budget = data.get("budget")  # checked by the service (research/control/budgets.py)
    # Checked by the service too (research/control/services.py research_mode, report_words): an unknown mode, adaptive
    # settings out of range or given in fixed mode, or an unknown report length are refused with the field's name.
    options = {key: data.get(key) for key in ("mode", "min_depth", "quality_threshold", "report_length", "review_plan")}
    if data.get("research_id") is not None:
        research = own_research(request, data["research_id"])
        services.check_startable(research)  # before the answers: a draft has no questions to answer yet
        answers = [answer for _, answer in _answers(data, research)]
        services.start_research(research, answers, breadth, depth, budget, **options)
    else:
        prompt = text_field(data, "prompt", settings.MAX_PROMPT_CHARS)
        answered = _questions_with_answers(data)
        with transaction.atomic():  # refused at the cap: the new research is not kept either
            research = services.create_with_answers(request.user, prompt, answered)
            services.start_research(research, None, breadth, depth, budget, **options)
    return JsonResponse({"research_id": str(research.pk)}, status=202)


def _answers(data: dict[str, Any], research: Research) -> list[tuple[str, str]]:
    asked = list(research.questions.order_by("position").values_list("question", flat=True))
    answers = list_field(data, "answers", settings.MAX_FOLLOWUP_QUESTIONS)
    if len(answers) != len(asked):
        raise ApiError(400, f"expected {len(asked)} answers, one per question, got {len(answers)}", "answers")
    checked = []
    for index, answer in enumerate(answers):
        checked.append((asked[index], clean_text(answer, "answers", settings.MAX_ANSWER_CHARS, f"answer {index + 1}")))
    return checked


def _questions_with_answers(data: dict[str, Any]) -> list[tuple[str, str]]:
    items = list_field(data, "questions", settings.MAX_FOLLOWUP_QUESTIONS)
    pairs = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError(400, f"question {index + 1} must be an object with question and answer", "questions")
        question = text_field(item, "question", settings.MAX_ANSWER_CHARS)
        answer = text_field(item, "answer", settings.MAX_ANSWER_CHARS, required=False)
        pairs.append((question, answer))
    return pairs


@api_view("GET")
def research_list(request: HttpRequest) -> HttpResponse:
    """The user's researches, newest first; `?q=` keeps those whose title or request holds every word of it."""
    rows = Research.objects.filter(owner=cast(User, request.user))  # signed in: api_view
    query = clean_text(request.GET.get("q", ""), "q", MAX_SEARCH_CHARS)
    for word in query.split()[:MAX_SEARCH_WORDS]:
        rows = rows.filter(Q(title__icontains=word) | Q(prompt__icontains=word))
    return JsonResponse({"researches": [research_summary(r) for r in rows.order_by("-created_at")[:500]]})


@api_view("GET", "PATCH", "DELETE")
def research_detail(request: HttpRequest, research_id: str) -> HttpResponse:
    """The research's snapshot; PATCH {"title"} renames it; DELETE deletes it (once it is not under way)."""
    research = own_research(request, research_id)
    if request.method == "PATCH":
        body = json_body(request, {"title"})
        research = services.rename(research, text_field(body, "title", services.TITLE_MAX_CHARS))
        return JsonResponse(research_summary(research))
    if request.method == "DELETE":
        services.delete(research)
        return HttpResponse(status=204)
    return JsonResponse(build_snapshot(research.pk))


@api_view("GET")
def research_progress(request: HttpRequest, research_id: str) -> HttpResponse:
    """{"research", "progress"}: the snapshot's state and counts without its tree, for clients that poll."""
    research = own_research(request, research_id)
    return JsonResponse(research_status(research.pk))


@api_view("GET")
def research_events(request: HttpRequest, research_id: str) -> HttpResponse:
    """Events after `?after=<seq>`: how a client that missed pushes catches up."""
    after = seq_param(request.GET.get("after", "0"))
    if after is None:
        raise ApiError(400, f"must be an integer from 0 to {MAX_SEQ}", "after")
    research = own_research(request, research_id)
    return JsonResponse({"events": events_after(research.pk, after, 5000)})


def _html(markdown: str) -> HttpResponse:
    """Markdown as sanitised HTML, for the page to insert (the report, a section, an answer): never cached shared."""
    response = HttpResponse(render_markdown(markdown), content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "private, no-cache"
    return response


def reader_links(request: HttpRequest, markdown: str) -> str:
    """The markdown with its collection citations as stable links at the address this reader reached the app at:
    what the downloads and exports carry."""
    return public_links(markdown, request.build_absolute_uri("/"))


def shown_links(request: HttpRequest, markdown: str, research_id: object) -> str:
    """`reader_links`, and every citation pointed at its quote for the page (research/web/citation_links.py), a
    document's page linking back to the research."""
    base = request.build_absolute_uri("/")
    return quote_anchors(public_links(markdown, base), base, research_id)


def _document(
    request: HttpRequest, research_id: str, kind: str, filename: str, html: bool = False, titled: bool = False
) -> HttpResponse:
    """The research's report or error output: its markdown, or as sanitised HTML for the report view to insert.
    `titled`: the report's download, named after its title as the PDF and Word exports are, and taking
    `?conversation=1` as they do."""
    research = own_research(request, research_id)
    appendix = _conversation_asked(request) if titled else False
    document = _version(Document.objects.filter(research=research, kind=kind), request).order_by("-version").first()
    if document is None:
        raise ApiError(404, f"this research has no {filename} (yet)")
    markdown = document.markdown
    if appendix:
        markdown = exports.with_conversation(markdown, _answered(research))
    if html:
        return _html(shown_links(request, markdown, research.pk))
    markdown = reader_links(request, markdown)
    response = HttpResponse(markdown, content_type="text/markdown; charset=utf-8")
    if titled:
        title = report_title(document.markdown) or research.title or "Research report"
        version = document.version if request.GET.get("version") is not None else None
        response["Content-Disposition"] = exports.content_disposition(title, "md", version)
    else:
        response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


@api_view("GET")
def report_md(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document(request, research_id, DocumentKind.REPORT, "report.md", titled=True)


@api_view("GET")
def error_output_md(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document(request, research_id, DocumentKind.ERROR_OUTPUT, "error-output.md")


@api_view("GET")
def report_section_html(request: HttpRequest, research_id: str, position: int) -> HttpResponse:
    """One written section of the report being written, as sanitised HTML: the report view shows it as it lands."""
    research = own_research(request, research_id)
    section = ReportSection.objects.filter(
        research=research, version=research.report_version, position=position, status=SectionStatus.WRITTEN
    ).first()
    if section is None:
        raise ApiError(404, "this section is not written (yet)")
    return _html(shown_links(request, section.markdown, research.pk))


@api_view("GET")
def report_html(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document(request, research_id, DocumentKind.REPORT, "report.md", html=True)


@api_view("GET")
def error_output_html(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document(request, research_id, DocumentKind.ERROR_OUTPUT, "error-output.md", html=True)


@api_view("POST")
def cancel(request: HttpRequest, research_id: str) -> HttpResponse:
    research = own_research(request, research_id)
    services.cancel(research)
    return JsonResponse({"research_id": str(research.pk), "status": ResearchStatus.CANCELLED})


@api_view("POST")
@quotas.spends_money
def report_found(request: HttpRequest, research_id: str) -> HttpResponse:
    """A cancelled research's report, written from what it analysed before the cancel (a partial report)."""
    research = own_research(request, research_id)
    services.report_what_was_found(research)
    return JsonResponse({"research_id": str(research.pk), "status": ResearchStatus.RUNNING}, status=202)


# --- Branches: cancel or retry one query and its subtree (research/control/branches.py) ---


@api_view("POST")
def query_cancel(request: HttpRequest, research_id: str, query_id: int) -> HttpResponse:
    research = own_research(request, research_id)
    cancelled = branches.cancel_query(research, query_id)
    return JsonResponse({"query_id": query_id, "cancelled": cancelled})


@api_view("POST")
@quotas.spends_money
def query_retry(request: HttpRequest, research_id: str, query_id: int) -> HttpResponse:
    research = own_research(request, research_id)
    query = branches.retry_query(research, query_id)
    return JsonResponse({"query_id": query.pk, "status": query.status, "retries": query.retries}, status=202)


@api_view("POST")
@quotas.spends_money
def deepen(request: HttpRequest, research_id: str) -> HttpResponse:
    """Dig deeper into a completed research: {"query", "objective"} (objective optional), or {"gap_id"} for one
    of its open gaps, optionally with {"section"} (the report section the user started from)."""
    research = own_research(request, research_id)
    body = json_body(request, {"query", "objective", "gap_id", "section"})
    source: dict[str, Any] = {"by": "user"}
    if "gap_id" in body:
        if "query" in body:
            raise ApiError(400, "give a query or a gap_id, not both", "gap_id")
        gap_id = int_field(body, "gap_id", 1, MAX_SEQ)
        gap = branches.open_gap(research, gap_id)
        query = gap[: branches.MAX_BRANCH_QUERY_CHARS]
        objective = f"Answer the open question the research left: {gap}"[: branches.MAX_BRANCH_OBJECTIVE_CHARS]
        source["gap_id"] = gap_id
    else:
        query = text_field(body, "query", branches.MAX_BRANCH_QUERY_CHARS)
        objective = text_field(body, "objective", branches.MAX_BRANCH_OBJECTIVE_CHARS, required=False) or query
    if "section" in body:
        source["section"] = text_field(body, "section", 200)
    branch = branches.deepen(research, query, objective, source)
    return JsonResponse({"query_id": branch.pk, "round": branch.round}, status=202)


# --- Ask: a question about a completed research, answered by a worker from what it stored (research/control/ask.py) ---


@api_view("POST")
@quotas.spends_money
def ask_question(request: HttpRequest, research_id: str) -> HttpResponse:
    """{"question": str} (1 to 2,000 characters): 202 {"id"}; the answer arrives in the snapshot's conversation."""
    research = own_research(request, research_id)
    body = json_body(request, {"question"})
    question = text_field(body, "question", ask.MAX_QUESTION_CHARS)
    asked = ask.ask(research, question)
    return JsonResponse({"id": asked.pk, "status": asked.status}, status=202)


@api_view("GET")
def answer_html(request: HttpRequest, research_id: str, question_id: int) -> HttpResponse:
    """One answer of the conversation as sanitised HTML, for the thread under the report."""
    research = own_research(request, research_id)
    asked = AskedQuestion.objects.filter(research=research, pk=question_id, status=AnswerStatus.ANSWERED).first()
    if asked is None:
        raise ApiError(404, "this question is not answered (yet)")
    return _html(shown_links(request, asked.answer, research.pk))


# --- Review the plan: edit the top-level queries of a research awaiting review, then approve
# (research/control/plan_review.py)


@api_view("PUT")
def plan(request: HttpRequest, research_id: str) -> HttpResponse:
    """Replace the plan under review: {"queries": [{"query", "objective"}, ...]} (objective optional)."""
    research = own_research(request, research_id)
    body = json_body(request, {"queries"})
    items = list_field(body, "queries", 2 * settings.MAX_BREADTH)
    planned = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"query", "objective"}:
            raise ApiError(400, f"query {index + 1} must be an object with query and objective", "queries")
        query = text_field(item, "query", plan_review.MAX_QUERY_CHARS)
        objective = text_field(item, "objective", plan_review.MAX_OBJECTIVE_CHARS, required=False) or query
        planned.append(plan_review.PlannedQuery(query, objective))
    created = plan_review.edit_plan(research, planned)
    return JsonResponse({"queries": [{"id": q.pk, "query": q.query, "objective": q.objective} for q in created]})


@api_view("POST")
def plan_approve(request: HttpRequest, research_id: str) -> HttpResponse:
    research = own_research(request, research_id)
    plan_review.approve_plan(research)
    return JsonResponse({"research_id": str(research.pk), "status": ResearchStatus.RUNNING}, status=202)


def _version(documents: QuerySet, request: HttpRequest) -> QuerySet:
    """`?version=N` picks one report version; without it, the latest."""
    raw = request.GET.get("version")
    if raw is None:
        return documents
    # Parsed as `after` is: str.isdigit() and int() alone let "²" (a digit int() refuses) and 5,000 digits (more
    # than int() converts) through to a 500 (tests/test_openapi.py).
    version = seq_param(raw)
    if not version:
        raise ApiError(400, f"must be an integer from 1 to {MAX_SEQ}", "version")
    return documents.filter(version=version)


# --- Exports: the report as PDF or Word, built per request from its markdown (research/web/exports.py) ---


def _conversation_asked(request: HttpRequest) -> bool:
    """`?conversation=1` appends the research's answered questions to an export; `0` or none leaves it as it is."""
    raw = request.GET.get("conversation")
    if raw not in (None, "0", "1"):
        raise ApiError(400, "must be 0 or 1", "conversation")
    return raw == "1"


def _answered(research: Research) -> list[tuple[str, str]]:
    """The research's answered questions and their answers, in the order they were asked."""
    rows = AskedQuestion.objects.filter(research=research, status=AnswerStatus.ANSWERED).order_by("position")
    return list(rows.values_list("question", "answer"))


def _export(request: HttpRequest, research_id: str, extension: str, content_type: str, build: Callable) -> HttpResponse:
    research = own_research(request, research_id)
    appendix = _conversation_asked(request)
    document = (
        _version(Document.objects.filter(research=research, kind=DocumentKind.REPORT), request)
        .order_by("-version")
        .first()
    )
    if document is None:
        raise ApiError(404, f"this research has no report.{extension} (yet)")
    title = report_title(document.markdown) or research.title or "Research report"
    meta = exports.ExportMeta(title, research.prompt, document.created_at, document.version)
    markdown = exports.with_conversation(document.markdown, _answered(research)) if appendix else document.markdown
    response = HttpResponse(build(reader_links(request, markdown), meta), content_type=content_type)
    version = document.version if request.GET.get("version") is not None else None
    response["Content-Disposition"] = exports.content_disposition(title, extension, version)
    response["Cache-Control"] = "private, no-cache"
    return response


@api_view("GET")
def report_pdf(request: HttpRequest, research_id: str) -> HttpResponse:
    return _export(request, research_id, "pdf", exports.PDF_CONTENT_TYPE, exports.report_pdf)


@api_view("GET")
def report_docx(request: HttpRequest, research_id: str) -> HttpResponse:
    return _export(request, research_id, "docx", exports.DOCX_CONTENT_TYPE, exports.report_docx)
