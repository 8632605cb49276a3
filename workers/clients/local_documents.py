"""The "local" search provider: full-text search over the local document collection (research/collection/documents.py).

Only the documents the research's owner may read are searched (research/collection/documents.py `readable_by`).
Results carry each document's stable URL in the web app (research/collection/documents.py): one source per document,
however many queries find it. Workers fetch it through a signed link, and analyse it like any web page.
"""

from research.collection.documents import document_url, rank_documents
from research.models import CollectionDocument
from research.text.lexical import BM25, counts, is_prose, sentences, terms
from workers.clients.searxng import SearchResult, storable_result

SNIPPET_CHARS = 300
# The snippet is looked for in the start of the document only: it is a hint for the reader, not evidence.
SNIPPET_SCAN_CHARS = 100_000


def search(query: str, limit: int, owner_id: int) -> list[SearchResult]:
    """Up to `limit` collection documents for the query that the research's owner `owner_id` may read (their own
    and the shared ones, never another user's), best first, each with a title and a snippet."""
    ids = rank_documents(query, limit, reader_id=owner_id)
    documents = CollectionDocument.objects.in_bulk(ids)
    results = [
        storable_result(document_url(pk), documents[pk].title, snippet(documents[pk].text, query))
        for pk in ids
        if pk in documents
    ]
    return [result for result in results if result is not None]


def snippet(text: str, query: str) -> str:
    """The document's sentence that matches the query best (or its first words)."""
    candidates = [s for s in sentences(text[:SNIPPET_SCAN_CHARS]) if is_prose(s)]
    wanted = {term: 1.0 for term in terms(query)}
    best = ""
    if candidates and wanted:
        ranker = BM25([counts(terms(s)) for s in candidates])
        scores = ranker.scores(wanted)
        top = max(range(len(candidates)), key=lambda i: scores[i])
        if scores[top] > 0:
            best = candidates[top]
    best = best or " ".join(text[: SNIPPET_CHARS * 2].split())
    if len(best) > SNIPPET_CHARS:
        best = best[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
    return best
