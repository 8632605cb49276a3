"""The OpenAPI document of the JSON API (research/web/openapi.json, served at /api/openapi.json) holds true.

- Every route of the API is a path of the document, and every documented path is a route, with the same methods.
- A research run to completion on the stack answers every read as documented: status, media type and body schema.
- A property-based run of every operation from the document (schemathesis, bounded and derandomized examples, as
  one user with a token, on rows built for the purpose) finds no server error, no undocumented status or media
  type, no body off its schema, and never another user's data; their research, document or token is a 404.
- Another user's research is a 404 on every endpoint that takes one, and the request changes nothing of theirs.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.middleware.csrf import CSRF_ALLOWED_CHARS, CSRF_SECRET_LENGTH
from django.test import Client
from django.urls import resolve
from django.utils import timezone
from django.utils.crypto import get_random_string
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from devtools.processes import wait_until
from research.control import shares, tokens
from research.models import (
    AnswerStatus,
    AskedQuestion,
    CollectionDocument,
    Document,
    DocumentKind,
    DocumentOrigin,
    Event,
    Extract,
    FollowUpQuestion,
    MemoryItem,
    MemoryKind,
    Page,
    PageStatus,
    QueryStatus,
    ReportSection,
    Research,
    ResearchStatus,
    Schedule,
    SectionStatus,
    SerpQuery,
    ShareLink,
    Website,
    WebsiteStatus,
)
from research.web import openapi
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import build_tree, running_research
from tests.support.openapi import DOCUMENT, METHODS, DjangoApp, check_answer, operations, route_paths

# In every row of the other user's, and never in an answer to the user.
SECRET = "mallory-private-7f3c"
# Examples per operation, valid and invalid ones: the 35 operations take about 20 s on a 2-core machine.
EXAMPLES = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)


# --- The document and the routes ----------------------------------------------------------------------------------


def sample(path: str, number: str) -> str:
    """The documented path with a fresh research id and `number` for every other parameter."""
    return re.sub(r"\{\w+\}", number, path.replace("{research_id}", str(uuid.uuid4())))


def test_every_route_is_documented_and_every_documented_path_is_a_route() -> None:
    routes = route_paths()
    assert sorted(set(routes) - set(DOCUMENT["paths"])) == [], "routes of api_patterns missing from openapi.json"
    assert sorted(set(DOCUMENT["paths"]) - set(routes)) == [], "paths of openapi.json that are no route"
    for path, name in routes.items():
        assert resolve(sample(path, "7")).url_name == name, path


def test_each_path_serves_exactly_the_documented_methods(api) -> None:
    """A documented method is served (not 405) and any other is 405: the views' own lists of methods agree with the
    document. Ids that match nothing, so no request changes a row."""
    for path, item in DOCUMENT["paths"].items():
        for method in METHODS:
            status = api.generic(method.upper(), sample(path, "0")).status_code
            assert (status == 405) == (method not in item), f"{method.upper()} {path}: {status}"


def test_the_document_is_served_without_sign_in() -> None:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    served = response.json()
    assert served == openapi.document() and served["openapi"] == "3.1.0"
    # The snapshot's schema is inlined whole, its references pointing into the document.
    snapshot = served["components"]["schemas"]["Snapshot"]
    assert "$defs" in snapshot and "$id" not in snapshot
    assert "#/components/schemas/Snapshot/$defs/timestamp" in json.dumps(snapshot)
    assert Client().post("/api/openapi.json").status_code == 405


def test_the_document_loads_whole() -> None:
    """Every operation loads (every reference resolves), has a unique id, and declares each of its path's
    parameters."""
    loaded = [result.ok() for result in SCHEMA.get_all_operations()]
    assert len(loaded) == len(operations())
    ids = [
        DOCUMENT["paths"][path][method]["operationId"]
        for path in DOCUMENT["paths"]
        for method in METHODS
        if method in DOCUMENT["paths"][path]
    ]
    assert len(ids) == len(set(ids))
    for operation in loaded:
        declared = {parameter.name for parameter in operation.path_parameters}
        assert declared == set(operation.path.replace("}", "{").split("{")[1::2]), operation.label


# --- Rows to run against: the user's researches in every state, and another user's --------------------------------


@dataclass
class World:
    """The user's rows and the other user's, and how to call the API as the user."""

    # Path parameters that name real rows together (a research and its query, share, question, section), the user's
    # and the other user's, and mixes of the two (the user's research, the other user's query).
    targets: list[dict[str, Any]] = field(default_factory=list)
    # Real values of fields of request bodies: a draft to start, an open gap to dig into (the user's and theirs).
    body_values: dict[str, list[Any]] = field(default_factory=dict)
    # Path parameter → the values that are the other user's.
    theirs: dict[str, set[Any]] = field(default_factory=dict)
    # Path parameter → a value of the user's: the completed research and its rows, a document, a spare token.
    own: dict[str, Any] = field(default_factory=dict)
    bearer: dict[str, str] = field(default_factory=dict)
    session_headers: dict[str, str] = field(default_factory=dict)
    session_cookies: dict[str, str] = field(default_factory=dict)
    their_research: str = ""


def completed_research(owner, secret: str = "") -> tuple[Research, dict[str, Any]]:
    """A completed 1x1 research with a report, a written section, an answered question, an open gap, a share link
    and an event; with the ids of those rows, named as the API's path parameters name them."""
    research = build_tree(owner, 1, 1, websites_per_query=1)
    Research.objects.filter(pk=research.pk).update(title=f"Heat pumps {secret}", prompt=f"Cold climates? {secret}")
    query = SerpQuery.objects.get(research=research)
    report = f'# Heat pumps {secret}\n\nCOP stays above 2. [[1]](https://example.com/a "COP 2.7")\n'
    Document.objects.filter(research=research).update(markdown=report)
    ReportSection.objects.create(
        research=research, version=1, position=1, title="Findings", status=SectionStatus.WRITTEN, markdown=report
    )
    asked = AskedQuestion.objects.create(
        research=research, position=0, question=f"Why? {secret}", status=AnswerStatus.ANSWERED, answer=report
    )
    gap = MemoryItem.objects.create(
        research=research, kind=MemoryKind.GAP, text=f"Defrost cycles {secret}", key="defrost", query=query
    )
    Event.objects.create(research=research, seq=1, type="research_started", data={"note": secret})
    Research.objects.filter(pk=research.pk).update(last_event_seq=1)
    share = shares.create(research, None, None)
    ids = {
        "research_id": str(research.pk),
        "query_id": query.pk,
        "share_id": share.pk,
        "question_id": asked.pk,
        "position": 1,
        "gap_id": gap.pk,
    }
    return research, ids


def research_in(owner, status: str, **fields: Any) -> Research:
    return Research.objects.create(owner=owner, prompt="p", title="t", status=status, **fields)


def collection_document(owner, name: str, shared: bool = False) -> CollectionDocument:
    return CollectionDocument.objects.create(
        path=f"upload/{owner.pk}/{'0' * 64}/{name}" if owner else f"/srv/documents/{name}",
        origin=DocumentOrigin.UPLOAD if owner else DocumentOrigin.FOLDER,
        owner=owner,
        shared=shared,
        title=name,
        content_type="text/plain",
        text=f"Text of {name}.",
        sha256="0" * 64,
        size=20,
        indexed_at=timezone.now(),
    )


@pytest.fixture
def world(user, other_user) -> World:
    """The user's researches in every state an endpoint cares about, documents and tokens; the same of another
    user's, each row of theirs carrying SECRET."""
    _, completed = completed_research(user)
    review = research_in(user, ResearchStatus.AWAITING_REVIEW, breadth=2, depth=1, review_plan=True)
    planned = [
        SerpQuery.objects.create(research=review, depth=1, position=i, query=f"q{i}", objective="o") for i in range(2)
    ]
    running = running_research(user, 1, 1)
    pending = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o")
    cancelled = research_in(user, ResearchStatus.CANCELLED, breadth=1, depth=1)
    stopped = SerpQuery.objects.create(
        research=cancelled, depth=1, position=0, query="q", objective="o", status=QueryStatus.CANCELLED
    )
    page = Page.objects.create(research=cancelled, url="https://example.com/c", status=PageStatus.FETCHED, text="t")
    website = Website.objects.create(
        research=cancelled, query=stopped, page=page, position=0, url=page.url, status=WebsiteStatus.ANALYZED
    )
    Extract.objects.create(research=cancelled, website=website, position=0, fact="f", quote="t")
    failed = research_in(user, ResearchStatus.FAILED, error="the model refused")
    Document.objects.create(research=failed, kind=DocumentKind.ERROR_OUTPUT, markdown="# Error\n\nIt failed.\n")
    draft = research_in(user, ResearchStatus.AWAITING_ANSWERS, num_questions=1)
    FollowUpQuestion.objects.create(research=draft, position=0, question="Which climates?")
    _, theirs = completed_research(other_user, SECRET)

    mine, shared = collection_document(user, "notes.txt"), collection_document(None, "handbook.txt")
    their_document = collection_document(other_user, f"{SECRET}.txt")
    _, secret = tokens.create(user, "property run", False)
    spare, _ = tokens.create(user, "spare", False)
    their_token, _ = tokens.create(other_user, SECRET, False)

    session = Client()
    session.force_login(user)
    csrf = get_random_string(CSRF_SECRET_LENGTH, allowed_chars=CSRF_ALLOWED_CHARS)
    their_rows = ("query_id", "share_id", "question_id")
    return World(
        targets=[
            completed,
            {"research_id": str(review.pk), "query_id": planned[0].pk},
            {"research_id": str(running.pk), "query_id": pending.pk},
            {"research_id": str(cancelled.pk), "query_id": stopped.pk},
            {"research_id": str(failed.pk)},
            {"research_id": str(draft.pk)},
            theirs,
            {**completed, **{name: theirs[name] for name in their_rows}},
            {"document_id": mine.pk},
            {"document_id": shared.pk},
            {"document_id": their_document.pk},
            {"token_id": spare.pk},
            {"token_id": their_token.pk},
        ],
        body_values={
            "research_id": [str(draft.pk), theirs["research_id"]],
            "gap_id": [completed["gap_id"], theirs["gap_id"]],
        },
        own={**completed, "document_id": mine.pk, "token_id": spare.pk},
        theirs={
            **{name: {theirs[name]} for name in ("research_id", *their_rows)},
            "document_id": {their_document.pk},
            "token_id": {their_token.pk},
        },
        bearer={"Authorization": f"Bearer {secret}"},
        session_headers={"X-CSRFToken": csrf},
        session_cookies={
            django_settings.SESSION_COOKIE_NAME: session.cookies[django_settings.SESSION_COOKIE_NAME].value,
            django_settings.CSRF_COOKIE_NAME: csrf,
        },
        their_research=theirs["research_id"],
    )


# --- The property run ---------------------------------------------------------------------------------------------


def session_only(operation: str) -> bool:
    """The operations a token may not call (tokens are managed from a session): run with the user's session."""
    method, path = operation.split(" ", 1)
    return DOCUMENT["paths"][path][method.lower()].get("security") == [{"cookieAuth": []}]


@pytest.mark.parametrize("operation", operations())
def test_the_api_answers_as_documented(operation, world, published, settings) -> None:
    settings.QUESTIONS_WAIT_SECONDS = 0  # no worker writes questions here: the request answers 202 at once
    method, path = operation.split(" ", 1)
    endpoint = SCHEMA[path][method]
    app = DjangoApp()
    transport: dict[str, Any] = {"headers": dict(world.bearer)}
    if session_only(operation):
        transport = {"headers": dict(world.session_headers), "cookies": dict(world.session_cookies)}

    @hypothesis_settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(endpoint.as_strategy(), endpoint.as_strategy(GenerationMode.NEGATIVE)), data=st.data())
    def run(case, data) -> None:
        # Path parameters: as generated, or naming real rows of the user's, of the other user's, or of both.
        names = set(case.path_parameters)
        targets = [target for target in world.targets if names & set(target)]
        if targets:
            target = data.draw(st.sampled_from([*targets, {}]), label="target")
            case.path_parameters.update({name: value for name, value in target.items() if name in names})
        if isinstance(case.body, dict):
            for name in set(case.body) & set(world.body_values):
                case.body[name] = data.draw(st.sampled_from([*world.body_values[name], case.body[name]]), label=name)
        response = case.call(app=app, **transport)
        errors = f"\n{app.errors[-1]!r}" if app.errors else ""
        assert response.status_code < 500, f"{operation} {case.path_parameters}: {response.status_code}{errors}"
        case.validate_response(response, checks=CHECKS)
        assert SECRET.encode() not in response.content, f"{operation} answered with the other user's data"
        assert world.their_research.encode() not in response.content
        if any(value in world.theirs.get(name, ()) for name, value in case.path_parameters.items()):
            assert not 200 <= response.status_code < 300, f"{operation} {case.path_parameters}: {response.status_code}"
        if case.path_parameters.get("research_id") in world.theirs["research_id"]:
            assert response.status_code == 404, f"{operation}: another user's research: {response.status_code}"

    run()


# Values that broke the reading of numbers in a query or a path: a digit int() refuses ("²"), one it reads (the
# Arabic-Indic "٣"), more digits than int() converts (4,300), a sign, a fraction, an exponent, a space, a NUL.
HOSTILE = ["²", "٣", "9" * 5000, "-1", "1.0", "1e3", " 1", "", "\x00"]


def parameters(operation: str) -> list[dict[str, Any]]:
    """The operation's parameters, its path's included, references resolved."""
    method, path = operation.split(" ", 1)
    item = DOCUMENT["paths"][path]
    found = []
    for parameter in [*item.get("parameters", []), *item[method.lower()].get("parameters", [])]:
        if "$ref" in parameter:
            parameter = DOCUMENT["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
        found.append(parameter)
    return found


WITH_NUMBERS = [
    operation
    for operation in operations()
    if any(p["in"] == "query" or p["schema"].get("type") == "integer" for p in parameters(operation))
]


@pytest.mark.parametrize("operation", WITH_NUMBERS)
def test_hostile_numbers_get_a_documented_answer(operation, world, published) -> None:
    """Each query parameter and each whole-number path parameter, given each of HOSTILE: a documented answer (a
    clear 4xx), never a server error. The rest of the request names the user's completed research."""
    method, path = operation.split(" ", 1)
    real = world.own
    client = Client(headers=world.bearer)
    if session_only(operation):
        client = Client(headers=world.session_headers)
        client.cookies.load(world.session_cookies)
    for parameter in parameters(operation):
        name = parameter["name"]
        for value in HOSTILE:
            if parameter["in"] == "query":
                response = client.generic(method, path.format(**real) + "?" + urlencode({name: value}))
            elif parameter["schema"].get("type") == "integer" and value.strip() and "\x00" not in value:
                response = client.generic(method, path.format(**{**real, name: quote(value)}))
            else:
                continue
            check_answer(operation, response.status_code, response.get("Content-Type", ""), response.content)
            if parameter["schema"].get("type") == "integer" or "enum" in parameter["schema"]:  # not free text
                assert 400 <= response.status_code < 500, f"{operation} {name}={value[:10]!r}: {response.status_code}"


# --- Another user's research: a 404 everywhere ------------------------------------------------------------------

# A valid body for each operation on a research that takes one: the 404 must not hang on the body's shape.
BODIES = {
    "renameResearch": {"title": "renamed"},
    "deepenResearch": {"query": "defrost cycles"},
    "createShare": {},
    "setSchedule": {"every": "daily"},
    "pauseSchedule": {"paused": True},
    "askResearch": {"question": "Why?"},
    "editPlan": {"queries": [{"query": "q"}]},
}
ON_A_RESEARCH = [operation for operation in operations() if "{research_id}" in operation]


@pytest.mark.parametrize("operation", ON_A_RESEARCH)
def test_another_users_research_is_not_found_and_left_alone(operation, user, other_user, published) -> None:
    theirs, ids = completed_research(other_user, SECRET)
    Schedule.objects.create(research=theirs, every="daily", secret=f"whsec_{SECRET}", next_run_at=timezone.now())
    _, secret = tokens.create(user, "cli", False)
    method, path = operation.split(" ", 1)
    spec = DOCUMENT["paths"][path][method.lower()]
    url = path.format(**ids)
    before = (
        Research.objects.filter(pk=theirs.pk).values().get(),
        ShareLink.objects.count(),
        Schedule.objects.count(),
        Event.objects.count(),
    )
    client = Client(headers={"Authorization": f"Bearer {secret}"})
    body = BODIES.get(spec["operationId"])
    response = client.generic(method, url, json.dumps(body) if body is not None else "", "application/json")
    assert response.status_code == 404, response.content
    check_answer(operation, 404, response["Content-Type"], response.content)
    assert SECRET.encode() not in response.content
    after = (
        Research.objects.filter(pk=theirs.pk).values().get(),
        ShareLink.objects.count(),
        Schedule.objects.count(),
        Event.objects.count(),
    )
    assert after == before and published == []


# --- A real research, run on the stack ------------------------------------------------------------------------------


def test_a_finished_research_answers_every_read_as_documented(api, user, workers, research_model) -> None:
    """A research run to completion on the workers and the fake model, asked a question, shared and with a
    document uploaded: every GET answers as the document says, for what exists and for what does not."""
    research_id = start_research(api, 2, 1)
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    asked = api.post(f"/api/research/{research_id}/ask", {"question": "What did they measure?"}, "application/json")
    check_answer("POST /api/research/{research_id}/ask", asked.status_code, asked["Content-Type"], asked.content)
    question_id = asked.json()["id"]
    wait_until(lambda: AskedQuestion.objects.get(pk=question_id).status == AnswerStatus.ANSWERED, 60, "the answer")
    shared = api.post(f"/api/research/{research_id}/shares", {}, "application/json")
    check_answer("POST /api/research/{research_id}/shares", shared.status_code, shared["Content-Type"], shared.content)
    notes = SimpleUploadedFile("field-notes.md", b"# Field notes\n\nThe heat pump kept a COP of 2.7 at -15 C.\n")
    uploaded = api.post("/api/documents/", {"files": [notes]})
    check_answer("POST /api/documents/", uploaded.status_code, uploaded["Content-Type"], uploaded.content)
    document_id = uploaded.json()["documents"][0]["id"]
    made = api.post("/api/tokens", {"name": "cli"}, "application/json")
    check_answer("POST /api/tokens", made.status_code, made["Content-Type"], made.content)
    scheduled = api.post(f"/api/research/{research_id}/schedule", {"every": "weekly"}, "application/json")
    check_answer(
        "POST /api/research/{research_id}/schedule", scheduled.status_code, scheduled["Content-Type"], scheduled.content
    )

    values = {"research_id": research_id, "position": 1, "question_id": question_id, "document_id": document_id}
    # Each read with no parameter, and with every query parameter it documents.
    queries = {"q": "heat", "after": 0, "version": 1, "conversation": 1}
    answered = {}
    for operation in operations():
        method, path = operation.split(" ", 1)
        if method != "GET":
            continue
        names = {parameter["name"] for parameter in parameters(operation) if parameter["in"] == "query"}
        for query in {"", urlencode({name: value for name, value in queries.items() if name in names})}:
            response = api.get(path.format(**values) + (f"?{query}" if query else ""))
            answered[f"{operation}?{query}"] = response.status_code
            check_answer(operation, response.status_code, response.get("Content-Type", ""), response.content)
        # What does not exist: that answer is documented too.
        missing = {**values, "research_id": str(uuid.uuid4()), "position": 99, "question_id": 0, "document_id": 0}
        response = api.get(path.format(**missing))
        check_answer(operation, response.status_code, response.get("Content-Type", ""), response.content)
    # Everything a completed research has was there to read: all but its error output (it did not fail).
    unread = sorted(operation for operation, status in answered.items() if status != 200)
    assert all("/error-output." in operation for operation in unread), answered
    assert len(answered) - len(unread) > 20
