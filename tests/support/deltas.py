"""A client of pushes in a test: takes a delta as the pusher does, applies it, and checks the state it holds.

`apply_delta` is the reference implementation of applying a delta (the rules of research/schemas/delta.v1.json,
which the page's research/static/research/js/state.js follows): the tests and the snapshot benchmark
(bench/snapshots.py) check with it that the pushes add up to the snapshot.
"""

import copy
import json
import time
from typing import Any

import jsonschema
import referencing
from django.db import connection

from devtools.processes import ROOT
from research.delta import Since, build_delta, consistent_view
from research.snapshot import MEMORY_SECTIONS, build_snapshot


def delta_validator() -> jsonschema.Draft202012Validator:
    schemas = {name: json.loads((ROOT / "research/schemas" / name).read_text()) for name in ("snapshot.v2.json",)}
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas.values()
    )
    delta = json.loads((ROOT / "research/schemas/delta.v1.json").read_text())
    return jsonschema.Draft202012Validator(delta, registry=registry)


class Watcher:
    """A client as the pusher serves it: takes a delta since the last one and applies it to its state."""

    def __init__(self, research_id: Any) -> None:
        self.research_id = research_id
        self.state: dict[str, Any] | None = None
        self.since: Since | None = None
        self.validator = delta_validator()
        self.quiet = False  # was no other transaction writing when the last delta was read?

    def pull(self) -> dict[str, Any]:
        """Take the next delta, apply it, and check the state against the snapshot of the same view."""
        for _ in range(50):
            with consistent_view() as xmin:
                quiet = _quiet_view()
                delta = build_delta(self.research_id, self.since)
                expected = build_snapshot(self.research_id)
            if quiet:
                break
            time.sleep(0.1)  # another test run's transaction: wait for a view that only this test wrote
        delta = json.loads(json.dumps(delta))  # as it travels
        self.validator.validate(delta)
        self.state = apply_delta(self.state, delta)
        assert self.state == json.loads(json.dumps(expected))
        self.since, self.followed_quiet, self.quiet = (
            Since(delta["research"]["last_event_seq"], xmin),
            self.quiet,
            quiet,
        )
        return delta

    def carries(self, delta: dict[str, Any], **expected: Any) -> None:
        """The delta carries exactly the `expected` rows (and nothing else) when the view it follows was quiet;
        a transaction of another test run open at that view makes the rows since then come again, so then it
        must carry at least those."""
        kinds = {"queries": [], "websites": [], "memory": {}, "sections": [], "documents": False, "questions": False}
        expected = {**kinds, **expected}
        got = touched(delta)
        if self.followed_quiet:
            assert got == expected
            return
        for kind, value in expected.items():
            if isinstance(value, bool):
                assert got[kind] or not value, kind
            elif isinstance(value, dict):
                for section, ids in value.items():
                    assert set(ids) <= set(got[kind].get(section, [])), kind
            else:
                assert set(value) <= set(got[kind]), kind


def _quiet_view() -> bool:
    """True when no transaction that writes was running at this view (its oldest running id is its next one)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_snapshot_xmin(pg_current_snapshot()) = pg_snapshot_xmax(pg_current_snapshot())")
        return cursor.fetchone()[0]


def touched(delta: dict[str, Any]) -> dict[str, Any]:
    """The rows a delta carries, by kind."""
    return {
        "queries": sorted(q["id"] for q in delta.get("queries", {}).get("rows", [])),
        "websites": sorted(w["id"] for group in delta.get("websites", []) for w in group["rows"]),
        "memory": {k: sorted(i["id"] for i in v["rows"]) for k, v in delta.get("memory", {}).items()},
        "sections": sorted(s["position"] for s in delta["report_sections"]["rows"]),
        "documents": "report" in delta,
        "questions": "questions" in delta,
    }


class DeltaMismatch(ValueError):
    """A delta names rows the state does not have: the state is not the one the delta follows."""


def apply_delta(state: dict[str, Any] | None, delta: dict[str, Any]) -> dict[str, Any]:
    """The state after `delta`: the reference implementation of what a client does with a push.

    `state` is a snapshot (or None, for a delta with base 0); it is not modified. Raises DeltaMismatch when the
    delta names a row the state lacks (the client then asks for the whole state again)."""
    if state is None:
        if delta["base"] != 0:
            raise DeltaMismatch("a delta on a state this client does not have")
        state = {
            "questions": [],
            "queries": [],
            "memory": {section: [] for section in MEMORY_SECTIONS.values()},
            "report": None,
            "report_versions": [],
            "report_sections": [],
            "error_output": None,
        }
    new = copy.deepcopy(state)
    new["version"] = delta["snapshot_version"]
    new["research"] = delta["research"]
    new["progress"] = delta["progress"]
    new["coverage"] = delta["coverage"]
    for key in ("questions", "report", "report_versions", "error_output"):
        if key in delta:
            new[key] = delta[key]
    if "queries" in delta:
        old = {query["id"]: query for query in new["queries"]}
        fresh = {query["id"]: query for query in delta["queries"]["rows"]}
        new["queries"] = [
            {**fresh[key], "websites": old[key]["websites"] if key in old else []} if key in fresh else _take(old, key)
            for key in delta["queries"]["order"]
        ]
    by_id = {query["id"]: query for query in new["queries"]}
    for group in delta.get("websites", []):
        query = _take(by_id, group["query_id"])
        query["websites"] = _merge(query["websites"], group, "id")
    for section, change in delta.get("memory", {}).items():
        new["memory"][section] = _merge(new["memory"].get(section, []), change, "id")
    new["report_sections"] = _merge(new["report_sections"], delta["report_sections"], "position")
    return new


def _merge(rows: list[dict[str, Any]], change: dict[str, Any], key: str) -> list[dict[str, Any]]:
    old = {row[key]: row for row in rows}
    fresh = {row[key]: row for row in change["rows"]}
    return [fresh[k] if k in fresh else _take(old, k) for k in change["order"]]


def _take(rows: dict[Any, dict[str, Any]], key: Any) -> dict[str, Any]:
    try:
        return rows[key]
    except KeyError:
        raise DeltaMismatch(f"the delta names a row the state does not have: {key!r}") from None
