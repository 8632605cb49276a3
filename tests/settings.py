"""Settings for a test run: the production settings, with a database and a Redis db number of its own.

Each run claims a free Redis db (1-15) with SET NX, so two runs on one machine never share a broker or a
channel layer. The choice goes into the environment, so worker and daphne processes the tests start inherit it.
"""

import os
import uuid

import redis

os.environ.setdefault("SECRET_KEY", "test-secret-key-" + "k" * 40)
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("SESSION_COOKIE_SECURE", "false")
os.environ.setdefault("CSRF_COOKIE_SECURE", "false")
os.environ.setdefault("OPENAI_API_KEY", "sk-test-never-a-real-key")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Tests wait for pushes to settle; a shorter gathering window than the production 1 s keeps them quick.
os.environ.setdefault("PUSH_INTERVAL", "0.25")

RUN_ID = os.environ.get("DEEPRESEARCH_TEST_RUN")
if not RUN_ID:
    RUN_ID = uuid.uuid4().hex[:10]
    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
    for db in range(1, 16):
        candidate = f"{base}/{db}"
        connection = redis.Redis.from_url(candidate)
        # Expires on its own in case a run is killed before it cleans up.
        if connection.set("deepresearch:test-run", RUN_ID, nx=True, ex=3 * 3600):
            connection.flushdb()
            connection.set("deepresearch:test-run", RUN_ID, ex=3 * 3600)
            os.environ["REDIS_URL"] = candidate
            break
    else:
        raise RuntimeError("no free Redis db (1-15) for this test run; are 15 runs going at once?")
    os.environ["DEEPRESEARCH_TEST_RUN"] = RUN_ID

from researchsite.settings import *  # noqa: E402,F403
from researchsite.settings import DATABASES  # noqa: E402

DATABASES["default"]["TEST"] = {"NAME": f"test_deepresearch_{RUN_ID}"}
