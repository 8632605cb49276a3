"""A step whose database connection dies under it runs again on a fresh one, in its own thread, at once; a statement
that failed on a live connection (a timeout) is left to Celery's retries with backoff."""

from collections.abc import Callable
from contextlib import nullcontext

import psycopg
import pytest
from django.db import OperationalError, connection, transaction

from tests.support.databases import database_dsn
from workers import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def terminate_this_connection() -> None:
    """What a database restart, a failover or a pooler's restart does to the connection of this thread."""
    pid = connection.connection.info.backend_pid
    with psycopg.connect(**database_dsn(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
        other.execute("SELECT pg_sleep(0.2)")  # the backend is gone before the next statement


def a_step(runs: list[int], fails: int, in_transaction: bool) -> Callable[[], None]:
    """A step whose connection is terminated under it in its first `fails` runs."""

    def run() -> None:
        runs.append(1)
        with transaction.atomic() if in_transaction else nullcontext():
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                if len(runs) <= fails:
                    terminate_this_connection()
                cursor.execute("SELECT 2")

    return run


@pytest.mark.parametrize("in_transaction", [True, False])
def test_a_step_whose_connection_is_terminated_runs_again_on_a_fresh_one(in_transaction, monkeypatch) -> None:
    # given a step whose connection is terminated under it twice, inside a transaction or between statements
    monkeypatch.setattr(tasks, "FRESH_CONNECTION_PAUSE", 0.01)
    runs: list[int] = []
    # when its task runs it
    tasks.run_on_fresh_connections(a_step(runs, 2, in_transaction), "a step", "task-1")
    # then it ran again, twice, and the third run went through on a fresh connection
    assert len(runs) == 3
    assert not tasks.connection_broken()


def test_a_connection_lost_in_a_transaction_is_known_by_its_error_though_django_reconnected() -> None:
    # given a transaction whose connection is terminated, which Django cleans up after
    connection.ensure_connection()
    with pytest.raises(OperationalError) as failed:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                terminate_this_connection()
                cursor.execute("SELECT 2")
    # then the error says the connection died, whatever the state of the thread's connection now
    assert tasks.connection_lost(failed.value)


def test_a_statement_timeout_on_a_live_connection_is_not_a_lost_connection() -> None:
    with pytest.raises(OperationalError) as failed:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 10")
            cursor.execute("SELECT pg_sleep(1)")
    assert not tasks.connection_lost(failed.value)


def test_a_step_is_run_again_a_bounded_number_of_times(monkeypatch) -> None:
    monkeypatch.setattr(tasks, "FRESH_CONNECTION_PAUSE", 0.01)
    runs: list[int] = []
    with pytest.raises(OperationalError):
        tasks.run_on_fresh_connections(a_step(runs, 100, in_transaction=True), "a step", "task-1")
    assert len(runs) == tasks.FRESH_CONNECTION_RUNS + 1
