"""The published snapshot schema (research/schemas/snapshot.v4.json) and a validator that also checks formats."""

import functools
import json
from datetime import datetime
from typing import Any

import jsonschema

from devtools.processes import ROOT

SCHEMA_PATH = ROOT / "research/schemas/snapshot.v4.json"


@functools.cache
def snapshot_schema() -> dict[str, Any]:
    """The schema, read once, on first use."""
    return json.loads(SCHEMA_PATH.read_text())


def _is_datetime(value: object) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


@functools.cache
def _format_checker() -> jsonschema.FormatChecker:
    # jsonschema checks "date-time" only with an optional package installed; check it here rather than silently not.
    checker = jsonschema.FormatChecker()
    checker.checks("date-time", raises=ValueError)(_is_datetime)
    return checker


def validate_snapshot(snapshot: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(snapshot_schema(), format_checker=_format_checker()).validate(snapshot)
