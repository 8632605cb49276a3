"""Embedded mode (no PostgreSQL, no Redis): SQLite in WAL mode, the filesystem broker and the channels-lite
layer, across separate worker, beat and daphne processes — the same tasks and events as the real stack."""

import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from devtools.processes import ROOT
from devtools.servers import PLAIN_HTTP, DaphneServer, WorkerPool
from tests.support.e2e import WORKER_ENV
from tests.support.logins import PASSWORD, login, research_socket
from tests.support.private_services import Beat

pytestmark = pytest.mark.slow


def embedded_env(folder: Path, internet: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update({**WORKER_ENV, **internet, **PLAIN_HTTP, "SWEEP_INTERVAL": "1", "LEASE_SECONDS": "10"})
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "researchsite.settings",
            "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
            "REDIS_URL": "",
            "CELERY_BROKER_URL": "filesystem://",
            "CELERY_BROKER_FOLDER": str(folder / "broker"),
            "CHANNEL_LAYER": "sqlite",
            "CHANNELS_DATABASE_PATH": str(folder / "channels.sqlite3"),
        }
    )
    return env


def test_research_runs_on_embedded_defaults(tmp_path, internet, research_model) -> None:
    # given the embedded stack: migrated SQLite databases, a user, daphne, a worker and beat
    env = embedded_env(tmp_path, internet)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "migrate", "--database", "channels", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [
            *manage,
            "shell",
            "-c",
            f"from django.contrib.auth.models import User; User.objects.create_user('alice', password={PASSWORD!r})",
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )
    pool = WorkerPool(env, count=1, concurrency=8, name="embedded").start(ping=False)
    beat = Beat(env).start()
    server = DaphneServer(env, name="embedded-daphne").start()
    try:
        session = login(server.url, "alice")
        # when a research is started through the API and watched over a websocket
        response = session.post(
            f"{server.url}/api/research/start",
            json={"prompt": "Heat pumps in cold climates", "questions": [], "breadth": 2, "depth": 2},
            headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": server.url + "/"},
            timeout=10,
        )
        assert response.status_code == 202, response.text
        research_id = response.json()["research_id"]
        socket = research_socket(server.url, session, research_id, timeout=30)
        seen = [e["seq"] for e in json.loads(socket.recv())["events"]]
        database = sqlite3.connect(tmp_path / "db.sqlite3")
        deadline = time.monotonic() + 180
        status = None
        while time.monotonic() < deadline:
            status = database.execute(
                "select status from research_research where id = ?", [research_id.replace("-", "")]
            ).fetchone()[0]
            if status in ("completed", "failed"):
                break
            time.sleep(0.3)
        # then it completed with the exact tree and one report, and the socket saw its events in order
        assert status == "completed"
        queries = database.execute("select count(*) from research_serpquery where status = 'done'").fetchone()[0]
        reports = database.execute("select count(*) from research_document where kind = 'report'").fetchone()[0]
        assert (queries, reports) == (4, 1)
        # and SQLite's trigger added every model call into the research's tally
        spent = "select sum(prompt_tokens), sum(completion_tokens) from "
        calls = database.execute(spent + "research_llmcall").fetchone()
        assert calls[0] > 0 and database.execute(spent + "research_usagetally").fetchone() == calls
        last = database.execute("select last_event_seq from research_research").fetchone()[0]
        deadline = time.monotonic() + 20
        while (not seen or seen[-1] < last) and time.monotonic() < deadline:
            message = json.loads(socket.recv())
            seen += [e["seq"] for e in message["events"] if not seen or e["seq"] > seen[-1]]
        assert seen == list(range(1, last + 1))
        socket.close()
        # and catch-up reads the same events from SQLite, each with its data and an aware time
        caught = session.get(f"{server.url}/api/research/{research_id}/events?after=0", timeout=10).json()["events"]
        assert [event["seq"] for event in caught] == seen
        assert all(isinstance(event["data"], dict) for event in caught)
        assert all(datetime.fromisoformat(event["created_at"]).utcoffset() is not None for event in caught)
    finally:
        server.stop()
        beat.stop()
        pool.stop()
