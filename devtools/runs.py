"""A Redis db of its own for each test or benchmark run, so that runs on one machine never share a broker or a
channel layer."""

from __future__ import annotations

# Test and benchmark runs claim their db under the same key, which keeps them apart from each other.
CLAIM_KEY = "deepresearch:test-run"
# A claim expires on its own, in case a run is killed before it gives its db back.
CLAIM_SECONDS = 3 * 3600


def claim_redis_db(base_url: str, owner: str) -> str:
    """The URL of a free Redis db (1-15) on the server of `base_url`, claimed for `owner` with SET NX and emptied."""
    import redis

    base = base_url.rsplit("/", 1)[0]
    for db in range(1, 16):
        candidate = f"{base}/{db}"
        connection = redis.Redis.from_url(candidate)
        if connection.set(CLAIM_KEY, owner, nx=True, ex=CLAIM_SECONDS):
            connection.flushdb()
            connection.set(CLAIM_KEY, owner, ex=CLAIM_SECONDS)
            return candidate
    raise RuntimeError("no free Redis db (1-15) for this run; are 15 runs going at once?")
