"""Every admin changelist and change page loads for a superuser."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.utils.timezone import now

from research.models import CollectionDocument, Event, Page, Research
from tests.support.factories import build_tree

pytestmark = pytest.mark.django_db


def test_every_admin_page_loads(client, django_user_model) -> None:
    # given a superuser and a tree with a row in every model
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    research = build_tree(superuser, breadth=2, depth=2, websites_per_query=2)
    Event.objects.create(research=research, seq=1, type="research_started", data={})
    Group.objects.create(name="operators")
    CollectionDocument.objects.create(
        path="/docs/a.md", title="A", content_type="text/markdown", text="A text.", sha256="0" * 64, indexed_at=now()
    )
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
