"""Schedules: the JSON endpoint of one research's schedule (set, read, pause, end), and the pages that do the same
(one research's schedule, and the list of all of a user's)."""

import uuid
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from research.control import schedules
from research.control.services import InvalidInput
from research.models import Research, Schedule
from research.web.api import api_view, own_research, own_research_page
from research.web.validation import ApiError, json_body

# What the page offers; "cron" reads the line from its own field.
EVERY_CHOICES = [("daily", "Every day"), ("weekly", "Every week"), ("cron", "On a cron line (UTC)")]


def describe(schedule: Schedule) -> dict[str, Any]:
    return {
        "research_id": str(schedule.research_id),
        "every": schedule.every,
        "webhook": schedule.webhook,
        # The key that signs the webhook's calls (X-DeepResearch-Signature): the receiver checks them with it.
        "webhook_secret": schedule.secret,
        "paused": schedule.paused,
        "next_run_at": schedule.next_run_at.isoformat(),
        "last_run_at": schedule.last_run_at and schedule.last_run_at.isoformat(),
        "last_result": schedule.last_result,
        "runs": schedule.runs,
        "webhook_result": schedule.webhook_result,
        "created_at": schedule.created_at.isoformat(),
    }


def _schedule_of(research: Research) -> Schedule:
    schedule = Schedule.objects.filter(research=research).first()
    if schedule is None:
        raise ApiError(404, "this research has no schedule", "research_id")
    return schedule


@api_view("GET", "POST", "PATCH", "DELETE")
def schedule_detail(request: HttpRequest, research_id: str) -> HttpResponse:
    """GET: the schedule with its next run (404 when there is none). POST {"every", "webhook"?}: schedule the
    research (replacing its schedule), 201. PATCH {"paused": bool}: pause or resume. DELETE: end it, 204."""
    research = own_research(request, research_id)
    if request.method == "GET":
        return JsonResponse(describe(_schedule_of(research)))
    if request.method == "POST":
        body = json_body(request, {"every", "webhook"})
        if "every" not in body:
            raise ApiError(400, "required", "every")
        schedule, _ = schedules.set_schedule(research, body["every"], body.get("webhook"))
        return JsonResponse(describe(schedule), status=201)
    if request.method == "PATCH":
        body = json_body(request, {"paused"})
        if not isinstance(body.get("paused"), bool):
            raise ApiError(400, "must be true or false", "paused")
        return JsonResponse(describe(schedules.pause(_schedule_of(research), body["paused"])))
    _schedule_of(research).delete()
    return HttpResponse(status=204)


@login_required
@require_http_methods(["GET", "POST"])
def schedule_page(request: HttpRequest, research_id: uuid.UUID) -> HttpResponse:
    """One research's schedule: set it (how often, a webhook), see its next run and last result."""
    research = own_research_page(request, research_id)
    error, status = "", 200
    chosen = request.POST.get("every", "daily")
    if request.method == "POST":
        every = request.POST.get("cron", "") if chosen == "cron" else chosen
        try:
            schedules.set_schedule(research, every, request.POST.get("webhook", ""))
            return redirect("schedule", research_id=research.pk)
        except InvalidInput as exc:
            error, status = exc.message, 400
    schedule = Schedule.objects.filter(research=research).first()
    if request.method == "POST":
        cron, webhook = request.POST.get("cron", ""), request.POST.get("webhook", "")
    else:
        chosen, cron = _form_every(schedule)
        webhook = schedule.webhook if schedule is not None else ""
    context = {
        "research": research,
        "schedule": schedule,
        "runs": _runs(schedule.every) if schedule is not None else "",
        "choices": EVERY_CHOICES,
        "chosen": chosen,
        "cron": cron,
        "webhook": webhook,
        "error": error,
    }
    return render(request, "research/schedule.html", context, status=status)


def _form_every(schedule: Schedule | None) -> tuple[str, str]:
    """The form's choice and cron line for a stored schedule (daily for none)."""
    if schedule is None or schedule.every in schedules.NAMED:
        return (schedule.every if schedule is not None else "daily"), ""
    return "cron", schedule.every


def _runs(every: str) -> str:
    """How often a stored schedule runs, in words."""
    if every in schedules.NAMED:
        return "every day" if every == "daily" else "every week"
    return f"every {every} seconds" if every.isdigit() else f"on the cron line {every} (UTC)"


@login_required
@require_GET
def schedules_page(request: HttpRequest) -> HttpResponse:
    """Every schedule of the user: when each runs next, how the last went; pause, resume, end."""
    mine = Schedule.objects.filter(research__owner=cast(User, request.user)).select_related("research")
    return render(request, "research/schedules.html", {"schedules": mine.order_by("next_run_at")})


@login_required
@require_POST
def schedule_action(request: HttpRequest, research_id: uuid.UUID, action: str) -> HttpResponse:
    """Pause, resume or end a schedule from a page; back to the page it came from."""
    schedule = Schedule.objects.filter(research=own_research_page(request, research_id)).first()
    if schedule is None or action not in ("pause", "resume", "delete"):
        raise Http404("no such schedule")
    if action == "delete":
        schedule.delete()
    else:
        schedules.pause(schedule, action == "pause")
    back = request.POST.get("next")
    return redirect("schedule", research_id=research_id) if back != "list" else redirect("schedules")
