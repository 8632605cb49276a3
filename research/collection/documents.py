"""The local document collection: indexing files, ranking them for a query, and the signed links workers fetch.

Files are read once, by `manage.py index_documents` or from a user's upload (research/collection/uploads.py), into
CollectionDocument rows (the text, and the markup of HTML
files), each format by its reader in research/collection/readers.py; a file that cannot be read, or whose type no
reader knows, is recorded as an UnreadableFile row instead, for the admin to list. Search ranks them with
PostgreSQL full-text search: a stored tsvector per document (title weighted above text) under a GIN index, ranked
by the sum of each query word's `ts_rank` weighted by the word's rarity in the collection (`rank_documents`). A
document is reachable only through a link signed with SECRET_KEY, so the unauthenticated view that serves it to
workers gives out exactly the documents the search provider named.

Every document has a reader set (`readable_by`): the instance's documents (no owner) and those an admin shared are
everyone's, the rest their owner's. A research searches only what its owner may read, so it never sees, fetches or
cites another user's private document.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
from django.core import signing
from django.db import transaction
from django.db.models import Count, ExpressionWrapper, F, FloatField, Q, QuerySet, Value
from django.db.models.functions import Substr
from django.utils import timezone

# Read by research/collection/readers.py; named here too, where importers have always found them.
from research.collection.readers import CONTENT_TYPES as CONTENT_TYPES
from research.collection.readers import DocumentError as DocumentError
from research.collection.readers import ParsedDocument as ParsedDocument
from research.collection.readers import parse_document as parse_document
from research.collection.standing import CURRENT, document_date, document_standing
from research.models import CollectionDocument, DocumentOrigin, UnreadableFile
from research.text.lexical import is_content_word, words

log = logging.getLogger(__name__)

# Only the start of a very long document is indexed for search (PostgreSQL caps a tsvector at 1 MB); workers
# still fetch and read the whole document.
INDEXED_CHARS = 300_000
SEARCH_CONFIG = "english"
_SALT = "research.collection.document"


@dataclass
class IndexSummary:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    unsupported: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def describe(self) -> str:
        total = CollectionDocument.objects.count()
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {self.removed} removed, "
            f"{len(self.unsupported)} skipped (unsupported type), {len(self.failed)} failed; "
            f"the collection has {total} document{'s' if total != 1 else ''}"
        )


# --- Who may read a document -----------------------------------------------------------------------------


def readable_by(user_id: int) -> Q:
    """The documents a user may read, and so that user's research may search and cite: the instance's (no owner),
    those an admin shared with all, and the user's own. Staff read every document at its URL (`readable_for`),
    but their research searches this set too: a private document is its owner's research material."""
    return Q(owner__isnull=True) | Q(shared=True) | Q(owner_id=user_id)


def readable_for(user: Any) -> QuerySet[CollectionDocument]:
    """The documents a signed-in user may open at their stable URL: staff all, anyone else `readable_by`."""
    documents = CollectionDocument.objects.all()
    return documents if user.is_staff else documents.filter(readable_by(user.pk))


# --- Indexing ---------------------------------------------------------------------------------------------


def index_folder(
    folder: Path,
    replace: bool = False,
    report: Callable[[str], None] | None = None,
    owner_id: int | None = None,
) -> IndexSummary:
    """Index every supported file under `folder` (recursively) as `owner_id`'s documents (None: shared with all);
    unchanged files (same sha256, same owner) are left alone.

    Documents of files that vanished from the folder are removed; with `replace`, every folder document of the
    same owner from outside the folder too, so that owner's folder documents become exactly this folder. Uploads
    are never removed here: they have no file in any folder. Each file that is unsupported or cannot be read is
    recorded as an UnreadableFile with its reason; a record goes once its file is indexed or gone.
    """
    folder = folder.resolve()
    if not folder.is_dir():
        raise NotADirectoryError(str(folder))
    summary = IndexSummary()
    seen: set[str] = set()
    unreadable: set[str] = set()
    for path in _files(folder):
        key = str(path)
        if path.suffix.lower() not in CONTENT_TYPES:
            summary.unsupported.append(key)
            _record_unreadable(path, unsupported_reason(path))
            unreadable.add(key)
            continue
        seen.add(key)
        try:
            outcome = index_file(path, owner_id=owner_id)
        except (DocumentError, OSError) as exc:
            summary.failed.append((key, str(exc)))
            _record_unreadable(path, str(exc))
            unreadable.add(key)
            if report:
                report(f"failed: {key}: {exc}")
            continue
        setattr(summary, outcome, getattr(summary, outcome) + 1)
        if report and outcome != "unchanged":
            report(f"{outcome}: {key}")
    gone = CollectionDocument.objects.filter(origin=DocumentOrigin.FOLDER).exclude(path__in=seen)
    resolved = UnreadableFile.objects.exclude(path__in=unreadable)
    if replace:
        gone = gone.filter(owner_id=owner_id) if owner_id is not None else gone.filter(owner__isnull=True)
    else:
        gone = gone.filter(path__startswith=str(folder) + os.sep)
        resolved = resolved.filter(path__startswith=str(folder) + os.sep)
    summary.removed, _ = gone.delete()
    resolved.delete()
    return summary


def unsupported_reason(path: Path) -> str:
    return f"unsupported file type {path.suffix.lower() or '(none)'}"


def _record_unreadable(path: Path, reason: str) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    UnreadableFile.objects.update_or_create(
        path=str(path), defaults={"reason": reason[:2000], "size": size, "checked_at": timezone.now()}
    )


def _files(folder: Path) -> list[Path]:
    """Every regular file under the folder, in a stable order; hidden files and folders are skipped."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(Path(root) / name for name in sorted(files) if not name.startswith("."))
    return [path for path in found if path.is_file()]


# The text extraction documents are indexed with: 1, BeautifulSoup rules; 2, trafilatura; 3, trafilatura on lxml's
# tree, comments dropped before it (the text after a comment was lost); 4, PDFs through pdfplumber (tables as rows
# with their headers) and titles without Markdown marks; 5, each document's date and standing
# (research/collection/standing.py). A document indexed with
# another one is indexed again even when its file is unchanged, because workers scrape its source with the current
# one and quotes are checked against both texts. Bump it whenever research/text/page_text.py or
# research/collection/readers.py changes its output.
TEXT_EXTRACTION = 5


def index_file(path: Path, owner_id: int | None = None) -> str:
    """Add or update one file's document, as `owner_id`'s (None: shared with all); returns "added", "updated" or
    "unchanged"."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    existing = (
        CollectionDocument.objects.filter(path=str(path)).values_list("pk", "sha256", "extraction", "owner_id").first()
    )
    if existing and existing[1] == digest and existing[2] == TEXT_EXTRACTION:
        if existing[3] == owner_id:
            return "unchanged"
        # Indexed again for someone else: the latest run over the folder says whose its files are.
        CollectionDocument.objects.filter(pk=existing[0]).update(owner_id=owner_id, shared=False)
        return "updated"
    parsed = parse_document(path, data)
    with transaction.atomic():
        _, created = store_document(str(path), DocumentOrigin.FOLDER, owner_id, data, parsed, digest)
    return "added" if created else "updated"


def store_document(
    key: str, origin: str, owner_id: int | None, data: bytes, parsed: ParsedDocument, digest: str = ""
) -> tuple[CollectionDocument, bool]:
    """Write one read document under its key (its path), with its search vector; (document, created). The caller
    holds the transaction, so an upload's documents land together."""
    # An upload's key is upload/<user id>/<sha256>/<name>: only its name is the owner's words about it (a digest or
    # an id may hold "2025").
    named = key.split("/", 3)[-1] if origin == DocumentOrigin.UPLOAD else key
    fields = {
        "dated": document_date(named, parsed.title, parsed.text, parsed.metadata_date),
        "standing": document_standing(named, parsed.title, parsed.text),
        "origin": origin,
        "owner_id": owner_id,
        "title": parsed.title,
        "content_type": parsed.content_type,
        "text": parsed.text,
        "source": parsed.source,
        "sha256": digest or hashlib.sha256(data).hexdigest(),
        "extraction": TEXT_EXTRACTION,
        "size": len(data),
        "indexed_at": timezone.now(),
    }
    if origin == DocumentOrigin.FOLDER:
        # A folder's document changes hands only by indexing; an upload keeps the share an admin gave it.
        fields["shared"] = False
    if len(parsed.source or parsed.text) > settings.SCRAPE_MAX_BYTES:
        log.warning("%s is larger than SCRAPE_MAX_BYTES: workers will refuse to read it", key)
    document, created = CollectionDocument.objects.update_or_create(path=key, defaults=fields)
    CollectionDocument.objects.filter(pk=document.pk).update(
        search_vector=SearchVector(Value(parsed.title), weight="A", config=SEARCH_CONFIG)
        + SearchVector(Substr("text", 1, INDEXED_CHARS), weight="B", config=SEARCH_CONFIG)
    )
    return document, created


# --- Search -----------------------------------------------------------------------------------------------


def rank_documents(query: str, limit: int, *, reader_id: int) -> list[int]:
    """Ids of the documents `reader_id` may read (`readable_by`) that best match the query, best first. The
    reader is required: a search for a research is always on its owner's behalf."""
    content = list(dict.fromkeys(w.lower() for w in words(query) if is_content_word(w)))[:32]
    if not content:
        return []
    readable = CollectionDocument.objects.filter(readable_by(reader_id))
    queries = [SearchQuery(word, search_type="plain", config=SEARCH_CONFIG) for word in content]
    # How many documents hold each word (one query): a word most documents hold (the company's name, in every
    # file of its share) tells them apart least, and a long report holds every word of a long query once.
    counted = readable.aggregate(
        total=Count("pk"),
        **{f"w{index}": Count("pk", filter=Q(search_vector=q)) for index, q in enumerate(queries)},
    )
    total = counted["total"]
    present = [(index, counted[f"w{index}"]) for index in range(len(content)) if counted[f"w{index}"]]
    if not present:
        return []
    # Words in more than half the documents are left out, unless every word is (then they are all there is).
    telling = [(index, found) for index, found in present if found <= total / 2] or present
    # Any of the words (a research query names several aspects, and requiring all of them would find nothing in a
    # small collection), each word's rank weighted by its rarity (BM25's IDF): a short file holding the one rare
    # word of its answer outranks a long report holding every common one.
    search = SearchQuery(
        " or ".join(content[index] for index, _ in telling), search_type="websearch", config=SEARCH_CONFIG
    )
    rank = sum(
        (
            SearchRank(F("search_vector"), queries[index], normalization=Value(1))
            * Value(math.log(1 + (total - found + 0.5) / (found + 0.5)))
            for index, found in telling
        ),
        start=Value(0.0),
    )
    ranked = (
        readable.filter(search_vector=search)
        .annotate(rank=ExpressionWrapper(rank, output_field=FloatField()))
        .order_by("-rank", "pk")
        .values_list("pk", flat=True)
    )
    return list(ranked[:limit])


# --- Links -----------------------------------------------------------------------------------------------
# A document has one stable URL, APP_BASE_URL/collection/<id>/: the page's identity in a research (its URL, the
# report's citation), the same whichever search found it, so a document is one source however many queries return
# it. That URL needs a login (research/web/collection_views.py), like the rest of the app: it is what a reader
# follows from a report, at any time. Workers have no session: they fetch through a signed link,
# APP_BASE_URL/collection/<id>/<timestamp>.<signature>/, which the view accepts for COLLECTION_LINK_MAX_AGE seconds,
# so a link that leaks (from a log) opens its document only briefly. The scrape step signs one as it fetches
# (`fetch_link`). Research stored before stable URLs carries signed links; `public_links` shows them as stable ones.


def _signer() -> signing.TimestampSigner:
    # "." between id, timestamp and signature (not ":"): nothing in a URL path to escape.
    return signing.TimestampSigner(salt=_SALT, sep=".")


def signature(document_id: int) -> str:
    """'<timestamp>.<signature>': what a link carries after the document's id."""
    return _signer().sign(str(document_id)).split(".", 1)[1]


def signature_ok(document_id: int, given: str, max_age: int | None = None) -> bool:
    """Whether this app signed `given` for the document, and (with `max_age`) no more than max_age seconds ago."""
    try:
        _signer().unsign(f"{document_id}.{given}", max_age=max_age)
    except signing.BadSignature:  # SignatureExpired included
        return False
    return True


def _links_base() -> str:
    return f"{settings.APP_BASE_URL.rstrip('/')}/collection/"


def document_url(document_id: int) -> str:
    """The document's stable URL: APP_BASE_URL/collection/<id>/ (readers need a login)."""
    return f"{_links_base()}{document_id}/"


def signed_url(document_id: int) -> str:
    """A link workers can fetch the document from without a session, for COLLECTION_LINK_MAX_AGE seconds."""
    return f"{_links_base()}{document_id}/{signature(document_id)}/"


def linked_document(url: str) -> int | None:
    """The document a URL of this app's collection names (stable, or signed by this app however long ago)."""
    base = _links_base()
    match = _LINK_PATH.fullmatch(url[len(base) :]) if url.startswith(base) else None
    if match is None:
        return None
    if match["signature"] is not None and not signature_ok(int(match["id"]), match["signature"]):
        return None
    return int(match["id"])


def may_fetch(url: str, reader_id: int) -> bool:
    """Whether a research of `reader_id` may fetch the URL: any URL but a collection document `reader_id` may not
    read (another user's, or one gone). The search only hands out readable documents; this holds too when a
    document changed hands or was deleted between the search and the fetch."""
    document_id = linked_document(url)
    if document_id is None:
        return True
    return CollectionDocument.objects.filter(readable_by(reader_id), pk=document_id).exists()


def page_standing(
    url: str, title: str, text: str, published: datetime.date | None = None
) -> tuple[datetime.date | None, str]:
    """A fetched page's date and standing: a collection document's as indexed; a web page's the date it gives
    itself (`published`: its metadata, read by htmldate when it was fetched), else from its address
    ("/2024/05/...") or opening, and current (a web page that says it is archived is rare, and a news archive's
    address says nothing of its pages)."""
    document_id = linked_document(url)
    if document_id is not None:
        stored = CollectionDocument.objects.filter(pk=document_id).values_list("dated", "standing").first()
        if stored is not None:
            return stored
    return published or document_date(urlparse(url).path, title, text), CURRENT


def fetch_link(url: str) -> str:
    """The URL a worker fetches: a freshly signed link for a collection URL, any other URL unchanged."""
    document_id = linked_document(url)
    return url if document_id is None else signed_url(document_id)


def public_links(text: str, base: str) -> str:
    """`text` (a report's markdown) with every collection URL of this app, stable or signed, written as the stable
    URL under `base`: the address the reader reached this app at (APP_BASE_URL may be an internal name)."""
    prefix = re.escape(_links_base())

    def public(match: re.Match[str]) -> str:
        document_id = linked_document(match.group(0))
        return match.group(0) if document_id is None else f"{base.rstrip('/')}/collection/{document_id}/"

    return re.sub(prefix + r"[0-9]+/(?:[^/\s?#)\]]+/)?", public, text)


_LINK_PATH = re.compile(r"(?P<id>[0-9]+)/(?:(?P<signature>[^/?#]+)/)?")
