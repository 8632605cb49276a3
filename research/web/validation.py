"""Request validation for the JSON API: every problem is an ApiError that becomes a 4xx JSON answer."""

import json
import uuid
from collections.abc import Collection
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

# Event seqs are a 32-bit column: no `after` beyond this can mean anything.
MAX_SEQ = 2**31 - 1


class ApiError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def json_body(request: HttpRequest, fields: Collection[str] | None = None) -> dict[str, Any]:
    """The request's JSON object; with `fields`, one holding any other key is refused (400 naming it)."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise ApiError(413, f"request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes") from None
    if not raw:
        raise ApiError(400, "request body must be a JSON object")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "malformed JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    unknown = sorted(set(data) - set(fields)) if fields is not None else []
    if unknown:
        raise ApiError(400, f"unknown field: {unknown[0]}", unknown[0])
    return data


def text_field(data: dict[str, Any], name: str, max_chars: int, required: bool = True) -> str:
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError(400, "this field is required", name)
        return ""
    value = clean_text(value, name, max_chars)
    if required and not value:
        raise ApiError(400, "must not be empty", name)
    return value


def clean_text(value: Any, field: str, max_chars: int, label: str = "") -> str:
    """A stripped string the database can store: not too long, no NUL, no lone surrogate (JSON allows both)."""
    prefix = f"{label} " if label else ""
    if not isinstance(value, str):
        raise ApiError(400, f"{prefix}must be a string", field)
    value = value.strip()
    if len(value) > max_chars:
        raise ApiError(400, f"{prefix}must be at most {max_chars} characters", field)
    if "\x00" in value:
        raise ApiError(400, f"{prefix}must not contain NUL characters", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"{prefix}must be valid Unicode text (it has a lone surrogate)", field) from None
    return value


def int_field(data: dict[str, Any], name: str, minimum: int, maximum: int) -> int:
    value = data.get(name)
    if value is None:
        raise ApiError(400, "this field is required", name)
    # bool is an int in Python; JSON true is not a number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, "must be an integer", name)
    if not minimum <= value <= maximum:
        raise ApiError(400, f"must be between {minimum} and {maximum}", name)
    return value


def uuid_value(value: Any, name: str = "research_id") -> uuid.UUID:
    if not isinstance(value, str):
        raise ApiError(400, "must be a string", name)
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ApiError(400, "is not a valid research id", name) from None


def list_field(data: dict[str, Any], name: str, max_items: int) -> list[Any]:
    value = data.get(name)
    if value is None:
        raise ApiError(400, "this field is required", name)
    if not isinstance(value, list):
        raise ApiError(400, "must be a list", name)
    if len(value) > max_items:
        raise ApiError(400, f"must have at most {max_items} items", name)
    return value


def seq_param(raw: str) -> int | None:
    """A seq from a query string (`?after=`): 0 to MAX_SEQ in ASCII digits, else None.

    The length is checked before int(): thousands of digits would make it raise (Python caps int() at 4300).
    """
    if not (raw.isascii() and raw.isdigit()):  # "²".isdigit() is True, int("²") fails
        return None
    digits = raw.lstrip("0") or "0"
    if len(digits) > len(str(MAX_SEQ)) or int(digits) > MAX_SEQ:
        return None
    return int(digits)
