"""Deltas: what changed in a research since the previous push, so that a push carries only that.

A client holds the whole state (the snapshot it got on connect or catch-up) and applies each push's delta to it;
after that its state equals the snapshot the server would build at the same moment. The server still reads the
current state from the database for every push, but only the rows that changed since the previous push.

Which rows changed comes from PostgreSQL itself: every row version carries `xmin`, the id of the transaction that
wrote it. A push reads in one REPEATABLE READ transaction and remembers the oldest transaction still running when
its view was taken (`pg_snapshot_xmin`); every transaction committed after that view has an id at or above it, so
the next push loads the rows whose `xmin` is at or above it. A few rows committed just before may come again; no
change can be missed, and nothing has to be written to mark a row as changed.

The shape is published in research/schemas/delta.v3.json; the live page applies one in
research/static/research/js/state.js, and the tests hold a reference implementation of the same rules
(`apply_delta` in devtools/deltas.py) to check it against the snapshot.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db import connection

from research.live.coverage import coverage
from research.live.figures import PageCounts
from research.live.snapshot import (
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
    events_after,
    memory_state,
    progress,
    query_state,
    questions,
    research_state,
    website_state,
)
from research.models import (
    AskedQuestion,
    Document,
    DocumentKind,
    Extract,
    FollowUpQuestion,
    MemoryItem,
    Research,
    SectionStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import database
from research.record.usage import with_usage
from research.types import ResearchId

DELTA_VERSION = 3

# Fields the progress counts need from every query (the pruned subtrees follow parents, positions and decisions).
_PROGRESS_FIELDS = ("id", "parent_id", "depth", "position", "retries", "round", "status", "decision")
_QUERY_ORDER = "depth, parent_id, position, id"


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
        events = events_after(research_id, after, limit)
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
    row comes with the changed rows and the order of all its keys, which also says which rows are gone. One
    statement finds the changed rows of every table and reads what every push needs (counts, the queries' progress
    fields, the report's sections); one more loads each kind of changed row, so a push of one event costs a few
    statements whatever the size of the tree. A whole delta is the snapshot's rows."""
    if since is None or since.xmin is None:
        return whole_delta(build_snapshot(research_id))
    return _changes(research_id, since.seq, since.xmin)


def whole_delta(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A delta with every row of `snapshot`, which applies to any state (base 0) and gives that snapshot."""
    queries, sections = snapshot["queries"], snapshot["report_sections"]
    return {
        "version": DELTA_VERSION,
        "snapshot_version": snapshot["version"],
        "base": 0,
        **{key: snapshot[key] for key in _WHOLE_KEYS},
        "queries": {
            "order": [query["id"] for query in queries],
            "rows": [{key: value for key, value in query.items() if key != "websites"} for query in queries],
        },
        "websites": [
            {"query_id": query["id"], "order": [row["id"] for row in query["websites"]], "rows": query["websites"]}
            for query in queries
            if query["websites"]
        ],
        "memory": {
            section: {"order": [row["id"] for row in rows], "rows": rows}
            for section, rows in snapshot["memory"].items()
        },
        "report_sections": {"order": [section["position"] for section in sections], "rows": sections},
    }


# What a whole delta takes from the snapshot as it is.
_WHOLE_KEYS = (
    "research",
    "questions",
    "conversation",
    "report",
    "report_versions",
    "error_output",
    "progress",
    "coverage",
)


def _changes(research_id: ResearchId, base: int, xmin: int) -> dict[str, Any]:
    """The delta since the view `xmin`. A push runs this for
    every few events of a running research: each read is hand-written (the ORM built every statement anew, two
    thirds of a push's time at 110 queries × 7 pages), and the reads of the rare changes (questions, conversation,
    documents) go through the snapshot's own functions."""
    research = with_usage(research_id)
    key = Research._meta.pk.get_db_prep_value(research.pk, connection)
    state = _read_state(key, xmin, research.report_version)
    changed = state.changed
    delta: dict[str, Any] = {
        "version": DELTA_VERSION,
        "snapshot_version": SNAPSHOT_VERSION,
        "base": base,
        "research": research_state(research),
    }
    if changed["questions"]:
        delta["questions"] = questions(research.pk)
    if changed["conversation"]:
        delta["conversation"] = conversation(research.pk)
    if changed["queries"]:
        rows = database.read_values(
            SerpQuery, (*QUERY_FIELDS, "learnings"), f"id = ANY(%s) ORDER BY {_QUERY_ORDER}", [changed["queries"]]
        )
        delta["queries"] = {"order": [row["id"] for row in state.queries], "rows": [query_state(row) for row in rows]}
    if changed["websites"]:
        delta["websites"] = _websites(changed["websites"])
    if changed["memory"]:
        delta["memory"] = _memory(key, changed["memory"])
    if changed["documents"]:
        delta.update(documents(research.pk, research.report_version)[0])
    delta["report_sections"] = {
        "order": [section["position"] for section in state.sections],
        "rows": [{key: section[key] for key in SECTION_FIELDS} for section in state.sections if section["changed"]],
    }
    delta["progress"] = progress(research, state.queries, state.statuses, state.extracts, state.pages)
    delta["coverage"] = coverage(
        research.report_words,
        state.extracts,
        state.pages.analysed,
        state.sections,
        state.report,
        lambda: _analysed_urls(key),
    )
    return delta


def _analysed_urls(research_key: Any) -> list[str]:
    with database.prepared_cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT url FROM research_website WHERE research_id = %s AND status = %s",
            [research_key, WebsiteStatus.ANALYZED],
        )
        return [url for (url,) in cursor.fetchall()]


# Transaction ids in a row's xmin are 32 bits and wrap around: compare them with the view's, modulo 2**32, as
# PostgreSQL does (a row is newer when it is less than 2**31 ahead).
_NEWER = "((xmin::text::bigint - %(xmin)s) & 4294967295) < 2147483648"
# Which rows of a research each kind of change names (an extract written names its website; a report section's
# change is read with the sections themselves).
_PROBES = {
    "questions": (FollowUpQuestion, "id"),
    "queries": (SerpQuery, "id"),
    "websites": (Website, "id"),
    "extracts": (Extract, "website_id"),
    "memory": (MemoryItem, "id"),
    "documents": (Document, "id"),
    "conversation": (AskedQuestion, "id"),
}
# What every push needs besides the changed rows' ids, read in the same statement (one round trip where these were
# five; the rows come as JSON, which the client decodes in one call): the research's websites by status with the
# distinct pages of the analysed ones, its extracts, its queries' progress fields, the current report version's
# markdown, and that version's sections, each with whether it changed and with its text where the delta or the
# coverage needs it (the written sections' text counts only until the report is assembled: research/live/coverage.py).
_REPORT = (
    "SELECT markdown FROM research_document "
    "WHERE research_id = %(research)s AND kind = %(report)s AND version = %(version)s"
)
_STATE = (
    "SELECT "
    + ", ".join(
        f"ARRAY(SELECT {column} FROM {model._meta.db_table} WHERE research_id = %(research)s AND {_NEWER})"
        for model, column in _PROBES.values()
    )
    + ", (SELECT json_agg(json_build_array(status, n))::text FROM (SELECT status, count(*) AS n "
    "FROM research_website WHERE research_id = %(research)s GROUP BY status) AS counts), "
    # The page figures as research/live/figures.py counts them: per distinct URL, whether any of its websites was
    # analysed, and whether any failed. (URLs told apart byte by byte, as equal strings are under any deterministic
    # collation: a third faster.)
    "(SELECT json_build_array(count(*), count(*) FILTER (WHERE analysed), "
    "count(*) FILTER (WHERE failed AND NOT analysed))::text FROM (SELECT bool_or(status = %(analysed)s) AS analysed, "
    "bool_or(status = %(failed)s) AS failed FROM research_website WHERE research_id = %(research)s "
    'GROUP BY url COLLATE "C") AS pages), '
    "(SELECT count(*) FROM research_extract WHERE research_id = %(research)s), "
    f"(SELECT json_agg(json_build_array({', '.join(_PROGRESS_FIELDS)}) ORDER BY {_QUERY_ORDER})::text "
    "FROM research_serpquery WHERE research_id = %(research)s), "
    f"({_REPORT} LIMIT 1), "
    f"(SELECT json_agg(json_build_array(position, title, status, plan -> 'findings', {_NEWER}, "
    f"CASE WHEN {_NEWER} OR (status = %(written)s AND NOT EXISTS ({_REPORT})) THEN markdown ELSE '' END) "
    "ORDER BY position)::text FROM research_reportsection WHERE research_id = %(research)s AND version = %(version)s)"
)


@dataclass(frozen=True)
class _State:
    changed: dict[str, list[int]]  # the ids of the rows of each kind written after the view
    statuses: Counter[str]  # the research's websites by status
    extracts: int
    pages: PageCounts  # its pages (distinct URLs): found, analysed, failed
    queries: list[dict[str, Any]]  # every query's _PROGRESS_FIELDS, in the snapshot's order
    report: str | None  # the current report version's markdown, None until it is stored
    sections: list[dict[str, Any]]  # that version's sections: SECTION_FIELDS, findings, changed


def _read_state(research_key: Any, xmin: int, report_version: int) -> _State:
    """What changed after the view `xmin`, and what every push needs whatever changed, in one statement."""
    params = {
        "research": research_key,
        "xmin": xmin % 2**32,
        "analysed": WebsiteStatus.ANALYZED,
        "failed": WebsiteStatus.FAILED,
        "report": DocumentKind.REPORT,
        "version": report_version,
        "written": SectionStatus.WRITTEN,
    }
    with database.prepared_cursor() as cursor:
        cursor.execute(_STATE, params)
        *ids, by_status, pages, extracts, queries, report, sections = cursor.fetchone()
    changed = dict(zip(_PROBES, ids, strict=True))
    changed["websites"] = sorted({*changed["websites"], *changed.pop("extracts")})
    statuses: Counter[str] = Counter(dict(json.loads(by_status or "[]")))
    return _State(
        changed=changed,
        statuses=statuses,
        extracts=extracts,
        pages=PageCounts(*json.loads(pages)),
        queries=[dict(zip(_PROGRESS_FIELDS, row, strict=True)) for row in json.loads(queries or "[]")],
        report=report,
        sections=[
            dict(zip(("position", "title", "status", "findings", "changed", "markdown"), row, strict=True))
            for row in json.loads(sections or "[]")
        ],
    )


def _websites(website_ids: list[int]) -> list[dict[str, Any]]:
    """For each query with a changed website: the order of all its websites and the changed ones, whole with their
    extracts (read with them, as JSON)."""
    changed = set(website_ids)
    rows = database.read_values(
        Website,
        WEBSITE_FIELDS,
        "query_id IN (SELECT query_id FROM research_website WHERE id = ANY(%(changed)s)) ORDER BY query_id, position",
        {"changed": website_ids},
        extra={"extracts": _EXTRACTS},
    )
    groups: dict[int, dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(row["query_id"], {"query_id": row["query_id"], "order": [], "rows": []})
        group["order"].append(row["id"])
        if row["id"] in changed:
            group["rows"].append(website_state(row, json.loads(row["extracts"] or "[]")))
    return list(groups.values())


# A changed website's extracts, in order, as a JSON list of {"fact", "quote"} (NULL for the others).
_EXTRACTS = (
    "CASE WHEN id = ANY(%(changed)s) THEN (SELECT json_agg(json_build_object('fact', e.fact, 'quote', e.quote) "
    "ORDER BY e.position)::text FROM research_extract e WHERE e.website_id = research_website.id) END"
)


def _memory(research_key: Any, item_ids: list[int]) -> dict[str, Any]:
    """For each memory section with a changed item (new, or closed): the order of its open items and the changed
    open ones."""
    changed = set(item_ids)
    with database.prepared_cursor() as cursor:
        cursor.execute("SELECT DISTINCT kind FROM research_memoryitem WHERE id = ANY(%s)", [item_ids])
        kinds = [kind for (kind,) in cursor.fetchall()]
    # Every section with a changed item is sent, even one whose items are all closed now.
    memory: dict[str, Any] = {MEMORY_SECTIONS[kind]: {"order": [], "rows": []} for kind in kinds}
    rows = database.read_values(
        MemoryItem,
        MEMORY_FIELDS,
        "research_id = %s AND NOT closed AND kind = ANY(%s) ORDER BY id",
        [research_key, kinds],
    )
    for row in rows:
        section = memory[MEMORY_SECTIONS[row["kind"]]]
        section["order"].append(row["id"])
        if row["id"] in changed:
            section["rows"].append(memory_state(row))
    return memory


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
