"""Collection documents: by their stable URL for a signed-in reader (a report's citation), by a signed link for
the workers, which have no session (research/collection/documents.py)."""

import uuid

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from research.collection.documents import readable_for, signature_ok
from research.models import CollectionDocument, Research
from research.text.quotes import locate

# The user's own HTML files, shown as they are but in a sandbox: no scripts, no same-origin access to the app,
# nothing loaded from anywhere.
HTML_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
# A citation's quote in a link: the longest a stored quote is, with room.
MAX_QUOTE_CHARS = 2_000


@require_safe
@login_required
def collection_document_page(request: HttpRequest, document_id: int) -> HttpResponse:
    """The document a report cites, for a signed-in user who may read it (their own, a shared one; staff any):
    another user's private document is a 404, exactly like one that does not exist. The link never expires.

    Shown inside the app, as the text the research read, with the way back: `?quote=` marks the quoted passage
    (the citation's link ends in `#quote`, so the browser scrolls to it), `?from=<research id>` links back to that
    research. Its links are text, not links (a document's relative links lead nowhere here), and no path of the
    server's shows. `?raw=1` serves the file's own text or markup, as the workers read it."""
    document = readable_for(request.user).filter(pk=document_id).first()
    if document is None:
        raise Http404("no such document")
    if request.GET.get("raw"):
        return _serve(document_id)
    quote = request.GET.get("quote", "")[:MAX_QUOTE_CHARS]
    found = locate(document.text, quote) if quote else None
    start, end = found or (len(document.text), len(document.text))
    back = _own_research(request, request.GET.get("from", ""))
    context = {
        "document": document,
        "before": document.text[:start],
        "quoted": document.text[start:end],
        "after": document.text[end:],
        "quote_missing": bool(quote) and found is None,
        "back": back,
    }
    response = render(request, "research/document.html", context)
    response["X-Robots-Tag"] = "noindex"
    response["Cache-Control"] = "private, no-store"
    return response


def _own_research(request: HttpRequest, research_id: str) -> Research | None:
    """The reader's own research named by `?from=`, for the way back; None for anything else."""
    try:
        pk = uuid.UUID(research_id)
    except ValueError:
        return None
    return Research.objects.filter(pk=pk, owner_id=request.user.pk).only("id", "title").first()


@require_safe
def collection_document(request: HttpRequest, document_id: int, signature: str) -> HttpResponse:
    """The document for a worker, by a link signed less than COLLECTION_LINK_MAX_AGE seconds ago. No reader check
    here: a link is signed only for a document the research's owner may read (the search's results, checked
    again before the fetch: research/collection/documents.py `may_fetch`)."""
    if not signature_ok(document_id, signature, max_age=settings.COLLECTION_LINK_MAX_AGE):
        raise Http404("no such document")
    return _serve(document_id)


def _serve(document_id: int) -> HttpResponse:
    """An HTML document as text/html; Markdown, text and PDF documents (their extracted text) as text/plain."""
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
