"""The OpenAPI document of the JSON API (research/web/openapi.json) as the tests use it: the API's routes spelled as
its paths, the documented answer of an operation (status, media type, body schema) checked against a real answer,
and the app as a WSGI callable for schemathesis."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from typing import Any
from urllib.parse import quote

import jsonschema
from django.core.signals import got_request_exception
from django.test.client import ClientHandler
from django.urls import URLPattern
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from research.web.openapi import document
from researchsite.urls import api_patterns

DOCUMENT = document()
METHODS = ("get", "put", "post", "delete", "patch")
# Where the document sits for the validator's references (`#/components/...` inside it resolve against it).
BASE_URI = "urn:deep-research:openapi"
REGISTRY = Registry().with_resource(BASE_URI, Resource.from_contents(DOCUMENT, default_specification=DRAFT202012))


def operations() -> list[str]:
    """Every documented operation, as "METHOD /path"."""
    return [
        f"{method.upper()} {path}" for path, item in DOCUMENT["paths"].items() for method in METHODS if method in item
    ]


def route_paths() -> dict[str, str]:
    """Each route of `api_patterns` as the document spells its path (`/api/research/{research_id}`), with its name."""
    found = {}
    for pattern in api_patterns:
        assert isinstance(pattern, URLPattern), f"an include() in api_patterns: spell its routes here too ({pattern})"
        found["/api/" + _as_path(str(pattern.pattern))] = str(pattern.name)
    return found


def _as_path(route: str) -> str:
    # path(): <str:research_id> → {research_id}. re_path(): (?P<document_id>[0-9]+) → {document_id}, and the
    # optional trailing slash as the document writes it, with one.
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route).removeprefix("^").removesuffix("$").replace("/?", "/")
    path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)
    assert not re.search(r"[\\^$?()\[\]*+]", path), f"a route this test cannot spell as a path: {route}"
    return path


def _pointer(*parts: str) -> str:
    return "/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def _resolved(node: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
    """A response object, following its `$ref` into the components; with the pointer it is at."""
    while "$ref" in node:
        pointer = node["$ref"].removeprefix("#")
        node = DOCUMENT
        for part in pointer.strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node, pointer


def _is_datetime(value: object) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


FORMATS = jsonschema.FormatChecker()
# jsonschema checks "date-time" only with an optional package installed: checked here rather than silently not.
FORMATS.checks("date-time", raises=ValueError)(_is_datetime)


def check_answer(operation: str, status: int, content_type: str, content: bytes) -> Any:
    """Fails unless the operation documents the status and media type and, for JSON, the body validates against the
    documented schema; returns the body, parsed where it is JSON."""
    method, path = operation.split(" ", 1)
    responses = DOCUMENT["paths"][path][method.lower()]["responses"]
    assert str(status) in responses, f"{operation}: status {status} is not documented ({content[:300]!r})"
    response, pointer = _resolved(
        responses[str(status)], _pointer("paths", path, method.lower(), "responses", str(status))
    )
    documented = response.get("content", {})
    if not documented:
        assert content == b"", f"{operation}: {status} documents no body, got {content[:300]!r}"
        return None
    media_type = content_type.split(";")[0].strip()
    assert media_type in documented, f"{operation}: {status} documents {sorted(documented)}, got {content_type}"
    if media_type != "application/json":
        return content
    body = json.loads(content)
    schema_uri = BASE_URI + "#" + quote(pointer + _pointer("content", media_type, "schema"), safe="/~")
    validator = jsonschema.Draft202012Validator({"$ref": schema_uri}, registry=REGISTRY, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(body), key=lambda error: list(error.absolute_path))
    assert not errors, f"{operation} {status}: " + "; ".join(
        f"{'/'.join(map(str, error.absolute_path))}: {error.message[:300]}" for error in errors[:5]
    )
    return body


class DjangoApp:
    """The app as a WSGI callable, for schemathesis's in-process transport: each request is served as Django's test
    client serves it, in this thread, on the test's database connection and inside its transaction (Django's own
    WSGI handler closes that connection after each request). CSRF is checked, as in production. An exception that
    becomes a 500 is kept in `errors`, so a failure can show its traceback."""

    def __init__(self) -> None:
        self.handler = ClientHandler(enforce_csrf_checks=True)
        self.errors: list[BaseException] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        got_request_exception.connect(self._keep, dispatch_uid=id(self))
        try:
            response = self.handler(environ)
        finally:
            got_request_exception.disconnect(dispatch_uid=id(self))
        headers = [*response.items(), *(("Set-Cookie", morsel.OutputString()) for morsel in response.cookies.values())]
        start_response(f"{response.status_code} {response.reason_phrase}", headers)
        return [response.content]

    def _keep(self, **kwargs: Any) -> None:
        error = sys.exc_info()[1]
        if error is not None:
            self.errors.append(error)
