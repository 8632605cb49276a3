"""What makes a test run its own: environment defaults for the settings, and a Redis db no other run uses.

tests/settings.py calls `claim_test_run()` before it reads the production settings. The run id and the Redis db go
into the environment, so the worker and daphne processes the tests start (and a second settings import in this
process) inherit them instead of claiming again.

Under pytest-xdist (`make test` runs the suite on several test processes) each xdist worker is a run of its own: its
own run id, so its own test database, and its own Redis db. The controller's claim is in the environment the workers
inherit, so a worker claims again when the run it finds is not its own (RUN_OWNER_VARIABLE names the xdist worker
that claimed it); the processes a worker starts (Celery workers, daphne) get no PYTEST_* variables
(devtools/servers.py `process_env`), so they inherit that worker's run as before.
"""

from __future__ import annotations

import os
import uuid

from devtools.runs import claim_redis_db, release_redis_db

# Read by researchsite/settings.py; a variable set already (by CI or a developer) wins.
ENV_DEFAULTS = {
    "SECRET_KEY": "test-secret-key-" + "k" * 40,
    "SECURE_SSL_REDIRECT": "false",
    "SESSION_COOKIE_SECURE": "false",
    "CSRF_COOKIE_SECURE": "false",
    "OPENAI_API_KEY": "sk-test-never-a-real-key",
    "LOG_LEVEL": "WARNING",
    # Tests wait for pushes to settle; a shorter gathering window than the production 1 s keeps them quick.
    "PUSH_INTERVAL": "0.25",
    # Every push carries the checksum of the snapshot its delta must add up to: tests/test_deltas.py checks it.
    "PUSH_CHECKSUMS": "true",
    # The end-to-end and browser tests start researches for one user faster than a person would; the request rate
    # has tests of its own (tests/test_quotas.py), with the limit set there.
    "SPEND_RATE_LIMIT": "0",
}
RUN_VARIABLE = "DEEPRESEARCH_TEST_RUN"
# The xdist worker (gw0, gw1, ...) whose run RUN_VARIABLE names; empty for a run without xdist or its controller.
RUN_OWNER_VARIABLE = "DEEPRESEARCH_TEST_RUN_OWNER"


def claim_test_run() -> str:
    """Set the environment defaults, claim a free Redis db (1-15) for this run unless the environment names the
    run already (and, in an xdist worker, that run is this worker's), and return the run id (which also names the
    test database)."""
    for key, value in ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    run_id = os.environ.get(RUN_VARIABLE)
    xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not run_id or (xdist_worker and os.environ.get(RUN_OWNER_VARIABLE, "") != xdist_worker):
        run_id = uuid.uuid4().hex[:10]
        os.environ["REDIS_URL"] = claim_redis_db(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), run_id)
        os.environ[RUN_VARIABLE] = run_id
        os.environ[RUN_OWNER_VARIABLE] = xdist_worker
    return run_id


def release_test_run(redis_url: str, run_id: str) -> None:
    """Give this run's Redis db back: empty it, the claim key with the rest, if the run still holds it (a run that
    gave it back already, or whose claim expired, leaves the db to whoever claimed it since)."""
    import redis

    try:
        release_redis_db(redis_url, run_id)
    except redis.RedisError:
        pass
