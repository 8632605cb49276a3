"""The reference implementation of applying a delta: what a client does with a push.

It follows the rules of research/schemas/delta.v3.json, as the page's research/static/research/js/state.js does;
the tests (tests/support/deltas.py, tests/test_deltas.py) and the snapshot benchmark (bench/snapshots.py) check
with it that the pushes add up to the snapshot. A test and benchmark tool, not production code: the server only
builds deltas (research/live/delta.py).
"""

import copy
from typing import Any

from research.live.snapshot import MEMORY_SECTIONS


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
            "conversation": [],
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
    for key in ("questions", "conversation", "report", "report_versions", "error_output"):
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
