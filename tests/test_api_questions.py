"""Follow-up questions: a worker writes exactly N of them, stored once with events 1 and 2; POST
/api/research/questions waits for them at most QUESTIONS_WAIT_SECONDS (201 with them, else 202 while the model is
slow), and a slow model fails nothing: the questions arrive in the snapshot and over the websocket."""

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection, connections
from django.utils import timezone

from devtools.fakes import FakeLLM
from devtools.fakes.behaviours import ResearchModel
from devtools.processes import wait_until
from devtools.servers import PLAIN_HTTP, DaphneServer, WorkerPool, process_env
from research.control import dispatch, services
from research.models import Event, FollowUpQuestion, LlmCall, Research, ResearchStatus
from research.record.usage import totals
from researchsite.asgi import application
from tests.support.e2e import WORKER_ENV, settle, wait_finished
from tests.support.logins import login, session_cookie
from tests.support.private_services import PrivateRedis
from workers.pipeline.fencing import LeaseLost
from workers.pipeline.followups import generate_followups

PROMPT = "How do heat pumps perform in cold climates?"


def post_questions(api, prompt: str = PROMPT, n: int = 3):
    return api.post(
        "/api/research/questions",
        data=json.dumps({"prompt": prompt, "num_questions": n}),
        content_type="application/json",
    )


def post_start(api, research_id: str, answers: list[str], breadth: int = 1, depth: int = 1):
    body = {"research_id": research_id, "answers": answers, "breadth": breadth, "depth": depth}
    return api.post("/api/research/start", data=json.dumps(body), content_type="application/json")


def stored_questions(research_id: Any) -> list[str]:
    rows = FollowUpQuestion.objects.filter(research_id=research_id).order_by("position")
    return list(rows.values_list("question", flat=True))


def event_types(research_id: Any) -> list[str]:
    return list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("type", flat=True))


# --- the step, driven directly (no worker: a draft of a test that is not transactional is never queued) ----------


@pytest.mark.django_db
@pytest.mark.parametrize("model_returns", ["too_many", "too_few", "exact"])
def test_followups_store_exactly_n(user, fakes, fake_llm: FakeLLM, model_returns: str) -> None:
    # given
    n = 4
    fake_llm.array_len = {"too_many": n + 2, "too_few": 1, "exact": None}[model_returns]
    research = services.create_draft(user, PROMPT, n)
    # when
    asked = generate_followups(research.pk, task_id="t1")
    # then
    assert len(asked) == n and len(set(asked)) == n
    research.refresh_from_db()
    assert research.status == ResearchStatus.AWAITING_ANSWERS
    assert research.claimed_by == "" and research.attempts == 0
    assert stored_questions(research.pk) == asked
    events = list(Event.objects.filter(research=research).order_by("seq").values_list("seq", "type"))
    assert events == [(1, "generating_followups"), (2, "followups_generated")]
    assert totals(research.pk).prompt_tokens > 0


@pytest.mark.django_db
def test_followups_send_json_schema_to_the_model(user, fakes, fake_llm: FakeLLM) -> None:
    generate_followups(services.create_draft(user, PROMPT, 2).pk)
    calls = fake_llm.calls("followup_questions")
    assert calls, "the prompt analyzer never reached the model"
    response_format = calls[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["properties"]["questions"]["maxItems"] == 2


@pytest.mark.django_db
def test_followups_fall_back_to_json_object_mode(user, fakes, fake_llm: FakeLLM) -> None:
    fake_llm.supports_json_schema = False  # (the fakes fixture has the client forget what it learned of the server)
    asked = generate_followups(services.create_draft(user, PROMPT, 2).pk)
    assert len(asked) == 2
    assert fake_llm.calls("followup_questions")[-1]["response_format"]["type"] == "json_object"


@pytest.mark.django_db
def test_followups_ride_out_transient_model_errors(user, fakes, fake_llm: FakeLLM) -> None:
    fake_llm.fail_next(1, status=429, retry_after=0.1)
    fake_llm.fail_next(1, status=500)
    fake_llm.invalid_json_next(1)
    asked = generate_followups(services.create_draft(user, PROMPT, 2).pk)
    assert len(asked) == 2
    assert fake_llm.count() >= 4


@pytest.mark.django_db
def test_followups_delivered_again_while_held_or_once_done_do_nothing(user, fakes, fake_llm: FakeLLM) -> None:
    # given a draft whose step a live delivery holds
    research = services.create_draft(user, PROMPT, 2)
    Research.objects.filter(pk=research.pk).update(claimed_by="first host:1:thread", claimed_at=timezone.now())
    # when another delivery comes: no lease, no model call
    assert generate_followups(research.pk, task_id="second") == []
    assert fake_llm.count() == 0
    # when the holder (a retry of it keeps its task id) writes them, and yet another delivery comes
    asked = generate_followups(research.pk, task_id="first")
    assert generate_followups(research.pk, task_id="third") == []
    # then they were asked for and stored once
    assert len(asked) == 2 and stored_questions(research.pk) == asked
    assert fake_llm.count("followup_questions") == 1
    assert event_types(research.pk) == ["generating_followups", "followups_generated"]


@pytest.mark.django_db(transaction=True)
def test_followups_racing_past_a_lapsed_lease_are_stored_once(user, fakes, fake_llm: FakeLLM, published) -> None:
    # given a delivery whose lease lapses during its model call, and a second delivery that takes the draft over
    # then and finishes first (the draft's own task is recorded, not sent: a worker running for other tests would
    # take the draft first)
    research = services.create_draft(user, PROMPT, 2)
    second: list[list[str]] = []

    def slow_then_overtaken(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        if not second:
            second.append([])
            try:
                Research.objects.filter(pk=research.pk).update(claimed_at=timezone.now() - timedelta(hours=1))
                second[0] = generate_followups(research.pk, task_id="second")
            finally:
                connection.close()  # this is the fake server's thread
        return fake_llm.generate("followup_questions", schema)

    fake_llm.handlers["followup_questions"] = slow_then_overtaken
    # when the first delivery's answer comes back, its store finds its lease taken over (and raises, which its task
    # takes as the end of the step)
    with pytest.raises(LeaseLost):
        generate_followups(research.pk, task_id="first")
    # then the second one's questions are the ones stored, once, and the first stored nothing
    assert len(second[0]) == 2
    assert stored_questions(research.pk) == second[0]
    assert event_types(research.pk) == ["generating_followups", "followups_generated"]


# --- the request, on real workers --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_questions_answer_201_with_the_questions_once_written(api, workers, fakes, settings) -> None:
    started = time.monotonic()
    response = post_questions(api, n=3)
    took = time.monotonic() - started
    assert response.status_code == 201, response.content
    body = response.json()
    assert len(body["questions"]) == 3
    assert stored_questions(body["research_id"]) == body["questions"]
    assert Research.objects.get(pk=body["research_id"]).status == ResearchStatus.AWAITING_ANSWERS
    assert took < settings.QUESTIONS_WAIT_SECONDS


@pytest.mark.django_db(transaction=True)
def test_questions_a_transient_failure_past_the_clients_retries_is_retried_by_the_task(
    api, workers, fakes, fake_llm: FakeLLM
) -> None:
    # given a model that fails more often than one call retries (the workers' LLM_MAX_RETRIES is 3: four attempts)
    fake_llm.fail_next(4, status=503, retry_after=0.05)
    # when
    response = post_questions(api, n=2)
    # then the task ran again and got them
    assert response.status_code == 201, response.content
    research_id = response.json()["research_id"]
    outcomes = list(LlmCall.objects.filter(research_id=research_id).order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["error"] * 4 + ["ok"]
    assert event_types(research_id) == ["generating_followups", "followups_generated"]


@pytest.mark.django_db(transaction=True)
def test_questions_model_refusing_is_502_and_research_failed(api, workers, fakes, fake_llm: FakeLLM) -> None:
    # given a model that refuses the request for good (a bad key): no retry helps
    fake_llm.fail_always(401)
    # when
    response = post_questions(api, n=2)
    # then
    assert response.status_code == 502, response.content
    assert "HTTP 401" in response.json()["error"]["message"]
    research = Research.objects.get()
    assert research.status == ResearchStatus.FAILED and "HTTP 401" in research.error
    # an ended research has its end time, as every other way of ending sets it (the sidebar and the log show it)
    assert research.finished_at is not None and research.finished_at >= research.created_at
    assert event_types(research.pk) == ["generating_followups", "research_failed"]
    assert Event.objects.get(research=research, type="research_failed").data["reason"] == "followups_failed"


async def questions_pushed(research_id: str, headers: list[tuple[bytes, bytes]]) -> tuple[list[str], dict[str, Any]]:
    """Watch the research's socket until an update carries `followups_generated`: the event types of the history
    sent on connect, and that update."""
    communicator = WebsocketCommunicator(application, f"/ws/research/{research_id}/", headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    try:
        history = await communicator.receive_json_from(timeout=10)
        while True:
            message = await communicator.receive_json_from(timeout=30)
            if any(event["type"] == "followups_generated" for event in message.get("events", [])):
                return [event["type"] for event in history["events"]], message
    finally:
        await communicator.disconnect()
        await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
def test_slow_model_answers_202_then_the_questions_arrive_and_the_research_runs(
    api, user, workers, research_model: ResearchModel, fake_llm: FakeLLM, settings
) -> None:
    # given a model slower than the request waits
    settings.QUESTIONS_WAIT_SECONDS = 1.0
    fake_llm.delays["followup_questions"] = 3.0
    # when the questions are asked for
    started = time.monotonic()
    response = post_questions(api, n=2)
    took = time.monotonic() - started
    # then the request answers once its wait is over, without them
    assert response.status_code == 202, response.content
    research_id = response.json()["research_id"]
    assert response.json() == {"research_id": research_id, "status": "generating_followups"}
    assert 1.0 <= took < 2.5, took
    snapshot = api.get(f"/api/research/{research_id}").json()
    assert (snapshot["research"]["status"], snapshot["questions"]) == ("draft", [])
    # and the research cannot start before its questions exist
    refused = post_start(api, research_id, [])
    assert refused.status_code == 409, refused.content
    assert refused.json()["error"]["field"] == "research_id"
    assert "still being written" in refused.json()["error"]["message"]
    # when the model answers, the questions are pushed to the research's socket
    headers = [(b"cookie", session_cookie(user)), (b"origin", b"http://127.0.0.1")]
    history, update = asyncio.run(questions_pushed(research_id, headers))
    assert history == ["generating_followups"]
    pushed = [item["question"] for item in update["delta"]["questions"]]
    assert len(pushed) == 2 and update["delta"]["research"]["status"] == "awaiting_answers"
    # and are in the snapshot
    snapshot = api.get(f"/api/research/{research_id}").json()
    assert [item["question"] for item in snapshot["questions"]] == pushed
    # and the research starts and completes on the workers
    assert post_start(api, research_id, ["Nordic", "Since 2015"]).status_code == 202
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error


@pytest.mark.django_db(transaction=True)
def test_duplicate_deliveries_of_the_task_store_the_questions_once(
    api, workers, fakes, fake_llm: FakeLLM, settings, redis_conn: redis.Redis
) -> None:
    # given a draft whose step is delivered three times while its model call takes a second
    settings.QUESTIONS_WAIT_SECONDS = 0
    fake_llm.delays["followup_questions"] = 1.0
    response = post_questions(api, n=3)
    assert response.status_code == 202, response.content
    research_id = response.json()["research_id"]
    for _ in range(2):
        dispatch.FOLLOWUPS.now(research_id)
    # when every delivery has run
    wait_until(lambda: len(stored_questions(research_id)) == 3, timeout=30, message="the questions")
    settle(redis_conn)
    # then the model was asked once, and the questions stored once
    assert fake_llm.count("followup_questions") == 1
    assert len(stored_questions(research_id)) == 3
    assert event_types(research_id) == ["generating_followups", "followups_generated"]
    assert Research.objects.get(pk=research_id).status == ResearchStatus.AWAITING_ANSWERS


# --- a 75 s model against the default wait, on a web process and a worker of their own ---------------------------

SLOW_ANSWER = 75.0


@pytest.fixture
def slow_model_stack(internet, transactional_db, research_model) -> Iterator[tuple[DaphneServer, str]]:
    """daphne and a worker on a private Redis, the worker's per-attempt timeout (LLM_TIMEOUT) above the model's
    answer time, as a deployment for a slow model sets it; the wait is the default."""
    private = PrivateRedis().start()
    env = process_env({**WORKER_ENV, **internet, "REDIS_URL": private.url, "LLM_TIMEOUT": "120"})
    env.pop("QUESTIONS_WAIT_SECONDS", None)
    daphne = DaphneServer({**env, **PLAIN_HTTP, "DEBUG": "false"}, name="daphne-slow-model").start()
    pool = WorkerPool(env, count=1, concurrency=4, name="slowmodel").start()
    yield daphne, private.url
    settle(redis.Redis.from_url(private.url))
    pool.stop()
    daphne.stop()
    private.stop()


@pytest.mark.slow
def test_a_75_s_model_answers_within_the_wait_then_the_questions_arrive_and_the_research_runs(
    slow_model_stack, user, fake_llm: FakeLLM
) -> None:
    # given a model that takes 75 s to answer, and the default 20 s wait
    daphne, _ = slow_model_stack
    fake_llm.delays["followup_questions"] = SLOW_ANSWER
    session = login(daphne.url, "alice")
    headers = {"X-CSRFToken": session.cookies["csrftoken"], "Referer": daphne.url + "/"}
    # and another tab of alice's listing her research every second meanwhile, on the same web process
    other = login(daphne.url, "alice")
    listings: list[tuple[int, float]] = []
    asking = threading.Event()

    def list_while_asking() -> None:
        time.sleep(1)
        while asking.is_set():
            began = time.monotonic()
            status = other.get(f"{daphne.url}/api/research", timeout=10).status_code
            listings.append((status, time.monotonic() - began))
            time.sleep(1)

    # when the questions are asked for
    asking.set()
    lister = threading.Thread(target=list_while_asking, daemon=True)
    lister.start()
    started = time.monotonic()
    response = session.post(
        f"{daphne.url}/api/research/questions", json={"prompt": PROMPT, "num_questions": 2}, headers=headers, timeout=60
    )
    took = time.monotonic() - started
    asking.clear()
    lister.join(15)
    # then it answers 202 once the default wait is over, and the other requests never waited for it
    assert response.status_code == 202, response.text
    assert 19.0 <= took < 25.0, took
    assert len(listings) >= 10 and all(status == 200 and seconds < 2.0 for status, seconds in listings), listings
    research_id = response.json()["research_id"]
    refused = session.post(
        f"{daphne.url}/api/research/start",
        json={"research_id": research_id, "answers": [], "breadth": 1, "depth": 1},
        headers=headers,
        timeout=10,
    )
    assert refused.status_code == 409, refused.text

    # and the questions arrive once the model answers
    def questions() -> list[dict[str, Any]]:
        return session.get(f"{daphne.url}/api/research/{research_id}", timeout=10).json()["questions"]

    wait_until(lambda: len(questions()) == 2, timeout=SLOW_ANSWER, message="the slow model's questions", interval=0.5)
    assert time.monotonic() - started >= SLOW_ANSWER - 1
    # and the research runs to its report
    begun = session.post(
        f"{daphne.url}/api/research/start",
        json={"research_id": research_id, "answers": ["Nordic", "Since 2015"], "breadth": 1, "depth": 1},
        headers=headers,
        timeout=10,
    )
    assert begun.status_code == 202, begun.text
    research = wait_finished(research_id, timeout=120)
    assert research.status == ResearchStatus.COMPLETED, research.error
    # one request to the model for the questions, answered: the worker waited for it, no attempt timed out
    calls = LlmCall.objects.filter(research=research, agent="prompt_analyzer")
    assert list(calls.values_list("outcome", flat=True)) == ["ok"]
