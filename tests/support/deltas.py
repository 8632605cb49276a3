"""A client of pushes in a test: takes a delta as the pusher does, applies it, and checks the state it holds.

The pushes are checked against the reference implementation of applying a delta, `devtools.deltas.apply_delta`.
"""

import json
import time
from typing import Any

import jsonschema
import referencing
from django.db import connection

from devtools.deltas import apply_delta
from devtools.processes import ROOT
from research.live.delta import Since, build_delta, consistent_view
from research.live.snapshot import build_snapshot


def delta_validator() -> jsonschema.Draft202012Validator:
    schemas = {name: json.loads((ROOT / "research/schemas" / name).read_text()) for name in ("snapshot.v4.json",)}
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas.values()
    )
    delta = json.loads((ROOT / "research/schemas/delta.v3.json").read_text())
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
