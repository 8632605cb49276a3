"""The brokers (researchsite/broker.py): a filesystem message is never visible before it is whole, and a Redis
channel closed after its connection was released raises a connection error that kombu ignores, not a crash."""

import os
from pathlib import Path

import pytest
from django.conf import settings
from kombu import Connection

from devtools.processes import ROOT
from researchsite.broker import FilesystemTransport, RedisTransport


@pytest.fixture
def connection(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Connection:
    folder = str(tmp_path)
    # Every folder the transport writes, the exchange tables' control folder included (beside the messages' folder,
    # which holds messages only): kombu's default for it is "control" in the working directory, which wrote
    # control/tasks.exchange into the checkout.
    options = {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "control_folder": str(tmp_path_factory.mktemp("control")),
        "store_processed": False,
    }
    outside = {Path.cwd() / "control", ROOT / "control"}
    there = {path for path in outside if path.exists()}
    with Connection("filesystem://", transport_options=options) as conn:
        yield conn
    # Nothing was written outside the test's folder: no control folder appeared in the working directory or the
    # repository root.
    assert {path for path in outside if path.exists()} == there


def test_filesystem_urls_use_the_atomic_transport(connection: Connection) -> None:
    assert type(connection.transport) is FilesystemTransport


def test_a_message_appears_whole_and_round_trips(
    connection: Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a watch on the folder at the moment the message file gets its final name
    seen: list[list[str]] = []
    rename = os.replace

    def watched(source: str, target: str) -> None:
        seen.append(sorted(os.listdir(tmp_path)))
        assert Path(source).read_bytes()  # written before it is renamed into place
        rename(source, target)

    monkeypatch.setattr(os, "replace", watched)
    queue = connection.SimpleQueue("tasks")
    # when a message is published
    queue.put({"task": "workers.tasks.scrape_website_task", "id": 7})
    # then, until the rename, the folder held only a file no queue reads
    assert len(seen) == 1 and len(seen[0]) == 1 and "." not in seen[0][0]
    # and the consumer gets the message whole
    message = queue.get(timeout=2)
    assert message.payload == {"task": "workers.tasks.scrape_website_task", "id": 7}
    message.ack()
    queue.close()
    # and the queue's exchange table went to the test's control folder
    assert (Path(connection.transport_options["control_folder"]) / "tasks.exchange").exists()


def test_redis_channel_closed_after_release_is_a_connection_error() -> None:
    # given a channel on this run's Redis whose connection has been released (as a worker does on losing Redis)
    with Connection(settings.REDIS_URL) as conn:
        assert type(conn.transport) is RedisTransport
        channel = conn.channel()
        channel.connection.client = None
        # when the channel builds a client, as closing it does to restore unacknowledged messages
        with pytest.raises(conn.connection_errors) as raised:
            channel._connparams()
        # then kombu sees a connection error (which its close ignores), not an AttributeError
        assert not isinstance(raised.value, AttributeError)
