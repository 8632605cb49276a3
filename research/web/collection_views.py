"""Serving collection documents to workers: no login (workers have no session), but only by signed link."""

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from research.collection import signature_ok
from research.models import CollectionDocument

# The user's own HTML files, shown as they are but in a sandbox: no scripts, no same-origin access to the app,
# nothing loaded from anywhere.
HTML_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"


@require_safe
def collection_document(request: HttpRequest, document_id: int, signature: str) -> HttpResponse:
    """An HTML document as text/html; Markdown, text and PDF documents (their extracted text) as text/plain."""
    if not signature_ok(document_id, signature, max_age=settings.COLLECTION_LINK_MAX_AGE):
        raise Http404("no such document")
    document = CollectionDocument.objects.filter(pk=document_id).only("content_type", "text", "source").first()
    if document is None:
        raise Http404("no such document")
    if document.content_type == "text/html" and document.source:
        response = HttpResponse(document.source, content_type="text/html; charset=utf-8")
        response["Content-Security-Policy"] = HTML_POLICY
    else:
        # PDFs too: the scraper reads text, not application/pdf.
        response = HttpResponse(document.text, content_type="text/plain; charset=utf-8")
    response["X-Robots-Tag"] = "noindex"
    response["Cache-Control"] = "private, no-store"
    return response
