"""Bad input to every endpoint: a 4xx JSON error, and nothing created or queued."""

import json
import uuid

import pytest

from research.models import Event, FollowUpQuestion, Research, ResearchStatus

# Transactional, so on_commit hooks (where tasks are queued) really run: "nothing queued" can fail.
pytestmark = pytest.mark.django_db(transaction=True)

GOOD_START = {"prompt": "Solid-state batteries", "questions": [{"question": "Why?", "answer": "Curious"}]}
UNKNOWN = str(uuid.uuid4())

# (name, method, path, body: dict | str | bytes | None, expected status)
CASES = [
    # questions
    ("questions: empty body", "post", "/api/research/questions", b"", 400),
    ("questions: malformed JSON", "post", "/api/research/questions", b'{"prompt": "x",', 400),
    ("questions: JSON list", "post", "/api/research/questions", [1, 2], 400),
    ("questions: missing prompt", "post", "/api/research/questions", {"num_questions": 3}, 400),
    ("questions: missing count", "post", "/api/research/questions", {"prompt": "x"}, 400),
    ("questions: prompt wrong type", "post", "/api/research/questions", {"prompt": 5, "num_questions": 3}, 400),
    ("questions: blank prompt", "post", "/api/research/questions", {"prompt": "   ", "num_questions": 3}, 400),
    ("questions: count string", "post", "/api/research/questions", {"prompt": "x", "num_questions": "3"}, 400),
    ("questions: count bool", "post", "/api/research/questions", {"prompt": "x", "num_questions": True}, 400),
    ("questions: count float", "post", "/api/research/questions", {"prompt": "x", "num_questions": 2.5}, 400),
    ("questions: count zero", "post", "/api/research/questions", {"prompt": "x", "num_questions": 0}, 400),
    ("questions: count negative", "post", "/api/research/questions", {"prompt": "x", "num_questions": -1}, 400),
    ("questions: count over limit", "post", "/api/research/questions", {"prompt": "x", "num_questions": 11}, 400),
    (
        "questions: prompt over limit",
        "post",
        "/api/research/questions",
        {"prompt": "x" * 10_001, "num_questions": 2},
        400,
    ),
    ("questions: 1 MB prompt", "post", "/api/research/questions", {"prompt": "x" * 1_000_000, "num_questions": 2}, 413),
    ("questions: NUL in prompt", "post", "/api/research/questions", {"prompt": "a\x00b", "num_questions": 2}, 400),
    ("questions: lone surrogate", "post", "/api/research/questions", {"prompt": "a\ud800b", "num_questions": 2}, 400),
    ("questions: nested too deep", "post", "/api/research/questions", b"[" * 100_000, 400),
    ("questions: GET", "get", "/api/research/questions", None, 405),
    # start
    ("start: malformed JSON", "post", "/api/research/start", b"{{", 400),
    ("start: empty body", "post", "/api/research/start", b"", 400),
    ("start: JSON list", "post", "/api/research/start", [GOOD_START], 400),
    ("start: breadth negative", "post", "/api/research/start", {**GOOD_START, "breadth": -1, "depth": 1}, 400),
    ("start: depth zero", "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": 0}, 400),
    ("start: depth string", "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": "1"}, 400),
    (
        "start: prompt over limit",
        "post",
        "/api/research/start",
        {**GOOD_START, "prompt": "x" * 10_001, "breadth": 1, "depth": 1},
        400,
    ),
    (
        "start: lone surrogate in answer",
        "post",
        "/api/research/start",
        {"prompt": "x", "questions": [{"question": "q", "answer": "\udfff"}], "breadth": 1, "depth": 1},
        400,
    ),
    ("start: missing breadth", "post", "/api/research/start", {**GOOD_START, "depth": 1}, 400),
    ("start: missing depth", "post", "/api/research/start", {**GOOD_START, "breadth": 1}, 400),
    ("start: breadth zero", "post", "/api/research/start", {**GOOD_START, "breadth": 0, "depth": 1}, 400),
    ("start: depth negative", "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": -2}, 400),
    ("start: breadth over limit", "post", "/api/research/start", {**GOOD_START, "breadth": 11, "depth": 1}, 400),
    ("start: depth over limit", "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": 6}, 400),
    ("start: breadth string", "post", "/api/research/start", {**GOOD_START, "breadth": "2", "depth": 1}, 400),
    (
        "start: unknown id",
        "post",
        "/api/research/start",
        {"research_id": UNKNOWN, "answers": [], "breadth": 1, "depth": 1},
        404,
    ),
    (
        "start: bad id",
        "post",
        "/api/research/start",
        {"research_id": "nope", "answers": [], "breadth": 1, "depth": 1},
        400,
    ),
    (
        "start: id wrong type",
        "post",
        "/api/research/start",
        {"research_id": 7, "answers": [], "breadth": 1, "depth": 1},
        400,
    ),
    ("start: no prompt, no id", "post", "/api/research/start", {"questions": [], "breadth": 1, "depth": 1}, 400),
    (
        "start: questions not list",
        "post",
        "/api/research/start",
        {"prompt": "x", "questions": "q", "breadth": 1, "depth": 1},
        400,
    ),
    (
        "start: question not object",
        "post",
        "/api/research/start",
        {"prompt": "x", "questions": ["q"], "breadth": 1, "depth": 1},
        400,
    ),
    (
        "start: question missing text",
        "post",
        "/api/research/start",
        {"prompt": "x", "questions": [{"answer": "a"}], "breadth": 1, "depth": 1},
        400,
    ),
    (
        "start: 1 MB prompt",
        "post",
        "/api/research/start",
        {**GOOD_START, "prompt": "p" * 1_000_000, "breadth": 1, "depth": 1},
        413,
    ),
    ("start: GET", "get", "/api/research/start", None, 405),
    # per-research endpoints with unknown or malformed ids
    ("detail: unknown id", "get", f"/api/research/{UNKNOWN}", None, 404),
    ("detail: malformed id", "get", "/api/research/not-a-uuid", None, 400),
    ("detail: POST", "post", f"/api/research/{UNKNOWN}", {}, 405),
    ("events: unknown id", "get", f"/api/research/{UNKNOWN}/events", None, 404),
    ("events: after of 5000 digits", "get", f"/api/research/{UNKNOWN}/events?after={'9' * 5000}", None, 400),
    ("events: after past the seq column", "get", f"/api/research/{UNKNOWN}/events?after=2147483648", None, 400),
    ("report: unknown id", "get", f"/api/research/{UNKNOWN}/report.md", None, 404),
    ("report: malformed id", "get", "/api/research/123/report.md", None, 400),
    ("error output: unknown id", "get", f"/api/research/{UNKNOWN}/error-output.md", None, 404),
    ("cancel: unknown id", "post", f"/api/research/{UNKNOWN}/cancel", None, 404),
    ("cancel: malformed id", "post", "/api/research/zzz/cancel", None, 400),
    ("cancel: GET", "get", f"/api/research/{UNKNOWN}/cancel", None, 405),
    ("list: POST", "post", "/api/research", {}, 405),
]


def send(client, method: str, path: str, body):
    if body is None:
        return getattr(client, method)(path)
    raw = body if isinstance(body, bytes) else json.dumps(body)
    return getattr(client, method)(path, data=raw, content_type="application/json")


@pytest.mark.parametrize(("name", "method", "path", "body", "status"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_4xx_json_error(api, fakes, fake_llm, published, name, method, path, body, status) -> None:
    # when
    response = send(api, method, path, body)
    # then
    assert response.status_code == status, response.content[:300]
    error = response.json()["error"]
    assert set(error) == {"field", "message"} and error["message"]
    assert Research.objects.count() == 0
    assert FollowUpQuestion.objects.count() == 0
    assert Event.objects.count() == 0
    assert published == []
    assert fake_llm.count() == 0


def test_start_answers_must_match_questions(api, user, published) -> None:
    # given a research awaiting answers to two questions
    research = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.AWAITING_ANSWERS)
    FollowUpQuestion.objects.bulk_create(
        FollowUpQuestion(research=research, position=i, question=f"q{i}") for i in range(2)
    )
    for answers, field in (
        [["only one"], "answers"],
        [["a", 5], "answers"],
        ["text", "answers"],
        [["a", "b" * 5001], "answers"],
        [["a", "b\x00"], "answers"],
        [["\ud800", "b"], "answers"],
    ):
        # when
        response = send(
            api,
            "post",
            "/api/research/start",
            {"research_id": str(research.pk), "answers": answers, "breadth": 2, "depth": 2},
        )
        # then
        assert response.status_code == 400
        assert response.json()["error"]["field"] == field
    research.refresh_from_db()
    assert research.status == ResearchStatus.AWAITING_ANSWERS and research.breadth is None
    assert published == []


def test_events_after_must_be_a_plain_number(api, user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.QUEUED)
    for after in ("\u00b2", "-1", "1.5", "x", "9" * 5000, "2147483648"):
        response = api.get(f"/api/research/{research.pk}/events", {"after": after})
        assert response.status_code == 400, after
        assert response.json()["error"]["field"] == "after"
    for after in ("0", "2147483647", "0" * 20 + "7"):
        assert api.get(f"/api/research/{research.pk}/events", {"after": after}).json() == {"events": []}, after


def test_start_twice_is_a_conflict_and_queues_once(api, user, published) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.AWAITING_ANSWERS)
    FollowUpQuestion.objects.create(research=research, position=0, question="q")
    body = {"research_id": str(research.pk), "answers": ["a"], "breadth": 2, "depth": 1}
    first = send(api, "post", "/api/research/start", body)
    second = send(api, "post", "/api/research/start", body)
    assert first.status_code == 202 and first.json() == {"research_id": str(research.pk)}
    assert second.status_code == 409
    assert published == ["workers.tasks.start_research_task"]
    research.refresh_from_db()
    assert (research.status, research.breadth, research.depth) == (ResearchStatus.QUEUED, 2, 1)
    assert research.questions.get().answer == "a"


def test_start_without_research_id_creates_it(api, published) -> None:
    response = send(api, "post", "/api/research/start", {**GOOD_START, "breadth": 3, "depth": 2})
    assert response.status_code == 202
    research = Research.objects.get(pk=response.json()["research_id"])
    assert research.status == ResearchStatus.QUEUED
    assert list(research.questions.values_list("question", "answer")) == [("Why?", "Curious")]
    assert published == ["workers.tasks.start_research_task"]


def test_cancel_finished_research_is_a_conflict(api, user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.COMPLETED)
    response = api.post(f"/api/research/{research.pk}/cancel")
    assert response.status_code == 409
    research.refresh_from_db()
    assert research.status == ResearchStatus.COMPLETED


def test_cancel_records_event(api, user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.QUEUED)
    response = api.post(f"/api/research/{research.pk}/cancel")
    assert response.status_code == 200
    research.refresh_from_db()
    assert research.status == ResearchStatus.CANCELLED and research.finished_at is not None
    assert list(research.events.values_list("seq", "type")) == [(1, "research_cancelled")]


def test_start_over_the_per_user_cap_is_429(api, user, other_user, published, settings) -> None:
    # given a cap of two, and two of alice's researches under way (and one of another user's, which does not count)
    settings.MAX_ACTIVE_RESEARCH_PER_USER = 2
    for owner, status in ((user, ResearchStatus.RUNNING), (user, ResearchStatus.QUEUED), (other_user, "running")):
        Research.objects.create(owner=owner, prompt="p", title="p", status=status)
    # when she starts a third
    response = send(api, "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": 1})
    # then it is refused, and nothing is created or queued
    assert response.status_code == 429
    assert "limit is 2" in response.json()["error"]["message"]
    assert Research.objects.filter(owner=user).count() == 2
    assert published == []
    # and once one of hers has finished, she may
    Research.objects.filter(owner=user, status=ResearchStatus.QUEUED).update(status=ResearchStatus.COMPLETED)
    assert send(api, "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": 1}).status_code == 202
    assert published == ["workers.tasks.start_research_task"]


@pytest.mark.parametrize(
    ("report_length", "words"),
    [(None, 4000), ("brief", 1500), ("standard", 4000), ("long", 10000), (300, 300), (2500, 2500), (30000, 30000)],
)
def test_start_report_length_is_stored_as_report_words(api, user, published, report_length, words) -> None:
    # the prompt+questions form
    body = {**GOOD_START, "breadth": 1, "depth": 1}
    if report_length is not None:
        body["report_length"] = report_length
    response = send(api, "post", "/api/research/start", body)
    assert response.status_code == 202, response.content
    research = Research.objects.get(pk=response.json()["research_id"])
    assert research.report_words == words
    # the research_id form
    draft = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.AWAITING_ANSWERS)
    FollowUpQuestion.objects.create(research=draft, position=0, question="q")
    body = {"research_id": str(draft.pk), "answers": ["a"], "breadth": 1, "depth": 1}
    if report_length is not None:
        body["report_length"] = report_length
    response = send(api, "post", "/api/research/start", body)
    assert response.status_code == 202, response.content
    draft.refresh_from_db()
    assert (draft.status, draft.report_words) == (ResearchStatus.QUEUED, words)


@pytest.mark.parametrize(
    "report_length", ["short", "", "Brief", "4000", 299, 30001, 0, -1, 2000.0, 2000.5, True, [], {"words": 2000}]
)
def test_start_bad_report_length_is_a_400_naming_the_field(api, user, published, report_length) -> None:
    # the prompt+questions form: nothing created
    response = send(
        api, "post", "/api/research/start", {**GOOD_START, "breadth": 1, "depth": 1, "report_length": report_length}
    )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "report_length" and response.json()["error"]["message"]
    assert Research.objects.count() == 0
    # the research_id form: not started
    draft = Research.objects.create(owner=user, prompt="p", title="p", status=ResearchStatus.AWAITING_ANSWERS)
    FollowUpQuestion.objects.create(research=draft, position=0, question="q")
    body = {"research_id": str(draft.pk), "answers": ["a"], "breadth": 1, "depth": 1, "report_length": report_length}
    response = send(api, "post", "/api/research/start", body)
    assert response.status_code == 400 and response.json()["error"]["field"] == "report_length"
    draft.refresh_from_db()
    assert draft.status == ResearchStatus.AWAITING_ANSWERS and draft.report_words == 4000
    assert published == []
