"""The service from outside, on the real stack (daphne, the Celery workers, PostgreSQL, Redis and the loopback
fakes): a token made on the API tokens page starts, follows and reads a research through the command line client;
a read-only token cannot start one; another user's token finds nothing; a revoked token is refused at once."""

from __future__ import annotations

import io
import re

import pytest
import requests

from deepresearch_client import cli
from research.models import AskedQuestion, Document, DocumentKind, Research, ResearchStatus
from tests.support.logins import login

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "How do heat pumps perform in cold climates?"


def token_from_the_page(session: requests.Session, base: str, read_only: bool = False) -> str:
    """Makes a token with the page's form, as a signed-in user would, and reads it off the answer."""
    form = {"name": "laptop CLI", "csrfmiddlewaretoken": session.cookies["csrftoken"]}
    if read_only:
        form["read_only"] = "on"
    made = session.post(f"{base}/tokens/", data=form, headers={"Referer": f"{base}/tokens/"}, timeout=10)
    assert made.status_code == 201, made.text[:500]
    found = re.search(r'id="token-secret" class="token-secret" value="([^"]+)"', made.text)
    assert found, made.text[:500]
    return found.group(1)


def run(base: str, token: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--url", base, "--token", token, *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_token_made_on_the_page_drives_a_research_through_the_client(
    daphne, workers, research_model, user, other_user
) -> None:
    base = daphne.url
    alice = login(base, "alice")
    token = token_from_the_page(alice, base)
    # when alice starts a research with the client and watches it to its end
    code, out, err = run(base, token, "start", PROMPT, "--breadth", "2", "--depth", "1", "--watch")
    # then it is hers, it completed, and the progress bar ended full on its outcome
    assert code == 0, err
    research_id = out.strip()
    research = Research.objects.get(pk=research_id)
    assert research.owner == user and research.status == ResearchStatus.COMPLETED
    bars = err.splitlines()
    assert bars and bars[-1].startswith("[" + "#" * cli.BAR_WIDTH + "]") and bars[-1].endswith("complete"), err
    # and the report it prints is the stored one
    code, out, err = run(base, token, "report", research_id)
    stored = Document.objects.get(research=research, kind=DocumentKind.REPORT, version=research.report_version)
    assert code == 0 and out == stored.markdown and "](http" in out, err
    # and a question is answered from its sources
    code, out, err = run(base, token, "ask", research_id, "Which climates were studied?")
    answered = AskedQuestion.objects.get(research=research)
    assert code in (0, 3) and answered.status == "answered" and out.strip() == answered.answer.strip(), err
    # and it is listed
    code, out, _ = run(base, token, "list")
    assert code == 0 and research_id in out
    # when alice uses a read-only token: she reads, and cannot start work
    read_only = token_from_the_page(alice, base, read_only=True)
    assert run(base, read_only, "report", research_id)[0] == 0
    code, _, err = run(base, read_only, "start", PROMPT)
    assert code == 1 and "403" in err and "read-only" in err
    # when mallory uses her own token on alice's research: nothing is there
    mallory = token_from_the_page(login(base, "mallory"), base)
    for args in (["report", research_id], ["watch", research_id], ["ask", research_id, "Why?"]):
        code, _, err = run(base, mallory, *args)
        assert code == 1 and "404" in err, (args, err)
    assert run(base, mallory, "list")[1] == ""
    # when alice revokes her token on the page, it is refused at once
    listed = alice.get(f"{base}/api/tokens", timeout=10).json()["tokens"]
    first = next(t for t in listed if token.startswith(t["prefix"]) and not t["read_only"])
    assert first["last_used_at"]
    revoked = alice.post(
        f"{base}/tokens/{first['id']}/revoke/",
        data={"csrfmiddlewaretoken": alice.cookies["csrftoken"]},
        headers={"Referer": f"{base}/tokens/"},
        timeout=10,
    )
    assert revoked.status_code == 200  # the page again, after its redirect
    code, _, err = run(base, token, "list")
    assert code == 1 and "401" in err
    assert Research.objects.filter(owner=user).count() == 1


def test_the_client_needs_nothing_of_the_app() -> None:
    # It is copied to other machines on its own: the standard library and requests, nothing else.
    import ast
    import sys
    from pathlib import Path

    folder = Path(cli.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names | {"requests", "deepresearch_client", "__future__"}, (path, name)
