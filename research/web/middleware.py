"""HTTP middleware: a Content-Security-Policy on every response, static files served by the app itself, the size
limits of document uploads, and personal API tokens (`Authorization: Bearer`) on the JSON API."""

from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from django.utils.html import escape
from whitenoise.middleware import WhiteNoiseMiddleware

from research.control import tokens

# No inline script, style or event handler anywhere; everything the pages load comes from this origin. 'self' in
# connect-src covers the same-origin ws:/wss: websockets in every current browser (CSP level 3).
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "frame-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ]
)


class ContentSecurityPolicyMiddleware:
    """Adds the policy to every response (pages, API, static files, admin) that does not set its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, answering with the file's bytes in a plain response.

    WhiteNoise streams files through a synchronous iterator, which Django's ASGI handler (daphne) can only serve
    by buffering it and warning on every file. Our static files are small, so reading them whole is simpler and
    quiet; WhiteNoise still does the lookups, content types, caching headers and HEAD/304 handling.
    """

    def add_files(self, root: str, prefix: str | None = None) -> None:
        # STATIC_ROOT exists only after collectstatic (the docker image); without it the finders serve the files.
        if Path(root).is_dir():
            super().add_files(root, prefix)

    @staticmethod
    def serve(static_file, request: HttpRequest) -> HttpResponse:
        answer = static_file.get_response(request.method, request.META)
        body = b""
        if answer.file is not None:
            with answer.file as handle:
                body = handle.read()
        response = HttpResponse(body, status=int(answer.status))
        del response["Content-Type"]
        for key, value in answer.headers:
            response[key] = value
        return response


# The paths that take document uploads (research/web/documents.py).
UPLOAD_PATHS = frozenset({"/api/documents/", "/api/documents", "/documents/"})


class UploadLimitMiddleware:
    """Refuses an upload over UPLOAD_MAX_BYTES (413) by its Content-Length, before anything parses it, and turns
    what Django's parser refuses (too many files, a malformed body) into a clear 4xx instead of its bare 400 page.

    It runs before the CSRF check, which reads the form: parsing here first is the same parse, done once. A body
    sent without a Content-Length is measured by the upload view from what arrived."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method == "POST" and request.path in UPLOAD_PATHS:
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return _refused(request, 400, "bad Content-Length")
            if length > settings.UPLOAD_MAX_BYTES:
                return _refused(
                    request, 413, f"upload too large: at most {settings.UPLOAD_MAX_BYTES:,} bytes per upload"
                )
            try:
                request.FILES  # noqa: B018  (parses the body)
            except TooManyFilesSent:
                return _refused(request, 413, f"too many files: at most {settings.UPLOAD_MAX_FILES} per upload")
            except (TooManyFieldsSent, RequestDataTooBig, MultiPartParserError, UnreadablePostError) as exc:
                return _refused(request, 400, f"the upload could not be read: {exc}"[:300])
        return self.get_response(request)


def _refused(request: HttpRequest, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"field": "files", "message": message}}, status=status)
    # The page's form without scripts: a short page with the reason and the way back.
    response = HttpResponse(
        f'<!doctype html><title>Upload refused</title><p>{escape(message)}</p><p><a href="/documents/">Back to '
        "your documents</a></p>",
        status=status,
        content_type="text/html; charset=utf-8",
    )
    return response


# Where a token stands for its owner: the JSON API (the MCP server at /mcp checks its own, then calls this API with
# it). Pages stay with the session.
TOKEN_PATHS = ("/api/",)
# What a read-only token may do: read.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class BearerTokenMiddleware:
    """`Authorization: Bearer <token>` on the JSON API: the request is its owner's, whatever session cookie comes
    with it. A token that is unknown, revoked or whose owner is inactive is refused at once (401), never passed on as
    an anonymous request; a read-only one is refused anything but reading (403). Token requests carry no cookie a
    page could forge, so the CSRF check (which guards cookie sessions) is not theirs.

    It sits after AuthenticationMiddleware, whose lazy user it replaces, and before the views' CSRF check, which
    runs once every middleware has seen the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        scheme, _, secret = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "bearer" or not request.path.startswith(TOKEN_PATHS):
            return self.get_response(request)
        token = tokens.authenticate(secret.strip())
        if token is None:
            response = JsonResponse({"error": {"field": None, "message": "invalid or revoked token"}}, status=401)
            response["WWW-Authenticate"] = 'Bearer error="invalid_token"'
            return response
        if token.read_only and request.method not in READ_METHODS:
            message = "this token is read-only: it cannot start work or change data"
            return JsonResponse({"error": {"field": None, "message": message}}, status=403)
        request.user = token.owner
        request.api_token = token  # type: ignore[attr-defined]
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
        return self.get_response(request)
