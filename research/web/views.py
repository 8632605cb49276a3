"""HTML pages: the app shell (the live UI is built on it), sign-in, sign-up, and JSON-aware CSRF failures."""

import uuid
from typing import cast

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.csrf import csrf_failure as html_csrf_failure
from django.views.decorators.csrf import ensure_csrf_cookie

from research.control import quotas
from research.control.services import REPORT_LENGTHS, REPORT_WORDS_RANGE
from research.models import Research


def _shell(request: HttpRequest, research_id: str = "", research_title: str = "") -> HttpResponse:
    """The one-page app: the sidebar, the start flow and the research view, driven by static/research/js/. A
    research's page comes with its title, so that the header has its height before the first snapshot."""
    context = {
        "research_id": research_id,
        "research_title": research_title,
        "limits": {
            "max_breadth": settings.MAX_BREADTH,
            "max_depth": settings.MAX_DEPTH,
            "quality_threshold": settings.ADAPTIVE_QUALITY_THRESHOLD,
            "max_questions": settings.MAX_FOLLOWUP_QUESTIONS,
            "max_prompt_chars": settings.MAX_PROMPT_CHARS,
            "max_answer_chars": settings.MAX_ANSWER_CHARS,
            # (value, label) of each named report length: "Brief: about 1,500 words".
            "report_lengths": [
                (name, f"{name.capitalize()}: about {words:,} words") for name, words in REPORT_LENGTHS.items()
            ],
            "standard_report_words": REPORT_LENGTHS["standard"],
            "min_report_words": REPORT_WORDS_RANGE[0],
            "max_report_words": REPORT_WORDS_RANGE[1],
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
    title = (
        Research.objects.filter(pk=research_id, owner=cast(User, request.user))  # login_required
        .values_list("title", flat=True)
        .first()
    )
    if title is None:
        raise Http404("research not found")
    return _shell(request, str(research_id), title or "Untitled research")


class LoginView(auth_views.LoginView):
    """Django's sign-in, throttled: after LOGIN_RATE_LIMIT failures for a username or from an address within
    LOGIN_RATE_WINDOW, it answers 429 without checking the password, so guessing gets no faster by trying."""

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        username = request.POST.get("username", "")
        wait = quotas.login_wait(username, _client_ip(request))
        if not wait:
            return super().post(request, *args, **kwargs)
        form = self.get_form_class()(request, initial={"username": username[:150]})
        context = self.get_context_data(form=form, throttled=f"Too many failed sign-ins. Try again in {wait} seconds.")
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(wait)
        return response

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        quotas.login_failed(form.data.get("username", ""), _client_ip(self.request))
        return super().form_invalid(form)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        quotas.login_succeeded(form.data.get("username", ""))
        return super().form_valid(form)


def _client_ip(request: HttpRequest) -> str:
    # daphne sets it from the connection, or from X-Forwarded-For when started with --proxy-headers behind a proxy.
    return request.META.get("REMOTE_ADDR") or "unknown"


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.ALLOW_SIGNUP:
        raise Http404("sign-up is disabled")
    form: UserCreationForm[User] = UserCreationForm(request.POST or None)
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
