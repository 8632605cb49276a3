"""HTTP middleware: a Content-Security-Policy on every response, and static files served by the app itself."""

from collections.abc import Callable
from pathlib import Path

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware

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
