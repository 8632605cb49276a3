"""The OpenAPI 3.1 document of the JSON API: written by hand in research/web/openapi.json, served at
/api/openapi.json, and held true by tests/test_openapi.py (every route documented, real responses validated, a
property-based run over every operation).

The snapshot's schema stays in one place, research/schemas/snapshot.v4.json: the kept document refers to it by its
`$id`, and the served one carries it inline so that it is whole on its own. It is inlined without its `$id` and with
its `#/$defs/...` references rewritten to point into the document: every tool then resolves them alike, whether or
not it honours an embedded `$id`."""

import copy
import functools
import json
from pathlib import Path
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from research.web.api import error_response

DOCUMENT_PATH = Path(__file__).with_name("openapi.json")
SNAPSHOT_PATH = Path(__file__).resolve().parent.parent / "schemas" / "snapshot.v4.json"
# Where the snapshot's schema sits in the served document.
SNAPSHOT_POINTER = "#/components/schemas/Snapshot"


@functools.cache
def _document() -> dict[str, Any]:
    document = json.loads(DOCUMENT_PATH.read_text())
    snapshot = json.loads(SNAPSHOT_PATH.read_text())
    stub = document["components"]["schemas"]["Snapshot"]
    if stub.get("$ref") != snapshot["$id"]:
        raise ValueError(f"openapi.json's Snapshot must refer to {snapshot['$id']}, not {stub.get('$ref')}")
    document["components"]["schemas"]["Snapshot"] = _inlined(snapshot, SNAPSHOT_POINTER)
    return document


def document() -> dict[str, Any]:
    """The document as served, the snapshot schema inlined (a copy: callers may change it)."""
    return copy.deepcopy(_document())


def _inlined(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    """The schema without its identity, its own `#/...` references made relative to `pointer` in the document."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: (pointer + value[1:] if key == "$ref" and value.startswith("#/") else rewrite(value))
                for key, value in node.items()
                if key not in ("$id", "$schema")
            }
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    return rewrite(schema)


def openapi_document(request: HttpRequest) -> HttpResponse:
    """GET /api/openapi.json, without sign-in: the shape of the API is public (it is in the repository), and tools
    read it before they hold a token. A request carrying a token is still checked by the token middleware."""
    if request.method not in ("GET", "HEAD"):
        response = error_response(405, f"method {request.method} not allowed")
        response["Allow"] = "GET, HEAD"
        return response
    return JsonResponse(_document())
