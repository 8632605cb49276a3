"""Personal API tokens, for the user who makes them: the JSON endpoints and the page that lists, makes and revokes
them. They are managed from a signed-in session only: a token that could make tokens would let a leaked one outlive
its own revocation."""

from typing import cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from research.control import tokens
from research.models import ApiToken
from research.web.api import api_view
from research.web.validation import ApiError, clean_text, json_body, text_field


def _session_only(request: HttpRequest) -> None:
    if getattr(request, "api_token", None) is not None:
        raise ApiError(403, "API tokens are managed from a signed-in session, not with a token")


def _new_token(user: User, name: str, read_only: object) -> tuple[dict, str]:
    if not isinstance(read_only, bool):
        raise ApiError(400, "must be true or false", "read_only")
    try:
        token, secret = tokens.create(user, name, read_only)
    except tokens.TooManyTokens as exc:
        raise ApiError(409, str(exc), "name") from None
    return {"id": token.pk, "name": token.name, "read_only": token.read_only, "prefix": token.prefix}, secret


@api_view("GET", "POST")
def token_list(request: HttpRequest) -> HttpResponse:
    """GET: the user's tokens (no secrets). POST {"name", "read_only"?}: a new token, its secret shown this once."""
    _session_only(request)
    user = cast(User, request.user)
    if request.method == "GET":
        return JsonResponse({"tokens": tokens.listed(user)})
    body = json_body(request, {"name", "read_only"})
    name = text_field(body, "name", tokens.MAX_NAME_CHARS)
    made, secret = _new_token(user, name, body.get("read_only", False))
    return JsonResponse({**made, "token": secret}, status=201)


@api_view("DELETE")
def token_detail(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revokes the token: refused from its next request on. Another user's token is a 404, like a missing one."""
    _session_only(request)
    if not tokens.revoke(cast(User, request.user), token_id):
        raise ApiError(404, "token not found", "token_id")
    return HttpResponse(status=204)


@login_required
@require_http_methods(["GET", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponse:
    """The page: the user's tokens, a form to make one (its secret shown once, on the answer to the form) and a
    revoke button on each."""
    user = cast(User, request.user)
    context: dict = {"secret": "", "made": None, "error": "", "name": ""}
    status = 200
    if request.method == "POST":
        context["name"] = request.POST.get("name", "")[: tokens.MAX_NAME_CHARS * 2]
        try:
            name = clean_text(request.POST.get("name", ""), "name", tokens.MAX_NAME_CHARS, "The name")
            if not name:
                raise ApiError(400, "Give the token a name, such as where it will be used.", "name")
            context["made"], context["secret"] = _new_token(user, name, request.POST.get("read_only") == "on")
            context["name"] = ""
            status = 201
        except ApiError as exc:
            context["error"] = exc.message[0].upper() + exc.message[1:]
            status = exc.status
    context["tokens"] = ApiToken.objects.filter(owner=user)
    response = render(request, "research/tokens.html", context, status=status)
    response["Cache-Control"] = "no-store"  # the page may hold a secret
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """The page's revoke button (a form, CSRF-checked): one's own tokens only; anything else is a 404."""
    if not tokens.revoke(cast(User, request.user), token_id):
        raise Http404("no such token")
    return redirect("tokens")
