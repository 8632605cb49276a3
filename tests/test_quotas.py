"""Per-user limits on spending: daily quotas over the recorded model calls, the request rate of the endpoints that
spend, and the sign-in throttle. Spending is simulated by LlmCall rows written directly; times are moved by
rewriting rows' timestamps, never by waiting."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone

from research.control import quotas
from research.models import LlmCall, RateHit, Research
from tests.support.logins import PASSWORD

pytestmark = pytest.mark.django_db

HOUR = 3600
DAY = 24 * HOUR


def spend(user, hours_ago: float, tokens: int = 0, usd: str | None = None) -> LlmCall:
    """A model call of `user`'s, made `hours_ago` hours ago."""
    research = Research.objects.create(owner=user, prompt="p", title="p")
    call = LlmCall.objects.create(
        research=research,
        user=user,
        agent="report_writer",
        model="gpt-4o-mini",
        prompt_tokens=tokens // 2,
        completion_tokens=tokens - tokens // 2,
        cost_usd=Decimal(usd) if usd is not None else None,
        outcome="ok",
    )
    LlmCall.objects.filter(pk=call.pk).update(created_at=timezone.now() - timedelta(hours=hours_ago))
    return call


def post(client: Client, path: str, body: dict):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def post_questions(client: Client):
    return post(client, "/api/research/questions", {"prompt": "Heat pumps in cold climates?", "num_questions": 2})


def post_start(client: Client):
    body = {"prompt": "Heat pumps in cold climates?", "questions": [{"question": "Where?", "answer": "Norway"}]}
    return post(client, "/api/research/start", {**body, "breadth": 1, "depth": 1})


def assert_throttled(response, low: float, high: float) -> int:
    """A 429 with a Retry-After header within [low, high] seconds, the same number in the JSON error."""
    assert response.status_code == 429, response.content
    retry_after = int(response["Retry-After"])
    assert low <= retry_after <= high, retry_after
    error = response.json()["error"]
    assert error["retry_after"] == retry_after and error["field"] is None and error["message"]
    return retry_after


@override_settings(USER_DAILY_TOKEN_QUOTA=1000)
def test_token_quota_refuses_questions_and_start_until_the_oldest_calls_age_out(api, user, published) -> None:
    # given 1200 tokens spent in the last 24 hours against a quota of 1000: the oldest call (3 h ago) must age out
    spend(user, hours_ago=3, tokens=600)
    spend(user, hours_ago=1, tokens=600)
    drafts = Research.objects.count()
    # when
    questions = post_questions(api)
    start = post_start(api)
    # then both are refused, with the time until the call of 3 h ago leaves the day (21 h)
    for response in (questions, start):
        assert_throttled(response, 21 * HOUR - 60, 21 * HOUR + 1)
        assert "daily quota" in response.json()["error"]["message"]
        assert "1200 of your daily 1000 tokens" in response.json()["error"]["message"]
    assert Research.objects.count() == drafts  # no draft, no research: refused before any work
    assert published == []


@override_settings(USER_DAILY_USD_QUOTA=0.60)
def test_dollar_quota_waits_for_as_many_old_calls_as_it_takes(api, user, published) -> None:
    # given $1.10 spent against $0.60: the calls of 3 h and 2 h ago ($0.60) must both age out, the first is not enough
    spend(user, hours_ago=3, usd="0.30")
    spend(user, hours_ago=2, usd="0.30")
    spend(user, hours_ago=1, usd="0.50")
    spend(user, hours_ago=0.5, tokens=10_000)  # unpriced: counts no dollars
    # when / then
    assert_throttled(post_start(api), 22 * HOUR - 60, 22 * HOUR + 1)
    assert_throttled(post_questions(api), 22 * HOUR - 60, 22 * HOUR + 1)


@override_settings(USER_DAILY_TOKEN_QUOTA=1000)
def test_exactly_at_the_quota_is_refused(api, user, published) -> None:
    spend(user, hours_ago=5, tokens=1000)
    assert_throttled(post_start(api), 19 * HOUR - 60, 19 * HOUR + 1)


@override_settings(USER_DAILY_TOKEN_QUOTA=1000, USER_DAILY_USD_QUOTA=1.0)
def test_spending_older_than_a_day_does_not_count(api, user, published) -> None:
    # given far more than the quotas spent, but all of it 25 hours ago, and a little within the day
    spend(user, hours_ago=25, tokens=1_000_000, usd="50")
    spend(user, hours_ago=1, tokens=999, usd="0.99")
    # when
    response = post_start(api)
    # then
    assert response.status_code == 202, response.content
    assert quotas.quota_wait(user.pk) is None


@override_settings(USER_DAILY_TOKEN_QUOTA=1000, USER_DAILY_USD_QUOTA=1.0)
def test_both_quotas_wait_for_the_later_of_the_two(user) -> None:
    # tokens are back under the quota when the call of 20 h ago ages out (4 h), dollars when the one of 2 h ago does
    spend(user, hours_ago=20, tokens=2000, usd="0.10")
    spend(user, hours_ago=2, usd="1.10")
    reason, wait = quotas.quota_wait(user.pk)
    assert "tokens" in reason and "$1.20 of your daily $1.00" in reason
    assert 22 * HOUR - 60 <= wait <= 22 * HOUR


@override_settings(USER_DAILY_TOKEN_QUOTA=1000)
def test_quotas_are_per_user(api, stranger, user, other_user, published) -> None:
    # given mallory over her quota, alice under hers
    spend(other_user, hours_ago=1, tokens=5000)
    spend(user, hours_ago=1, tokens=10)
    # when / then
    assert post_start(api).status_code == 202
    assert_throttled(post_start(stranger), 23 * HOUR - 60, 23 * HOUR + 1)


def test_no_quota_by_default(api, user, published) -> None:
    spend(user, hours_ago=1, tokens=10**8, usd="10000")
    assert post_start(api).status_code == 202


@override_settings(SPEND_RATE_LIMIT=3)
def test_spend_rate_limit_is_429_with_retry_after_and_per_user(api, stranger, published) -> None:
    # given three requests to the endpoints that spend within the minute (invalid ones count: they reach the view)
    assert post(api, "/api/research/questions", {"prompt": ""}).status_code == 400
    assert post(api, "/api/research/start", {"breadth": 1}).status_code == 400
    assert post(api, "/api/research/questions", {"prompt": ""}).status_code == 400
    # when the fourth comes
    response = post_start(api)
    # then it is refused until the first leaves the minute; nothing was created
    assert_throttled(response, 1, 60)
    assert "too many requests" in response.json()["error"]["message"]
    assert not Research.objects.exists()
    # and another user is not affected
    assert post_start(stranger).status_code == 202
    # when the counted requests are more than a minute old, the user may spend again
    RateHit.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    assert post_start(api).status_code == 202


@override_settings(SPEND_RATE_LIMIT=2)
def test_refused_requests_are_not_counted(api, published) -> None:
    # given the limit reached, and the user retrying after being refused
    for _ in range(2):
        assert post(api, "/api/research/start", {"breadth": 1}).status_code == 400
    for _ in range(3):
        assert post_start(api).status_code == 429
    # then only the two admitted requests were counted
    assert RateHit.objects.filter(key__startswith="spend:").count() == 2


@override_settings(SPEND_RATE_LIMIT=2)
def test_other_endpoints_are_not_rate_limited(api, published) -> None:
    for _ in range(2):
        assert post(api, "/api/research/start", {"breadth": 1}).status_code == 400
    for _ in range(5):
        assert api.get("/api/research").status_code == 200


@override_settings(SPEND_RATE_LIMIT=0)
def test_rate_limit_zero_is_off(api, published) -> None:
    for _ in range(5):
        assert post(api, "/api/research/start", {"breadth": 1}).status_code == 400
    assert not RateHit.objects.exists()


def test_stale_rows_are_purged(user) -> None:
    # given rows of other keys past their window
    past = timezone.now() - timedelta(hours=2)
    RateHit.objects.bulk_create(
        RateHit(key=f"login-ip:10.0.0.{i}", created_at=past, expires_at=past + timedelta(minutes=15)) for i in range(5)
    )
    # when a hit is counted
    assert quotas.admit("spend:test", 5, 60) == 0
    # then they are gone, the new one kept
    assert list(RateHit.objects.values_list("key", flat=True)) == ["spend:test"]


# --- Sign-in throttle --------------------------------------------------------------------------------------------


def sign_in(client: Client, username: str, password: str, ip: str = "10.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@override_settings(LOGIN_RATE_LIMIT=3, LOGIN_RATE_WINDOW=900)
def test_failed_logins_throttle_even_the_right_password(user, monkeypatch: pytest.MonkeyPatch) -> None:
    client = Client()
    # given three failed attempts
    for _ in range(3):
        response = sign_in(client, "alice", "wrong-password")
        assert response.status_code == 200 and not signed_in(client)
    # when the right password comes next: the password is not even checked
    checked = []
    from django.contrib.auth import forms

    real = forms.authenticate
    monkeypatch.setattr(forms, "authenticate", lambda *a, **k: checked.append(1) or real(*a, **k))
    response = sign_in(client, "alice", PASSWORD)
    # then
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 900
    assert "Too many failed sign-ins" in response.content.decode()
    assert not signed_in(client) and checked == []


@override_settings(LOGIN_RATE_LIMIT=3, LOGIN_RATE_WINDOW=900)
def test_login_throttle_counts_per_username_and_per_address(user, other_user) -> None:
    # given three failures for alice from 10.0.0.1
    for _ in range(3):
        sign_in(Client(), "alice", "wrong-password", ip="10.0.0.1")
    # then alice is refused from anywhere, and anyone is refused from 10.0.0.1
    assert sign_in(Client(), "alice", PASSWORD, ip="10.0.0.9").status_code == 429
    assert sign_in(Client(), "mallory", PASSWORD, ip="10.0.0.1").status_code == 429
    # and another user from another address signs in
    client = Client()
    response = sign_in(client, "mallory", PASSWORD, ip="10.0.0.2")
    assert response.status_code == 302 and signed_in(client)


@override_settings(LOGIN_RATE_LIMIT=3, LOGIN_RATE_WINDOW=900)
def test_usernames_count_together_whatever_their_case(user) -> None:
    for number, name in enumerate(("alice", "Alice", "ALICE")):
        sign_in(Client(), name, "wrong-password", ip=f"10.0.1.{number}")
    assert sign_in(Client(), "alice", PASSWORD, ip="10.0.0.9").status_code == 429


@override_settings(LOGIN_RATE_LIMIT=3, LOGIN_RATE_WINDOW=900)
def test_login_under_the_limit_succeeds_and_clears_the_usernames_failures(user) -> None:
    # given two failures
    for _ in range(2):
        sign_in(Client(), "alice", "wrong-password")
    # when the right password comes
    client = Client()
    response = sign_in(client, "alice", PASSWORD)
    # then she is signed in, and her username starts afresh (the address keeps its count)
    assert response.status_code == 302 and signed_in(client)
    assert not RateHit.objects.filter(key__startswith="login-user:").exists()
    assert RateHit.objects.filter(key="login-ip:10.0.0.1").count() == 2


@override_settings(LOGIN_RATE_LIMIT=3, LOGIN_RATE_WINDOW=900)
def test_login_retry_after_is_when_the_oldest_failure_leaves_the_window(user) -> None:
    # given three failures, the oldest moved 10 minutes back
    for _ in range(3):
        sign_in(Client(), "alice", "wrong-password")
    oldest = RateHit.objects.filter(key="login-ip:10.0.0.1").order_by("created_at").first()
    RateHit.objects.filter(created_at=oldest.created_at).update(created_at=oldest.created_at - timedelta(minutes=10))
    # when / then: five minutes (of the window's fifteen) remain
    response = sign_in(Client(), "alice", PASSWORD)
    assert response.status_code == 429
    assert 290 <= int(response["Retry-After"]) <= 301
    # when every failure is older than the window, sign-in works again
    RateHit.objects.update(created_at=timezone.now() - timedelta(seconds=901))
    client = Client()
    assert sign_in(client, "alice", PASSWORD).status_code == 302 and signed_in(client)


@override_settings(LOGIN_RATE_LIMIT=3, LOGIN_RATE_WINDOW=900)
def test_successful_logins_never_count(user) -> None:
    for _ in range(6):
        client = Client()
        assert sign_in(client, "alice", PASSWORD).status_code == 302 and signed_in(client)
    assert not RateHit.objects.exists()


def test_the_login_page_itself_is_not_throttled(user) -> None:
    with override_settings(LOGIN_RATE_LIMIT=1):
        sign_in(Client(), "alice", "wrong-password")
        assert Client().get("/accounts/login/", REMOTE_ADDR="10.0.0.1").status_code == 200
        assert sign_in(Client(), "alice", PASSWORD).status_code == 429
