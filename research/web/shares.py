"""Share links: the owner's JSON endpoints and page (make, list, revoke), and the shared report itself, which opens
without an account and shows that report version, its sources and quotes, and nothing else."""

import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from research.control import quotas, shares
from research.models import Research, ShareLink
from research.web.api import api_view, own_research, own_research_page, reader_links
from research.web.citation_links import quote_anchors
from research.web.rendering import render_markdown
from research.web.validation import ApiError, int_field, json_body
from workers.pipeline.citations import report_title

# What the page offers for how long a link lives.
EXPIRY_CHOICES = [("", "Never"), ("86400", "1 day"), ("604800", "7 days"), ("2592000", "30 days")]


def share_url(request: HttpRequest, link: ShareLink) -> str:
    return request.build_absolute_uri(reverse("shared-report", args=[link.key]))


def describe(request: HttpRequest, link: ShareLink) -> dict[str, Any]:
    return {
        "id": link.pk,
        "url": share_url(request, link),
        "version": link.version,
        "created_at": link.created_at.isoformat(),
        "expires_at": link.expires_at and link.expires_at.isoformat(),
    }


def _make(request: HttpRequest, research: Research, body: dict[str, Any]) -> ShareLink:
    version = int_field(body, "version", 1, 2**31 - 1) if body.get("version") is not None else None
    expires_in = None
    if body.get("expires_in") is not None:
        expires_in = int_field(body, "expires_in", 60, settings.MAX_SHARE_SECONDS)
    return shares.create(research, version, expires_in)


@api_view("GET", "POST")
def share_list(request: HttpRequest, research_id: str) -> HttpResponse:
    """GET: the research's live links. POST {"version"?, "expires_in"?}: a new link, 201 {"id", "url", ...}."""
    research = own_research(request, research_id)
    if request.method == "GET":
        return JsonResponse({"shares": [describe(request, link) for link in shares.live(research)]})
    link = _make(request, research, json_body(request, {"version", "expires_in"}))
    return JsonResponse(describe(request, link), status=201)


@api_view("DELETE")
def share_detail(request: HttpRequest, research_id: str, share_id: int) -> HttpResponse:
    """Revokes the link: it is 404 from then on."""
    if not shares.revoke(own_research(request, research_id), share_id):
        raise ApiError(404, "share link not found", "share_id")
    return HttpResponse(status=204)


@login_required
@require_http_methods(["GET", "POST"])
def shares_page(request: HttpRequest, research_id: uuid.UUID) -> HttpResponse:
    """The owner's page for one research's links: make one (a version, how long it lives), copy, revoke."""
    research = own_research_page(request, research_id)
    error, status = "", 200
    if request.method == "POST":
        body: dict[str, Any] = {}
        try:
            body["version"] = int(request.POST.get("version") or research.report_version)
            if request.POST.get("expires_in"):
                body["expires_in"] = int(request.POST["expires_in"])
            _make(request, research, body)
            return redirect("shares", research_id=research.pk)
        except ValueError:
            error, status = "Choose a version and a time from the lists.", 400
        except ApiError as exc:
            error, status = exc.message, exc.status
        except shares.NotShareable as exc:
            error, status = exc.message, 409
    versions = sorted(set(research.documents.filter(kind="report").values_list("version", flat=True)), reverse=True)
    context = {
        "research": research,
        "links": [describe(request, link) | {"link": link} for link in shares.live(research)],
        "versions": versions,
        "expiries": EXPIRY_CHOICES,
        "error": error,
    }
    return render(request, "research/shares.html", context, status=status)


@login_required
@require_POST
def share_revoke(request: HttpRequest, research_id: uuid.UUID, share_id: int) -> HttpResponse:
    if not shares.revoke(own_research_page(request, research_id), share_id):
        raise Http404("no such share link")
    return redirect("shares", research_id=research_id)


@require_GET
def shared_report(request: HttpRequest, key: str) -> HttpResponse:
    """The shared report, for anyone holding the link: that version's report with its sources and quotes, in a
    page of its own (no sidebar, no other research, no link into the owner's account). Unknown, revoked and expired
    links are alike: 404."""
    try:
        found = shares.opened(key, request.META.get("REMOTE_ADDR") or "unknown")
    except quotas.Throttled as exc:
        response = HttpResponse(exc.message, status=429, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(exc.retry_after)
        return response
    if found is None:
        raise Http404("no such shared report")
    link, document = found
    base = request.build_absolute_uri("/")
    body = render_markdown(quote_anchors(reader_links(request, document.markdown), base))
    context = {
        "title": report_title(document.markdown) or link.research.title or "Research report",
        "html": body,
        "version": link.version,
        "written": document.created_at,
        "expires_at": link.expires_at,
    }
    response = render(request, "research/shared.html", context)
    response["Cache-Control"] = "private, no-store"
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"  # the key is in this page's address: never sent on to a cited site
    return response
