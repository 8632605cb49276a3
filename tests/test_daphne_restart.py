"""daphne restarted under a watching client: on reconnect it gets the full history and the current snapshot."""

import json
import time

import pytest
import requests
import websocket

from devtools.servers import PLAIN_HTTP, DaphneServer, process_env
from research.models import Event, Research
from tests.conftest import PASSWORD, WORKER_ENV
from tests.support.e2e import wait_finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class FixedPortDaphne(DaphneServer):
    """Comes back on the same port, as a restarted server behind the same address does."""

    def restart(self) -> None:
        port = self.port
        self.stop()
        self.launch(port)
        assert self.wait_ready(), "daphne did not come back"


def login(base: str, username: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/accounts/login/", timeout=10)
    response = session.post(
        f"{base}/accounts/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": f"{base}/accounts/login/"},
        timeout=10,
    )
    assert response.status_code == 200 and "sessionid" in session.cookies, response.status_code
    return session


def connect(server: DaphneServer, session: requests.Session, research_id: str) -> websocket.WebSocket:
    return websocket.create_connection(
        f"ws://127.0.0.1:{server.port}/ws/research/{research_id}/",
        cookie=f"sessionid={session.cookies['sessionid']}",
        origin=server.url,
        timeout=20,
    )


def test_reconnect_after_daphne_restart_gets_full_history(internet, workers, research_model, user, fake_llm) -> None:  # noqa: ANN001
    # given daphne, a logged-in user watching a running research
    env = process_env({**WORKER_ENV, **internet, **PLAIN_HTTP})
    server = FixedPortDaphne(env, name="daphne-restart").start()
    try:
        fake_llm.delays["website_analysis"] = 0.3
        session = login(server.url, user.username)
        response = session.post(
            f"{server.url}/api/research/start",
            json={"prompt": "Heat pumps in cold climates", "questions": [], "breadth": 2, "depth": 2},
            headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": server.url + "/"},
            timeout=10,
        )
        assert response.status_code == 202, response.text
        research_id = response.json()["research_id"]
        socket = connect(server, session, research_id)
        first = json.loads(socket.recv())
        assert first["type"] == "history"
        # when daphne restarts mid-research
        while Event.objects.filter(research_id=research_id).count() < 10:
            time.sleep(0.1)
        server.restart()
        with pytest.raises((websocket.WebSocketConnectionClosedException, ConnectionError, OSError)):
            for _ in range(1000):
                socket.recv()
        # then a reconnecting client gets every event so far, gap-free, and the snapshot that goes with them
        socket = connect(server, session, research_id)
        history = json.loads(socket.recv())
        seqs = [event["seq"] for event in history["events"]]
        assert history["type"] == "history" and seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 10
        assert history["snapshot"]["research"]["id"] == research_id
        assert history["snapshot"]["research"]["last_event_seq"] >= seqs[-1]
        # and live updates continue after the history, in order, until the research ends
        last = seqs[-1]
        research = wait_finished(research_id)
        deadline = time.monotonic() + 20
        while last < research.last_event_seq and time.monotonic() < deadline:
            message = json.loads(socket.recv())
            for event in message["events"]:
                assert event["seq"] <= last + 1  # in order (a repeat after a history is allowed)
                last = max(last, event["seq"])
        assert last == Research.objects.get(pk=research_id).last_event_seq
        socket.close()
    finally:
        server.stop()
