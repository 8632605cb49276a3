"""The published snapshot schema (research/schemas/snapshot.v1.json) and a validator that also checks formats."""

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "research/schemas/snapshot.v1.json").read_text())

# jsonschema checks "date-time" only with an optional package installed; check it here rather than silently not.
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _is_datetime(value: object) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


def validate_snapshot(snapshot: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=FORMATS).validate(snapshot)
