"""Deltas: what changed in a research since the previous push, so that a push carries only that.

A client holds the whole state (the snapshot it got on connect or catch-up) and applies each push's delta to it;
after that its state equals the snapshot the server would build at the same moment. The server still reads the
current state from the database for every push, but only the rows that changed since the previous push.

Which rows changed comes from PostgreSQL itself: every row version carries `xmin`, the id of the transaction that
wrote it. A push reads in one REPEATABLE READ transaction and remembers the oldest transaction still running when
its view was taken (`pg_snapshot_xmin`); every transaction committed after that view has an id at or above it, so
the next push loads the rows whose `xmin` is at or above it. A few rows committed just before may come again; no
change can be missed, and nothing has to be written to mark a row as changed. On SQLite (the embedded mode) every
delta carries every row: correct, only larger.

The shape is published in research/schemas/delta.v2.json; the live page applies one in
research/static/research/js/state.js, and the tests hold a reference implementation of the same rules
(`apply_delta` in devtools/deltas.py) to check it against the snapshot.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Subquery
from django.db.models.fields.json import KeyTransform

from research import database
from research.coverage import coverage
from research.models import (
    AskedQuestion,
    Document,
    DocumentKind,
    Event,
    Extract,
    FollowUpQuestion,
    MemoryItem,
    ReportSection,
    Research,
    SectionStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.snapshot import (
    MEMORY_FIELDS,
    MEMORY_SECTIONS,
    QUERY_FIELDS,
    SECTION_FIELDS,
    SNAPSHOT_VERSION,
    WEBSITE_FIELDS,
    build_snapshot,
    consistent_view,
    conversation,
    documents,
    event_payload,
    memory_state,
    progress,
    query_state,
    research_state,
    website_state,
)
from research.types import ResearchId
from research.usage import with_usage

DELTA_VERSION = 2

# Fields the progress counts need from every query (the pruned subtrees follow parents, positions and decisions).
_PROGRESS_FIELDS = ("id", "parent_id", "depth", "position", "retries", "round", "status", "decision")
_QUERY_ORDER = ("depth", "parent_id", "position", "id")


@dataclass(frozen=True)
class Since:
    """Where the previous push left a research: the seq its state had, and the view it was read in (`xmin`, a
    64-bit transaction id; None: unknown, so every row is sent)."""

    seq: int = 0
    xmin: int | None = None


# A push waits at most this long behind a table's exclusive lock (a migration, a TRUNCATE): far below PostgreSQL's
# deadlock_timeout (1 s), so the push gives up and lets the other go before a deadlock is even looked for.
PUSH_LOCK_TIMEOUT_MS = 200


def read_push(
    research_id: ResearchId, after: int, limit: int, since: Since | None, checksum: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any], int | None, str | None]:
    """The events after seq `after` (at most `limit`), the delta since `since` (None: a whole one), the view's
    xmin to pass as the next push's `since`, and with `checksum` the checksum of the whole snapshot, all read in
    one consistent view. No events (another process pushed them): no delta, an empty dict, and only the events
    read. Raises Research.DoesNotExist, and LockNotAvailable (wrapped as OperationalError) where a table is locked
    exclusively for more than PUSH_LOCK_TIMEOUT_MS: a push is best effort and steps aside."""
    with consistent_view(lock_timeout_ms=PUSH_LOCK_TIMEOUT_MS) as xmin:
        rows = Event.objects.filter(research_id=research_id, seq__gt=after).order_by("seq")[:limit]
        events = [event_payload(event) for event in rows]
        if not events:  # another process pushed them: nothing to send, so no delta to build
            return events, {}, xmin, None
        delta = build_delta(research_id, since)
        return events, delta, xmin, state_checksum(build_snapshot(research_id)) if checksum else None


def state_checksum(state: dict[str, Any]) -> str:
    """A digest of a snapshot (or a client's state) that is equal exactly when the two are equal as JSON."""
    return hashlib.sha256(_encode(state)).hexdigest()


def build_delta(research_id: ResearchId, since: Since | None) -> dict[str, Any]:
    """What changed in the research after `since`'s view; every row when `since` is None or has no view.

    The research, the progress counts and the coverage are always whole (all small); a collection with a changed
    row comes with the changed rows and the order of all its keys, which also says which rows are gone. One query finds
    the changed rows of every table; the rest load only those, so a push of one event costs a few queries
    whatever the size of the tree."""
    research = with_usage(research_id)
    xmin = since.xmin if since is not None and database.supports_xmin() else None
    delta: dict[str, Any] = {
        "version": DELTA_VERSION,
        "snapshot_version": SNAPSHOT_VERSION,
        "base": since.seq if since is not None and xmin is not None else 0,
        "research": research_state(research),
    }
    changed = _changed_rows(research.pk, xmin)

    if changed["questions"]:
        delta["questions"] = list(
            FollowUpQuestion.objects.filter(research_id=research.pk)
            .order_by("position")
            .values("position", "question", "answer")
        )
    query_rows = list(
        SerpQuery.objects.filter(research_id=research.pk).order_by(*_QUERY_ORDER).values(*_PROGRESS_FIELDS)
    )
    if changed["conversation"]:
        delta["conversation"] = conversation(research.pk)
    if changed["queries"]:
        rows = SerpQuery.objects.filter(pk__in=changed["queries"]).order_by(*_QUERY_ORDER)
        delta["queries"] = {
            "order": [row["id"] for row in query_rows],
            "rows": [query_state(row) for row in rows.values(*QUERY_FIELDS, "learnings")],
        }
    if changed["websites"]:
        delta["websites"] = _websites(changed["websites"])
    if changed["memory"]:
        delta["memory"] = _memory(research.pk, changed["memory"])
    report = None
    if changed["documents"]:
        docs, report = documents(research.pk, research.report_version)
        delta.update(docs)
    else:
        report = _current_report(research)
    # The written sections' text counts only until the report is assembled (research/coverage.py).
    delta["report_sections"], sections = _sections(research, set(changed["sections"]), with_text=report is None)
    statuses, extract_count, pages_analysed = _counts(research.pk)
    delta["progress"] = progress(research, query_rows, statuses, extract_count)
    delta["coverage"] = coverage(
        research.report_words, extract_count, pages_analysed, sections, report, lambda: _analysed_urls(research.pk)
    )
    return delta


def _current_report(research: Research) -> str | None:
    """The markdown of the report of the version being written or last written, None until it is stored."""
    return (
        Document.objects.filter(research_id=research.pk, kind=DocumentKind.REPORT, version=research.report_version)
        .values_list("markdown", flat=True)
        .first()
    )


def _analysed_urls(research_pk: Any) -> list[str]:
    return list(
        Website.objects.filter(research_id=research_pk, status=WebsiteStatus.ANALYZED)
        .values_list("url", flat=True)
        .order_by()  # a default ordering's columns would join the DISTINCT, making each website's URL distinct
        .distinct()
    )


# Transaction ids in a row's xmin are 32 bits and wrap around: compare them with the view's, modulo 2**32, as
# PostgreSQL does (a row is newer when it is less than 2**31 ahead).
_NEWER = "((xmin::text::bigint - %s) & 4294967295) < 2147483648"
# Which rows of a research each kind of change names (an extract written names its website).
_PROBES = {
    "questions": (FollowUpQuestion, "id"),
    "queries": (SerpQuery, "id"),
    "websites": (Website, "id"),
    "extracts": (Extract, "website_id"),
    "memory": (MemoryItem, "id"),
    "documents": (Document, "id"),
    "sections": (ReportSection, "id"),
    "conversation": (AskedQuestion, "id"),
}


def _changed_rows(research_pk: Any, xmin: int | None) -> dict[str, list[int]]:
    """The ids of the rows of each kind written after the view `xmin` (every row when None), in one query."""
    condition, params = ("", []) if xmin is None else (f" AND {_NEWER}", [xmin % 2**32])
    parts, values = [], []
    for kind, (model, column) in _PROBES.items():
        parts.append(f"SELECT '{kind}', {column} FROM {model._meta.db_table} WHERE research_id = %s{condition}")
        values += [Research._meta.pk.get_db_prep_value(research_pk, connection), *params]
    found: dict[str, list[int]] = {kind: [] for kind in _PROBES}
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), values)
        for kind, pk in cursor.fetchall():
            found[kind].append(pk)
    found["websites"] = sorted({*found["websites"], *found.pop("extracts")})
    return found


def _websites(website_ids: list[int]) -> list[dict[str, Any]]:
    """For each query with a changed website: the order of all its websites and the changed ones, whole with their
    extracts."""
    changed = set(website_ids)
    query_ids = Website.objects.filter(pk__in=website_ids).values("query_id")
    rows = Website.objects.filter(query_id__in=query_ids).order_by("query_id", "position").values(*WEBSITE_FIELDS)
    extracts: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in (
        Extract.objects.filter(website_id__in=website_ids)
        .order_by("website_id", "position")
        .values("website_id", "fact", "quote")
    ):
        extracts[row["website_id"]].append({"fact": row["fact"], "quote": row["quote"]})
    groups: dict[int, dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(row["query_id"], {"query_id": row["query_id"], "order": [], "rows": []})
        group["order"].append(row["id"])
        if row["id"] in changed:
            group["rows"].append(website_state(row, extracts.get(row["id"], [])))
    return list(groups.values())


def _memory(research_pk: Any, item_ids: list[int]) -> dict[str, Any]:
    """For each memory section with a changed item (new, or closed): the order of its open items and the changed
    open ones."""
    changed = set(item_ids)
    kinds = set(MemoryItem.objects.filter(pk__in=item_ids).values_list("kind", flat=True))
    # Every section with a changed item is sent, even one whose items are all closed now.
    memory: dict[str, Any] = {MEMORY_SECTIONS[kind]: {"order": [], "rows": []} for kind in kinds}
    for row in (
        MemoryItem.objects.filter(research_id=research_pk, closed=False, kind__in=kinds)
        .order_by("id")
        .values(*MEMORY_FIELDS)
    ):
        section = memory[MEMORY_SECTIONS[row["kind"]]]
        section["order"].append(row["id"])
        if row["id"] in changed:
            section["rows"].append(memory_state(row))
    return memory


def _sections(research: Research, changed: set[int], with_text: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The current version's section positions, and the changed sections (only those with their text); and every
    section of it with its status, the findings its writer was given and, `with_text`, the written ones' text
    (for the coverage)."""
    fields = ["id", *(field for field in SECTION_FIELDS if field != "markdown")]
    rows = list(
        ReportSection.objects.filter(research_id=research.pk, version=research.report_version)
        .order_by("position")
        .values(*fields, findings=KeyTransform("findings", "plan"))
    )
    written = {row["id"] for row in rows if row["status"] == SectionStatus.WRITTEN} if with_text else set()
    wanted = {row["id"] for row in rows if row["id"] in changed} | written
    texts = dict(ReportSection.objects.filter(pk__in=wanted).values_list("id", "markdown")) if wanted else {}
    for row in rows:
        row["markdown"] = texts.get(row["id"], "")
    return {
        "order": [row["position"] for row in rows],
        "rows": [{key: row[key] for key in SECTION_FIELDS} for row in rows if row["id"] in changed],
    }, rows


def _counts(research_pk: Any) -> tuple[Counter[str], int, int]:
    """The research's websites by status, its extracts, and the distinct pages (URLs) of its analysed websites, in
    one query."""
    statuses: Counter[str] = Counter()
    extracts = Extract.objects.filter(research_id=research_pk).values("research_id").annotate(n=Count("id"))
    rows = (
        Website.objects.filter(research_id=research_pk)
        .values("status")
        .annotate(count=Count("id"), pages=Count("url", distinct=True), extract_count=Subquery(extracts.values("n")))
    )
    extract_count = pages_analysed = 0
    for row in rows:
        statuses[row["status"]] = row["count"]
        extract_count = row["extract_count"] or 0
        if row["status"] == WebsiteStatus.ANALYZED:
            pages_analysed = row["pages"]
    return statuses, extract_count, pages_analysed


def row_digests(delta: dict[str, Any]) -> dict[str, str]:
    """A short digest of each row the delta carries, by a key naming the row ("w:<id>" for a website, ...)."""
    rows = [(f"q:{row['id']}", row) for row in delta.get("queries", {}).get("rows", [])]
    rows += [(f"w:{row['id']}", row) for group in delta.get("websites", []) for row in group["rows"]]
    rows += [(f"m:{row['id']}", row) for section in delta.get("memory", {}).values() for row in section["rows"]]
    rows += [(f"s:{row['position']}", row) for row in delta["report_sections"]["rows"]]
    return {key: hashlib.blake2b(_encode(row), digest_size=12).hexdigest() for key, row in rows}


def drop_rows(delta: dict[str, Any], keys: set[str]) -> None:
    """Take the rows named by `keys` out of the delta (the orders stay whole)."""
    if not keys:
        return
    if "queries" in delta:
        delta["queries"]["rows"] = [r for r in delta["queries"]["rows"] if f"q:{r['id']}" not in keys]
    for group in delta.get("websites", []):
        group["rows"] = [r for r in group["rows"] if f"w:{r['id']}" not in keys]
    for section in delta.get("memory", {}).values():
        section["rows"] = [r for r in section["rows"] if f"m:{r['id']}" not in keys]
    sections = delta["report_sections"]
    sections["rows"] = [r for r in sections["rows"] if f"s:{r['position']}" not in keys]


def _encode(row: dict[str, Any]) -> bytes:
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
