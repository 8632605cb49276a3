"""daphne restarted under a watching client: on reconnect it gets the full history and the current snapshot."""

import json
import time

import pytest
import websocket

from devtools.servers import PLAIN_HTTP, DaphneServer, process_env
from research.models import Event, Research
from tests.support.e2e import WORKER_ENV, wait_finished
from tests.support.logins import login, research_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class FixedPortDaphne(DaphneServer):
    """Comes back on the same port, as a restarted server behind the same address does."""

    def restart(self) -> None:
        port = self.port
        self.stop()
        self.launch(port)
        assert self.wait_ready(), "daphne did not come back"


def test_reconnect_after_daphne_restart_gets_full_history(internet, workers, research_model, user, fake_llm) -> None:
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
        socket = research_socket(server.url, session, research_id)
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
        socket = research_socket(server.url, session, research_id)
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
