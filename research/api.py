"""The JSON API of SPEC §2 and §5. Views validate, then hand off to the pipeline or queue a task."""

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from research.models import (
    ACTIVE_STATUSES,
    Document,
    DocumentKind,
    Event,
    FollowUpQuestion,
    Research,
    ResearchStatus,
)
from research.rendering import render_markdown
from research.snapshot import build_snapshot, research_summary
from research.validation import ApiError, clean_text, int_field, json_body, list_field, text_field, uuid_value
from workers.agents.engines import default_engine
from workers.errors import PermanentError, TransientError
from workers.pipeline.followups import generate_followups
from workers.pipeline.lifecycle import cancel_research
from workers.tasks import start_research_task

log = logging.getLogger(__name__)

View = Callable[..., HttpResponse]


def error_response(status: int, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": {"field": field, "message": message}}, status=status)


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

        return wrapper

    return decorate


def own_research(request: HttpRequest, research_id: str) -> Research:
    """The user's research with that id; anyone else's (or none) is a 404, so ids reveal nothing."""
    pk = uuid_value(research_id, "research_id")
    research = Research.objects.filter(pk=pk, owner=request.user).first()
    if research is None:
        raise ApiError(404, "research not found", "research_id")
    return research


def make_title(prompt: str, limit: int = 90) -> str:
    first_line = " ".join(prompt.split())
    if len(first_line) <= limit:
        return first_line
    return first_line[:limit].rsplit(" ", 1)[0] + "…"


@api_view("POST")
def questions(request: HttpRequest) -> HttpResponse:
    data = json_body(request)
    prompt = text_field(data, "prompt", settings.MAX_PROMPT_CHARS)
    count = int_field(data, "num_questions", 1, settings.MAX_FOLLOWUP_QUESTIONS)
    research = Research.objects.create(
        owner=request.user, prompt=prompt, title=make_title(prompt), num_questions=count, engine=default_engine()
    )
    try:
        asked = generate_followups(research.pk)
    except (TransientError, PermanentError) as exc:
        return error_response(502, f"the language model could not write the questions: {exc}")
    return JsonResponse({"research_id": str(research.pk), "questions": asked}, status=201)


@api_view("POST")
def start(request: HttpRequest) -> HttpResponse:
    data = json_body(request)
    breadth = int_field(data, "breadth", 1, settings.MAX_BREADTH)
    depth = int_field(data, "depth", 1, settings.MAX_DEPTH)
    if data.get("research_id") is not None:
        research = own_research(request, data["research_id"])
        answers = _answers(data, research)
        if research.status != ResearchStatus.AWAITING_ANSWERS:
            raise ApiError(409, f"research is {research.status}; only one awaiting answers can start", "research_id")
    else:
        research, answers = None, _questions_with_answers(data)

    with transaction.atomic():
        # Lock the user's row so two starts at once cannot both slip under the cap.
        get_user_model().objects.select_for_update().filter(pk=request.user.pk).first()
        active = Research.objects.filter(owner=request.user, status__in=ACTIVE_STATUSES).count()
        if active >= settings.MAX_ACTIVE_RESEARCH_PER_USER:
            raise ApiError(
                429,
                f"you have {active} researches running; the limit is "
                f"{settings.MAX_ACTIVE_RESEARCH_PER_USER}: wait for one to finish or cancel one",
            )
        if research is None:
            prompt = text_field(data, "prompt", settings.MAX_PROMPT_CHARS)
            research = Research.objects.create(
                owner=request.user,
                prompt=prompt,
                title=make_title(prompt),
                num_questions=len(answers),
                status=ResearchStatus.AWAITING_ANSWERS,
                engine=default_engine(),
            )
            FollowUpQuestion.objects.bulk_create(
                FollowUpQuestion(research=research, position=i, question=q, answer=a)
                for i, (q, a) in enumerate(answers)
            )
        else:
            for position, (_, answer) in enumerate(answers):
                FollowUpQuestion.objects.filter(research=research, position=position).update(answer=answer)
        # Conditional: of two racing starts, only one moves the research on and queues it.
        claimed = Research.objects.filter(pk=research.pk, status=ResearchStatus.AWAITING_ANSWERS).update(
            status=ResearchStatus.QUEUED, breadth=breadth, depth=depth, claimed_at=timezone.now()
        )
        if not claimed:
            raise ApiError(409, "research was started already", "research_id")
        research_id = str(research.pk)
        transaction.on_commit(lambda: start_research_task.delay(research_id), robust=True)
    return JsonResponse({"research_id": research_id}, status=202)


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
    text_field(data, "prompt", settings.MAX_PROMPT_CHARS)  # validated before anything is created
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
    rows = Research.objects.filter(owner=request.user).order_by("-created_at")[:500]
    return JsonResponse({"researches": [research_summary(r) for r in rows]})


@api_view("GET")
def research_detail(request: HttpRequest, research_id: str) -> HttpResponse:
    research = own_research(request, research_id)
    return JsonResponse(build_snapshot(research.pk))


@api_view("GET")
def research_events(request: HttpRequest, research_id: str) -> HttpResponse:
    """Events after `?after=<seq>`: how a client that missed pushes catches up."""
    research = own_research(request, research_id)
    raw_after = request.GET.get("after", "0")
    if not (raw_after.isascii() and raw_after.isdigit()):  # "²".isdigit() is True, int("²") fails
        raise ApiError(400, "must be a non-negative integer", "after")
    events = Event.objects.filter(research=research, seq__gt=int(raw_after)).order_by("seq")[:5000]
    return JsonResponse(
        {
            "events": [
                {"seq": e.seq, "type": e.type, "data": e.data, "created_at": e.created_at.isoformat()} for e in events
            ]
        }
    )


def _document(request: HttpRequest, research_id: str, kind: str, filename: str) -> HttpResponse:
    research = own_research(request, research_id)
    document = Document.objects.filter(research=research, kind=kind).first()
    if document is None:
        raise ApiError(404, f"this research has no {filename} (yet)")
    response = HttpResponse(document.markdown, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


@api_view("GET")
def report_md(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document(request, research_id, DocumentKind.REPORT, "report.md")


@api_view("GET")
def error_output_md(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document(request, research_id, DocumentKind.ERROR_OUTPUT, "error-output.md")


def _document_html(request: HttpRequest, research_id: str, kind: str, filename: str) -> HttpResponse:
    """The document as sanitised HTML (research/rendering.py), for the report view to insert as it is."""
    research = own_research(request, research_id)
    document = Document.objects.filter(research=research, kind=kind).first()
    if document is None:
        raise ApiError(404, f"this research has no {filename} (yet)")
    response = HttpResponse(render_markdown(document.markdown), content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "private, no-cache"
    return response


@api_view("GET")
def report_html(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document_html(request, research_id, DocumentKind.REPORT, "report.md")


@api_view("GET")
def error_output_html(request: HttpRequest, research_id: str) -> HttpResponse:
    return _document_html(request, research_id, DocumentKind.ERROR_OUTPUT, "error-output.md")


@api_view("POST")
def cancel(request: HttpRequest, research_id: str) -> HttpResponse:
    research = own_research(request, research_id)
    if not cancel_research(research.pk):
        research.refresh_from_db(fields=["status"])
        raise ApiError(409, f"research is {research.status} and cannot be cancelled")
    return JsonResponse({"research_id": str(research.pk), "status": ResearchStatus.CANCELLED})
