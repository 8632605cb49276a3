"""Personal API tokens: made once from a session (the secret shown once, a digest kept), listed without secrets,
used with `Authorization: Bearer` on the JSON API as their owner and nobody else, refused at once when revoked,
read-only ones refused anything but reading, and never an error page whatever the header holds."""

import hashlib
import json
from datetime import timedelta

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research.control import tokens
from research.models import ApiToken, Research, ResearchStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def research(user) -> Research:
    return Research.objects.create(owner=user, prompt="p", title="mine", status=ResearchStatus.COMPLETED)


def make_token(api: Client, name: str = "laptop", read_only: bool = False) -> dict:
    response = api.post("/api/tokens", data={"name": name, "read_only": read_only}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def bearer(secret: str) -> Client:
    # CSRF enforced as for a browser: a token request must not need it.
    return Client(enforce_csrf_checks=True, headers={"Authorization": f"Bearer {secret}"})


def test_a_token_is_shown_once_and_only_its_digest_is_kept(api, user) -> None:
    made = make_token(api, "laptop CLI")
    secret = made["token"]
    assert secret.startswith(tokens.TOKEN_PREFIX) and len(secret) > 40
    stored = ApiToken.objects.get(pk=made["id"])
    assert stored.owner == user and stored.name == "laptop CLI" and not stored.read_only
    assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in {stored.digest, stored.prefix} and secret.startswith(stored.prefix)
    listed = api.get("/api/tokens").json()["tokens"]
    assert [t["name"] for t in listed] == ["laptop CLI"]
    assert secret not in json.dumps(listed) and stored.digest not in json.dumps(listed)
    assert listed[0]["last_used_at"] is None


def test_a_token_acts_as_its_owner_without_csrf_and_sees_only_their_research(api, research, other_user) -> None:
    theirs = Research.objects.create(owner=other_user, prompt="q", title="theirs", status=ResearchStatus.COMPLETED)
    client = bearer(make_token(api)["token"])
    assert [r["id"] for r in client.get("/api/research").json()["researches"]] == [str(research.pk)]
    assert client.get(f"/api/research/{research.pk}").status_code == 200
    assert client.get(f"/api/research/{theirs.pk}").status_code == 404
    renamed = client.patch(f"/api/research/{research.pk}", data={"title": "renamed"}, content_type="application/json")
    assert renamed.status_code == 200
    research.refresh_from_db()
    assert research.title == "renamed"
    assert client.delete(f"/api/research/{theirs.pk}").status_code == 404
    assert Research.objects.filter(pk=theirs.pk).exists()


def test_a_revoked_token_is_refused_at_once(api, research) -> None:
    made = make_token(api)
    client = bearer(made["token"])
    assert client.get("/api/research").status_code == 200
    assert api.delete(f"/api/tokens/{made['id']}").status_code == 204
    response = client.get("/api/research")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert api.delete(f"/api/tokens/{made['id']}").status_code == 404  # gone


def test_a_read_only_token_reads_and_cannot_start_or_change_anything(api, research) -> None:
    client = bearer(make_token(api, read_only=True)["token"])
    assert client.get(f"/api/research/{research.pk}").status_code == 200
    assert client.get(f"/api/research/{research.pk}/events").status_code == 200
    attempts = [
        client.post(
            "/api/research/questions", data={"prompt": "x", "num_questions": 1}, content_type="application/json"
        ),
        client.post("/api/research/start", data={"research_id": str(research.pk)}, content_type="application/json"),
        client.post(f"/api/research/{research.pk}/deepen", data={"query": "q"}, content_type="application/json"),
        client.post(f"/api/research/{research.pk}/ask", data={"question": "q?"}, content_type="application/json"),
        client.patch(f"/api/research/{research.pk}", data={"title": "t"}, content_type="application/json"),
        client.delete(f"/api/research/{research.pk}"),
    ]
    assert [response.status_code for response in attempts] == [403] * len(attempts)
    assert "read-only" in attempts[0].json()["error"]["message"]
    research.refresh_from_db()
    assert research.title == "mine" and Research.objects.count() == 1


def test_tokens_are_managed_from_a_session_only(api) -> None:
    client = bearer(make_token(api)["token"])
    assert client.get("/api/tokens").status_code == 403
    assert client.post("/api/tokens", data={"name": "x"}, content_type="application/json").status_code == 403
    assert ApiToken.objects.count() == 1


def test_an_unknown_or_malformed_token_is_refused_even_beside_a_session(api, user) -> None:
    api.get("/api/research")  # the session works
    for header in ["Bearer nope", "Bearer drt_" + "x" * 43, "bearer ", "Bearer " + "drt_" * 100]:
        response = api.get("/api/research", headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.json()["error"]["message"] == "invalid or revoked token"


def test_a_token_of_an_inactive_user_is_refused(api, user) -> None:
    client = bearer(make_token(api)["token"])
    user.is_active = False
    user.save()
    assert client.get("/api/research").status_code == 401


def test_a_session_still_needs_its_csrf_token(user) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/api/tokens", data={"name": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert not ApiToken.objects.exists()


def test_last_use_is_written_at_most_once_a_minute(api) -> None:
    made = make_token(api)
    client = bearer(made["token"])
    client.get("/api/research")
    first = ApiToken.objects.get(pk=made["id"]).last_used_at
    assert first is not None
    client.get("/api/research")
    assert ApiToken.objects.get(pk=made["id"]).last_used_at == first
    ApiToken.objects.filter(pk=made["id"]).update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/research")
    assert ApiToken.objects.get(pk=made["id"]).last_used_at > first - timedelta(seconds=1)
    assert api.get("/api/tokens").json()["tokens"][0]["last_used_at"]


def test_token_input_is_checked(api, user, other_user) -> None:
    def post(body):
        return api.post("/api/tokens", data=body, content_type="application/json")

    assert post({}).status_code == 400
    assert post({"name": " "}).status_code == 400
    assert post({"name": "x" * 101}).status_code == 400
    assert post({"name": "x", "read_only": "yes"}).json()["error"]["field"] == "read_only"
    assert post({"name": "x", "scope": "all"}).json()["error"]["field"] == "scope"
    theirs, _ = tokens.create(other_user, "theirs", False)
    assert api.delete(f"/api/tokens/{theirs.pk}").status_code == 404
    assert api.delete(f"/api/tokens/{2**70}").status_code == 404
    assert ApiToken.objects.filter(pk=theirs.pk).exists()
    for n in range(tokens.MAX_TOKENS_PER_USER):
        tokens.create(user, f"t{n}", False)
    assert post({"name": "one too many"}).status_code == 409


def test_the_tokens_page_makes_lists_and_revokes(api, user, other_user) -> None:
    page = api.get("/tokens/")
    assert page.status_code == 200 and b"You have no tokens." in page.content
    made = api.post("/tokens/", {"name": "ci", "read_only": "on"})
    assert made.status_code == 201 and made["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(owner=user)
    secret = made.content.decode().split('id="token-secret" class="token-secret" value="')[1].split('"')[0]
    assert tokens.authenticate(secret) == token and token.read_only
    again = api.get("/tokens/").content.decode()
    assert "ci" in again and secret not in again and token.prefix in again
    assert api.post("/tokens/", {"name": ""}).status_code == 400
    theirs, _ = tokens.create(other_user, "theirs", False)
    assert api.post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    assert api.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    assert ApiToken.objects.filter(pk=theirs.pk).exists()
    assert Client().get("/tokens/").status_code == 302  # sign in first


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.text(max_size=300))
def test_any_authorization_header_gets_a_clear_answer(api, header) -> None:
    header = "".join(c for c in header if c.isprintable() and c not in "\r\n")
    response = Client().get("/api/research", headers={"Authorization": header})
    assert response.status_code == 401
    # beside a session, the session answers only where no Bearer token is given
    answered = api.get("/api/research", headers={"Authorization": header})
    bearer_given = header.partition(" ")[0].lower() == "bearer"
    assert answered.status_code == (401 if bearer_given else 200)
