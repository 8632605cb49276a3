"""A user's documents: the documents page (upload, list, delete) and its JSON API (/api/documents/).

Every view sees only what the signed-in user may read (research/collection/documents.py `readable_by`): their own
documents and the shared ones. Another user's private document is a 404, exactly like one that does not exist;
a shared document that is not the user's may be read but not deleted (403). Uploads are read and indexed by
research/collection/uploads.py; the request's size and file count are checked before it is parsed
(research/web/middleware.py UploadLimitMiddleware).
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_POST

from research.collection.documents import readable_by
from research.collection.uploads import UploadRefused, UploadResult, document_name, index_upload
from research.models import CollectionDocument
from research.web.api import api_view, error_response

# The list shows the newest documents first, at most this many (the API's `total` counts them all).
MAX_LISTED = 500
# The digits of the largest id (a 64-bit column).
MAX_ID_DIGITS = len(str(2**63 - 1))
UPLOAD_FIELD = "files"


def _readable(user: User) -> QuerySet[CollectionDocument]:
    # The text and markup may be megabytes each: a list needs neither.
    return (
        CollectionDocument.objects.filter(readable_by(user.pk))
        .defer("text", "source", "search_vector")
        .order_by("-indexed_at", "-pk")
    )


def describe(document: CollectionDocument, user: User) -> dict[str, Any]:
    return {
        "id": document.pk,
        "name": document_name(document),
        "title": document.title,
        "content_type": document.content_type,
        "size": document.size,
        "indexed_at": document.indexed_at.isoformat(),
        "mine": document.owner_id == user.pk,
        "shared": document.owner_id is None or document.shared,
        "url": f"/collection/{document.pk}/",
    }


def _files(request: HttpRequest) -> list[tuple[str, bytes]]:
    """The upload's files (name, bytes). The middleware refused a request whose Content-Length was over the limit;
    this counts what arrived, for a request sent without one (chunked)."""
    uploads = request.FILES.getlist(UPLOAD_FIELD)
    if not uploads:
        raise UploadRefused(400, f"no file in the upload: send them as multipart/form-data, field '{UPLOAD_FIELD}'")
    if sum(upload.size or 0 for upload in uploads) > settings.UPLOAD_MAX_BYTES:
        raise UploadRefused(413, too_large_message())
    return [(upload.name or "", upload.read()) for upload in uploads]


def too_large_message() -> str:
    return f"upload too large: at most {settings.UPLOAD_MAX_BYTES:,} bytes per upload (UPLOAD_MAX_BYTES)"


def _upload(request: HttpRequest) -> tuple[int, UploadResult]:
    """Index the request's files; 201 when at least one document was indexed, 400 when none could be."""
    user = cast(User, request.user)
    result = index_upload(user.pk, _files(request))
    return (201 if result.indexed else 400), result


def _result_payload(result: UploadResult, user: User) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "documents": [{**describe(item.document, user), "status": item.outcome} for item in result.indexed],
        "failed": [{"name": name, "reason": reason} for name, reason in result.failed],
    }
    if not result.indexed:
        payload["error"] = {"field": UPLOAD_FIELD, "message": "no file of the upload could be indexed"}
    return payload


# --- API ------------------------------------------------------------------------------------------------


@api_view("GET", "POST")
def documents(request: HttpRequest) -> HttpResponse:
    """GET: the documents the user may read, newest first. POST (multipart, field `files`): upload."""
    user = cast(User, request.user)
    if request.method == "GET":
        readable = _readable(user)
        listed = [describe(document, user) for document in readable[:MAX_LISTED]]
        return JsonResponse({"documents": listed, "total": readable.count()})
    try:
        status, result = _upload(request)
    except UploadRefused as exc:
        return error_response(exc.status, exc.message, UPLOAD_FIELD)
    return JsonResponse(_result_payload(result, user), status=status)


@api_view("GET", "DELETE")
def document_detail(request: HttpRequest, document_id: str) -> HttpResponse:
    """GET: the document's description; DELETE: delete one's own document (204)."""
    user = cast(User, request.user)
    # The route takes any run of digits, as a string: more than an id has is no document (int() refuses 4,300 and
    # more digits: a 500 before).
    document = _readable(user).filter(pk=int(document_id)).first() if len(document_id) <= MAX_ID_DIGITS else None
    if document is None:
        return error_response(404, "document not found", "document_id")
    if request.method == "GET":
        return JsonResponse(describe(document, user))
    if document.owner_id != user.pk:
        return error_response(403, "a shared document can only be removed by an admin", "document_id")
    document.delete()
    return HttpResponse(status=204)


# --- The page -------------------------------------------------------------------------------------------


@login_required
@ensure_csrf_cookie
@require_http_methods(["GET", "POST"])
def documents_page(request: HttpRequest) -> HttpResponse:
    """The user's documents, and the shared ones, with the upload form. The form posts here where scripts do not
    run (the result is shown above the list); static/research/js/documents.js sends it to the API with progress."""
    user = cast(User, request.user)
    status, result, error = 200, None, ""
    if request.method == "POST":
        try:
            status, result = _upload(request)
            status = 200 if status == 201 else status  # the page itself, showing what was indexed
            error = "" if result.indexed else "No file of the upload could be indexed."
        except UploadRefused as exc:
            status, error = exc.status, exc.message
    readable = list(_readable(user)[:MAX_LISTED])
    context = {
        "mine": [describe(document, user) for document in readable if document.owner_id == user.pk],
        "shared": [describe(document, user) for document in readable if document.owner_id != user.pk],
        "result": result and _result_payload(result, user),
        "error": error,
        "max_bytes": settings.UPLOAD_MAX_BYTES,
        "max_mb": settings.UPLOAD_MAX_BYTES // (1024 * 1024),
        "max_files": settings.UPLOAD_MAX_FILES,
    }
    return render(request, "research/documents.html", context, status=status)


@login_required
@require_POST
def document_delete(request: HttpRequest, document_id: int) -> HttpResponse:
    """The page's delete button (a form, CSRF-checked): one's own documents only; anything else is a 404."""
    deleted, _ = CollectionDocument.objects.filter(pk=document_id, owner=cast(User, request.user)).delete()
    if not deleted:
        raise Http404("no such document")
    return redirect("documents")
