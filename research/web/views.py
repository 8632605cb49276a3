"""HTML pages: the app shell (the live UI is built on it), sign-up, and JSON-aware CSRF failures."""

import uuid

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.csrf import csrf_failure as html_csrf_failure
from django.views.decorators.csrf import ensure_csrf_cookie

from research.models import Research


def _shell(request: HttpRequest, research_id: str = "") -> HttpResponse:
    """The one-page app: the sidebar, the start flow and the research view, driven by static/research/js/."""
    context = {
        "research_id": research_id,
        "limits": {
            "max_breadth": settings.MAX_BREADTH,
            "max_depth": settings.MAX_DEPTH,
            "max_questions": settings.MAX_FOLLOWUP_QUESTIONS,
            "max_prompt_chars": settings.MAX_PROMPT_CHARS,
            "max_answer_chars": settings.MAX_ANSWER_CHARS,
        },
    }
    return render(request, "research/home.html", context)


@login_required
@ensure_csrf_cookie
def home(request: HttpRequest) -> HttpResponse:
    return _shell(request)


@login_required
@ensure_csrf_cookie
def research_page(request: HttpRequest, research_id: uuid.UUID) -> HttpResponse:
    """The same app opened on one research (a link that can be shared between one's own tabs); others' are 404."""
    if not Research.objects.filter(pk=research_id, owner=request.user).exists():
        raise Http404("research not found")
    return _shell(request, str(research_id))


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.ALLOW_SIGNUP:
        raise Http404("sign-up is disabled")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)
        return redirect("home")
    return render(request, "registration/signup.html", {"form": form})


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """API clients get the same JSON error shape as every other API failure."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"field": None, "message": f"CSRF check failed: {reason}"}}, status=403)
    return html_csrf_failure(request, reason)
