"""Every admin changelist and change page loads for a superuser."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.utils.timezone import now

from research.control import tokens
from research.models import (
    AskedQuestion,
    CollectionDocument,
    Event,
    LlmCall,
    MemoryItem,
    ModelCheck,
    Page,
    Research,
    Schedule,
    ShareLink,
    UnreadableFile,
    Website,
)
from tests.support.factories import build_tree, spend

pytestmark = pytest.mark.django_db


def test_every_admin_page_loads(client, django_user_model) -> None:
    # given a superuser and a tree with a row in every model
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    research = build_tree(superuser, breadth=2, depth=2, websites_per_query=2)
    Event.objects.create(research=research, seq=1, type="research_started", data={})
    MemoryItem.objects.create(research=research, kind="insight", text="Insight.", key="insight", website_ids=[1])
    Group.objects.create(name="operators")
    AskedQuestion.objects.create(research=research, position=1, question="Why?", status="failed", error="model down")
    call(research, tokens=100, usd="0.01")
    CollectionDocument.objects.create(
        path="/docs/a.md", title="A", content_type="text/markdown", text="A text.", sha256="0" * 64, indexed_at=now()
    )
    UnreadableFile.objects.create(path="/docs/b.docx", reason="not a readable DOCX file: x", size=3, checked_at=now())
    ModelCheck.objects.create(
        base_url="http://127.0.0.1:11434/v1", model_names="m", verdict="works", report={}, output="Verdict: works"
    )
    tokens.create(superuser, "laptop", read_only=True)
    ShareLink.objects.create(research=research, version=1, key="k" * 32)
    Schedule.objects.create(research=research, every="daily", secret="whsec_x", next_run_at=now())
    client.force_login(superuser)
    checked = 0
    for model in admin.site._registry:
        opts = model._meta
        # when
        changelist = client.get(f"/admin/{opts.app_label}/{opts.model_name}/")
        # then
        assert changelist.status_code == 200, opts.label
        obj = model.objects.first()
        assert obj is not None, f"no {opts.label} row to open"
        change = client.get(f"/admin/{opts.app_label}/{opts.model_name}/{obj.pk}/change/")
        assert change.status_code == 200, opts.label
        checked += 1
    assert checked >= 9
    search = client.get("/admin/research/research/", {"q": "Fusion", "status__exact": "completed"})
    assert search.status_code == 200 and research.title in search.content.decode()
    assert Page.objects.exists() and Research.objects.exists()


def call(research: Research, tokens: int, usd: str | None, hours_ago: float = 0) -> LlmCall:
    row = LlmCall.objects.create(
        research=research,
        user=research.owner,
        agent="website_analyzer",
        model="gpt-4o-mini" if usd is not None else "unpriced-model",
        prompt_tokens=tokens,
        completion_tokens=0,
        cost_usd=Decimal(usd) if usd is not None else None,
        outcome="ok",
    )
    if hours_ago:
        LlmCall.objects.filter(pk=row.pk).update(created_at=now() - timedelta(hours=hours_ago))
    return row


def test_admin_shows_cost_per_research_and_unknown_when_unpriced(client, django_user_model) -> None:
    # given a priced research and one with an unpriced call
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    priced = Research.objects.create(owner=superuser, prompt="p", title="Priced one")
    spend(priced, 600, 200, "1.00")
    spend(priced, 400, 34, "0.25")
    unpriced = Research.objects.create(owner=superuser, prompt="p", title="Unpriced one")
    spend(unpriced, 5, cost_usd="0.5")
    spend(unpriced, 2)
    client.force_login(superuser)
    # when
    page = client.get("/admin/research/research/").content.decode()
    # then
    assert "$1.2500" in page and "1234" in page
    assert "unknown" in page and "$0.5000" not in page


def test_llm_calls_are_read_only_and_filterable(client, django_user_model) -> None:
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    research = Research.objects.create(owner=superuser, prompt="p", title="t")
    row = call(research, tokens=100, usd="0.02")
    call(research, tokens=50, usd=None)
    client.force_login(superuser)
    listing = client.get("/admin/research/llmcall/", {"agent": "website_analyzer"}).content.decode()
    assert "$0.0200" in listing and "unknown" in listing
    assert client.get("/admin/research/llmcall/add/").status_code == 403
    change = client.post(f"/admin/research/llmcall/{row.pk}/change/", {"prompt_tokens": 1})
    assert change.status_code in (200, 403)
    row.refresh_from_db()
    assert row.prompt_tokens == 100
    assert client.post(f"/admin/research/llmcall/{row.pk}/delete/", {"post": "yes"}).status_code in (302, 403)


def test_user_admin_shows_spending_over_the_day_and_in_all(client, django_user_model) -> None:
    # given alice's calls: one within the day, one two days ago
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    alice = django_user_model.objects.create_user("alice", "alice@example.com", "pw-long-enough-42")
    research = Research.objects.create(owner=alice, prompt="p", title="t")
    call(research, tokens=300, usd="0.10", hours_ago=1)
    call(research, tokens=4000, usd="2.00", hours_ago=48)
    client.force_login(superuser)
    # when
    response = client.get("/admin/auth/user/", {"o": "-6"})
    # then alice's row has 300 tokens and $0.10 for the day, 4300 and $2.10 in all
    assert response.status_code == 200
    rows = {user.username: user for user in response.context["cl"].result_list}
    assert (rows["alice"].spent_tokens_day, rows["alice"].spent_usd_day) == (300, Decimal("0.10"))
    assert (rows["alice"].spent_tokens, rows["alice"].spent_usd) == (4300, Decimal("2.10"))
    assert (rows["root"].spent_tokens, rows["root"].spent_usd) == (0, 0)
    page = response.content.decode()
    assert "$0.1000" in page and "$2.1000" in page and "Tokens (24 h)" in page


def test_memory_items_are_listed_by_research_kind_and_state_and_read_only(client, django_user_model) -> None:
    # given a research with an insight, an open gap and a closed one, on an analysed website
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    research = build_tree(superuser, breadth=1, depth=1, websites_per_query=1)
    website = Website.objects.get(research=research)
    insight = MemoryItem.objects.create(
        research=research,
        kind="insight",
        text="Tokamaks lose heat.",
        key="tokamaks lose heat",
        website_ids=[website.pk],
    )
    MemoryItem.objects.create(research=research, kind="gap", text="Open gap on tritium.", key="open gap on tritium")
    MemoryItem.objects.create(research=research, kind="gap", text="Closed gap.", key="closed gap", closed=True)
    client.force_login(superuser)
    # when
    listing = client.get("/admin/research/memoryitem/", {"kind__exact": "gap", "closed__exact": "0"}).content.decode()
    page = client.get(f"/admin/research/research/{research.pk}/change/").content.decode()
    # then
    assert "Open gap on tritium." in listing and "Closed gap." not in listing and "Tokamaks" not in listing
    assert "Tokamaks lose heat." in page and "Open gap on tritium." in page
    assert client.get("/admin/research/memoryitem/add/").status_code == 403
    client.post(f"/admin/research/memoryitem/{insight.pk}/change/", {"text": "changed"})
    insight.refresh_from_db()
    assert insight.text == "Tokamaks lose heat."


def test_admin_lists_and_edits_report_words(client, django_user_model) -> None:
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    research = Research.objects.create(owner=superuser, prompt="p", title="Long one", report_words=12345)
    client.force_login(superuser)
    listing = client.get("/admin/research/research/").content.decode()
    assert "Report words" in listing and "12345" in listing
    change = client.get(f"/admin/research/research/{research.pk}/change/").content.decode()
    assert 'name="report_words"' in change and 'value="12345"' in change
